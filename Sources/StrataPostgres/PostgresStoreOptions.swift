#if Postgres
import Foundation
import Logging
import PostgresNIO
import Strata

/// How a ``PostgresStore`` uses its table and its connections: one value for what the store's
/// initialisers used to take as ten parameters, so a composition root builds it once and each
/// initialiser names only where the database is and how values are encoded.
///
/// ```swift
/// var options = PostgresStoreOptions(table: "feed_cache")
/// options.maxAge = .seconds(24 * 3600)
/// let store = try PostgresStore<[FeedItem]>(url: databaseURL, options: options)
/// ```
public struct PostgresStoreOptions: Sendable {
    /// The table holding the entries: letters, digits and `_`, starting with a letter or `_`, at most
    /// 48 characters. Created on first use. `strata_cache` by default.
    public var table: String
    /// How long an operation waits for a connection before failing (3 s).
    public var connectTimeout: Duration
    /// How long an operation may take once connected, and wait for a connection while the pool is
    /// busy rather than unreachable (30 s).
    public var queryTimeout: Duration
    /// How long the server lets one statement run before it aborts it: at least 1 ms and below
    /// ``queryTimeout``. `nil`, the default: nine tenths of ``queryTimeout``.
    public var statementTimeout: Duration?
    /// When set, rows are stamped to expire `maxAge` after their `storedAt`, and expired rows are
    /// swept after an insert, at most once a minute per store.
    public var maxAge: Duration?
    /// The wall clock for `last_access` and expiry.
    public var now: @Sendable () -> Date
    /// Where undecodable rows, sweeps and the connection pool's own messages go.
    public var logger: Logger

    /// The options, each with its default unless given.
    public init(
        table: String = "strata_cache",
        connectTimeout: Duration = .seconds(3),
        queryTimeout: Duration = .seconds(30),
        statementTimeout: Duration? = nil,
        maxAge: Duration? = nil,
        now: @escaping @Sendable () -> Date = { Date() },
        logger: Logger = Logger(label: "strata.postgresstore")
    ) {
        self.table = table
        self.connectTimeout = connectTimeout
        self.queryTimeout = queryTimeout
        self.statementTimeout = statementTimeout
        self.maxAge = maxAge
        self.now = now
        self.logger = logger
    }
}

extension PostgresStore {
    /// Creates a store on the database at `url`, `postgres://user:password@host:port/database`
    /// (`?sslmode=` chooses TLS, as with `libpq`; the password never appears in an error).
    ///
    /// - Throws: `StoreError` (operation `open`) for a URL it cannot use, a bad table name, or a
    ///   statement timeout not below the query timeout.
    public convenience init(url: String, codec: some Codec<Value>, options: PostgresStoreOptions = PostgresStoreOptions())
        throws(StoreError)
    {
        let parsed = try PostgresURL.parse(url)
        try self.init(
            configuration: parsed.configuration, tls: parsed.tls, applicationClient: nil, table: options.table,
            codec: codec, connectTimeout: options.connectTimeout, queryTimeout: options.queryTimeout,
            statementTimeout: options.statementTimeout, maxAge: options.maxAge, now: options.now, logger: options.logger)
    }

    /// Creates a store on the database at `url` that encodes values as JSON.
    public convenience init(url: String, options: PostgresStoreOptions = PostgresStoreOptions()) throws(StoreError)
    where Value: Codable {
        try self.init(url: url, codec: JSONCodec<Value>(), options: options)
    }

    /// Creates a store on the database `configuration` points at, with a client of its own. Its
    /// `options.connectTimeout` is set to the options' ``PostgresStoreOptions/connectTimeout``.
    public convenience init(
        configuration: PostgresClient.Configuration, codec: some Codec<Value>,
        options: PostgresStoreOptions = PostgresStoreOptions()
    ) throws(StoreError) {
        try self.init(configuration: configuration, applicationClient: nil, codec: codec, options: options)
    }

    /// Creates a store on the database `configuration` points at that encodes values as JSON.
    public convenience init(configuration: PostgresClient.Configuration, options: PostgresStoreOptions = PostgresStoreOptions())
        throws(StoreError) where Value: Codable
    {
        try self.init(configuration: configuration, codec: JSONCodec<Value>(), options: options)
    }

    /// Creates a store on the application's `client` (which the application runs), described by
    /// the `configuration` it was made with.
    public convenience init(
        client: PostgresClient, configuration: PostgresClient.Configuration, codec: some Codec<Value>,
        options: PostgresStoreOptions = PostgresStoreOptions()
    ) throws(StoreError) {
        try self.init(configuration: configuration, applicationClient: client, codec: codec, options: options)
    }

    /// A store on the application's client, or on one of its own (`applicationClient` `nil`).
    convenience init(
        configuration: PostgresClient.Configuration, applicationClient: PostgresClient?, codec: some Codec<Value>,
        options: PostgresStoreOptions
    ) throws(StoreError) {
        try self.init(
            configuration: configuration, applicationClient: applicationClient, table: options.table, codec: codec,
            connectTimeout: options.connectTimeout, queryTimeout: options.queryTimeout,
            statementTimeout: options.statementTimeout, maxAge: options.maxAge, now: options.now, logger: options.logger)
    }

    /// Creates a store on the application's `client` that encodes values as JSON.
    public convenience init(
        client: PostgresClient, configuration: PostgresClient.Configuration,
        options: PostgresStoreOptions = PostgresStoreOptions()
    ) throws(StoreError) where Value: Codable {
        try self.init(client: client, configuration: configuration, codec: JSONCodec<Value>(), options: options)
    }
}
#endif
