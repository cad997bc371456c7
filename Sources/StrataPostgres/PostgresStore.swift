#if Postgres
import Foundation
import Logging
import PostgresNIO
@_spi(StrataInternals) import Strata

/// A cache shared by many processes and hosts: one PostgreSQL table, reached through PostgresNIO's
/// connection pool (`PostgresClient`).
///
/// ```swift
/// let shared = try PostgresStore<[FeedItem]>(url: "postgres://app:secret@db.internal:5432/cache")
/// let feed = memory.loader(key: "feed", freshness: .maxAge(.seconds(1 * 60)))
///     .fallingBack(to: shared.loader(key: "feed", freshness: .maxAge(.seconds(1 * 3600))))
///     .fallingBack(to: remote.writingThrough(in: shared, key: "feed"))
/// ```
///
/// ## Lifecycle
/// Three ways to run it:
/// - **On its own** (the initializers with `url:` or `configuration:`): the store makes its own
///   `PostgresClient` and runs the client's `run()` in a task of its own from `init` on. Call
///   ``shutdown()`` when you are done (it closes the pool's connections); a store that is simply
///   released cancels that task too.
/// - **In a `ServiceGroup`** (swift-service-lifecycle): the store is a `Service`. Its ``run()`` sweeps
///   expired rows every minute and, on cancellation or graceful shutdown, calls ``shutdown()``.
/// - **On the application's client**
///   (``init(client:configuration:table:codec:connectTimeout:queryTimeout:statementTimeout:maxAge:now:logger:)``):
///   the application runs the `PostgresClient` (and shuts it down); the store only uses it, and its
///   ``shutdown()`` leaves the client running.
///
/// Connections are opened on demand, so creating a store never fails because the database is down:
/// the operations do.
///
/// ## Table
/// Created on first use with `CREATE TABLE IF NOT EXISTS` under a transaction-scoped advisory lock, so
/// any number of processes may start at once:
///
/// | column | type | holds |
/// |---|---|---|
/// | `key` | `TEXT PRIMARY KEY` | the cache key |
/// | `value` | `BYTEA` | the codec's bytes |
/// | `stored_at` | `TIMESTAMPTZ` | when the value was stored (microseconds, for queries and people) |
/// | `stored_at_seconds` | `DOUBLE PRECISION` | the same instant, exact (`Date`'s seconds since 2001) |
/// | `etag`, `last_modified` | `TEXT` | HTTP validators |
/// | `last_access` | `TIMESTAMPTZ` | last insert or read (reads update it at most once a minute) |
/// | `size` | `INTEGER` | byte count of `value`; a row whose value has another length is corrupt |
/// | `expires_at` | `TIMESTAMPTZ NULL` | `stored_at + maxAge` when the writing store has a ``maxAge`` |
/// | `max_age_seconds`, `max_age_attoseconds` | `BIGINT NULL` | the server's freshness lifetime (``CacheValidators/maxAge``), exact; added in place to older tables |
/// | `format_version` | `INTEGER` | the writing store's ``formatVersion``; a store reads only its own (added in place, 0) |
/// | `tags` | `TEXT[]` | the entry's tags (``tagEntries(with:)``), for ``invalidate(_:as:)`` (GIN index; added in place, empty) |
///
/// Writes are one `INSERT … ON CONFLICT (key) DO UPDATE`: a reader in any process sees the old row
/// or the new one, and a failed write leaves the old row untouched. All values travel as bind
/// parameters; the table name is checked to be a plain identifier and always quoted.
///
/// ## Maintenance
/// ``count``, ``removeAll()``, ``removeEntries(storedBefore:)`` (exact to the bit of `storedAt`),
/// ``removeEntries(lastAccessedBefore:)`` and ``removeExpiredEntries()``. A store made with a
/// ``maxAge`` stamps `expires_at` and sweeps expired rows itself after inserts, at most once a minute.
///
/// ## Failures
/// - An operation that cannot get a connection throws a `StoreError` whose reason starts
///   `database unreachable at host:port:` and whose `underlying` error is a
///   ``PostgresConnectionError`` stating the cause (``PostgresConnectionError/Cause``: refused,
///   unreachable, TLS, authentication rejected, database missing), so a `fallingBack(to:)` can serve
///   another tier. PostgresNIO's pool retries failed connection attempts without failing the
///   waiting operation, so when an operation has waited briefly and no operation of the store got a
///   connection, the store connects once by itself (`PostgresConnection.connect`, same settings) and
///   classifies the typed `PSQLError` that attempt fails with; the operation fails as soon as that
///   attempt does, or after ``connectTimeout`` when attempts hang. When the pool is merely busy
///   (other operations keep getting connections) it waits up to ``queryTimeout`` instead. Once
///   connected, an operation that gets no answer within ``queryTimeout`` closes its connection and
///   throws. No operation hangs.
/// - The server aborts a statement that runs past ``statementTimeout`` (below ``queryTimeout``) and
///   rolls it back, so a slow statement fails before the store stops waiting for it, with a
///   ``PostgresStatementTimeoutError`` as the `underlying` error, instead of committing after the caller
///   was told it failed.
/// - A row that no longer decodes (wrong length, bytes the codec rejects, columns of the wrong type) is
///   a miss: it is deleted (unless another writer replaced it meanwhile) and logged at `warning`.
/// - Credentials never appear in ``description``, errors or logs.
public final class PostgresStore<Value: Sendable>: Store, Sendable {
    /// Keys are strings (the `key` column, `TEXT PRIMARY KEY`).
    public typealias Key = String

    /// The table holding the entries.
    public let table: String
    /// Where the database is, without credentials: `host:port/database`.
    public let endpoint: String
    /// The server alone, `host:port` (or the socket path), for "unreachable" reasons.
    let address: String
    /// How long an operation waits for a connection before it fails as unreachable (it fails sooner
    /// when a connection attempt fails outright).
    public let connectTimeout: Duration
    /// How long an operation may take once it has a connection; past it the connection is closed and
    /// the operation throws. Also how long an operation waits for a connection while the pool is busy
    /// (others' operations keep getting connections) rather than unreachable.
    public let queryTimeout: Duration
    /// How long the server lets one statement of the store run before it aborts it, in whole
    /// milliseconds: strictly below ``queryTimeout``, so that the server gives up on a statement (and
    /// rolls it back) before the store stops waiting for it. A write that fails this way throws a
    /// `StoreError` whose `underlying` error is a ``PostgresStatementTimeoutError``: it was not committed.
    ///
    /// Set as the server's `statement_timeout`: once per connection on the store's own client (a
    /// `SET` for the session), and for each operation's transaction (`SET LOCAL`) on the
    /// application's client, whose sessions are not the store's to change. Nine tenths of
    /// ``queryTimeout`` by default (27 seconds for the default 30).
    public let statementTimeout: Duration
    /// How long entries are kept, if limited; see ``removeExpiredEntries()``.
    public let maxAge: Duration?

    let client: PostgresClient
    /// The task running the store's own client; `nil` on an application's client.
    let runner: Task<Void, Never>?
    let codec: any Codec<Value>
    let now: @Sendable () -> Date
    let logger: Logger
    let watchdog: PostgresConnectionWatchdog
    let state = Locked(State())
    /// The name in ``description`` and errors: `PostgresStore`, or the type using this store's
    /// connection handling for a table of its own (`PostgresOutboxStorage`).
    let name: String
    /// Creates the tables before an operation's first statements instead of the cache table's
    /// ``createTable(on:)``: for a type that runs its own statements through ``perform(_:key:_:)``.
    /// Runs once per store, inside a transaction the store opens.
    let preparation: (@Sendable (PostgresConnection, Logger) async throws -> Void)?
    /// Whether the server bounds statements by ``statementTimeout``: always, except in the tests of
    /// the client's own bound (``queryTimeout``), which need a server that does not answer first.
    let boundsStatements: Bool
    /// The sessions of the store's own client that have ``statementTimeout`` set.
    let boundSessions = Locked<[ObjectIdentifier: BoundSession]>([:])

    struct State: Sendable {
        var tableReady = false
        var lastSweep: Date?
        var isShutDown = false
        /// When an operation last got a connection, or finished its work on one.
        var lastProgress: ContinuousClock.Instant?
        /// The sender this store's writes announce themselves as (``announceChanges(as:)``).
        var announcingNode: String?
        /// The identity they announce themselves with (``announceChanges(as:instance:)``).
        var announcingInstance: String?
        var formatVersion: Int32 = 0
        var maxValueBytes = PostgresStore.defaultMaxValueBytes
        /// The tags each written entry carries (``tagEntries(with:)``).
        var tagger: (@Sendable (String, Value) -> [String])?
    }

    /// How often a store with a ``maxAge`` sweeps expired rows (after an insert).
    static var sweepInterval: TimeInterval { 60 }
    /// How stale `last_access` may get before a read refreshes it.
    static var accessGranularity: TimeInterval { 60 }

    /// Creates a store on the database `configuration` points at.
    ///
    /// - Parameters:
    ///   - configuration: where and how to connect. Its `options.connectTimeout` is set to `connectTimeout`.
    ///   - table: the table holding the entries: letters, digits and `_`, starting with a letter or `_`,
    ///     at most 48 characters. Created on first use.
    ///   - codec: turns values into bytes and back.
    ///   - connectTimeout: how long an operation waits for a connection before failing (3 seconds by default).
    ///   - queryTimeout: how long an operation may take once connected, and wait for a connection while
    ///     the pool is busy rather than unreachable (30 seconds by default).
    ///   - statementTimeout: how long the server lets one statement run before it aborts it: at least
    ///     1 ms and below `queryTimeout` (see ``statementTimeout``). `nil`, the default: nine tenths of
    ///     `queryTimeout`.
    ///   - maxAge: when set, rows are stamped to expire `maxAge` after their `storedAt`, and expired rows
    ///     are swept after an insert, at most once a minute per store.
    ///   - now: the wall clock for `last_access` and expiry.
    ///   - logger: where undecodable rows, sweeps and the connection pool's own messages go (the pool's
    ///     routine messages, such as each failed connection attempt, at `debug`).
    /// - Throws: `StoreError` (operation `open`) when `table` is not a plain identifier, or
    ///   `statementTimeout` is not below `queryTimeout`.
    @available(*, deprecated, message: "pass table, timeouts, maxAge, now and logger as options: PostgresStoreOptions(…)")
    public convenience init(
        configuration: PostgresClient.Configuration,
        table: String = "strata_cache",
        codec: some Codec<Value>,
        connectTimeout: Duration = .seconds(3),
        queryTimeout: Duration = .seconds(30),
        statementTimeout: Duration? = nil,
        maxAge: Duration? = nil,
        now: @escaping @Sendable () -> Date = { Date() },
        logger: Logger = Logger(label: "strata.postgresstore")
    ) throws(StoreError) {
        try self.init(
            configuration: configuration, applicationClient: nil, table: table, codec: codec,
            connectTimeout: connectTimeout, queryTimeout: queryTimeout, statementTimeout: statementTimeout,
            maxAge: maxAge, now: now, logger: logger)
    }

    /// Creates a store on a `PostgresClient` the application already runs.
    ///
    /// The application owns the client: it runs it (`client.run()`, or in its `ServiceGroup`) for as
    /// long as the store is used, and shuts it down. The store never runs it, and ``shutdown()`` leaves
    /// it running (it only stops this store). Operations wait for a connection while the client is
    /// not running, and fail after ``connectTimeout`` as unreachable.
    ///
    /// ```swift
    /// let client = PostgresClient(configuration: configuration)
    /// let store = try PostgresStore<[FeedItem]>(client: client, configuration: configuration)
    /// try await withThrowingDiscardingTaskGroup { group in
    ///     group.addTask { await client.run() }
    ///     _ = try await store.retrieve("feed")
    ///     group.cancelAll()  // the application stops its client when it is done
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - client: the application's client. Its own `connectTimeout` applies to its connection
    ///     attempts; the store's ``connectTimeout`` bounds how long an operation waits for one.
    ///   - configuration: the configuration the client was made with (a `PostgresClient` does not
    ///     expose its own): it names the database in ``description`` and errors, and the store uses it
    ///     to connect once by itself to find out why the client gets no connection.
    ///   - table, codec, connectTimeout, queryTimeout, statementTimeout, maxAge, now: as in
    ///     ``init(configuration:table:codec:connectTimeout:queryTimeout:statementTimeout:maxAge:now:logger:)``.
    ///     On the application's client every operation is one transaction, so that ``statementTimeout``
    ///     is set for it alone (`SET LOCAL`): `BEGIN` and `COMMIT` are two more round trips per operation.
    ///   - logger: where undecodable rows and sweeps go (the client logs to its own logger).
    /// - Throws: `StoreError` (operation `open`) when `table` is not a plain identifier, or
    ///   `statementTimeout` is not below `queryTimeout`.
    @available(*, deprecated, message: "pass table, timeouts, maxAge, now and logger as options: PostgresStoreOptions(…)")
    public convenience init(
        client: PostgresClient,
        configuration: PostgresClient.Configuration,
        table: String = "strata_cache",
        codec: some Codec<Value>,
        connectTimeout: Duration = .seconds(3),
        queryTimeout: Duration = .seconds(30),
        statementTimeout: Duration? = nil,
        maxAge: Duration? = nil,
        now: @escaping @Sendable () -> Date = { Date() },
        logger: Logger = Logger(label: "strata.postgresstore")
    ) throws(StoreError) {
        try self.init(
            configuration: configuration, applicationClient: client, table: table, codec: codec,
            connectTimeout: connectTimeout, queryTimeout: queryTimeout, statementTimeout: statementTimeout,
            maxAge: maxAge, now: now, logger: logger)
    }

    /// Creates a store on a `PostgresClient` the application already runs, that encodes values as JSON;
    /// see ``init(client:configuration:table:codec:connectTimeout:queryTimeout:statementTimeout:maxAge:now:logger:)``.
    @available(*, deprecated, message: "pass table, timeouts, maxAge, now and logger as options: PostgresStoreOptions(…)")
    public convenience init(
        client: PostgresClient,
        configuration: PostgresClient.Configuration,
        table: String = "strata_cache",
        connectTimeout: Duration = .seconds(3),
        queryTimeout: Duration = .seconds(30),
        statementTimeout: Duration? = nil,
        maxAge: Duration? = nil,
        now: @escaping @Sendable () -> Date = { Date() },
        logger: Logger = Logger(label: "strata.postgresstore")
    ) throws(StoreError) where Value: Codable {
        try self.init(
            client: client, configuration: configuration, table: table, codec: JSONCodec<Value>(),
            connectTimeout: connectTimeout, queryTimeout: queryTimeout, statementTimeout: statementTimeout,
            maxAge: maxAge, now: now, logger: logger)
    }

    /// The one designated initializer: on the application's client when `applicationClient` is given,
    /// else on a client of the store's own, run from here on.
    ///
    /// `tls` is the TLS mode the store's connections use, as the store was given it (a URL's
    /// `sslmode`, or read from `configuration`), for the watchdog's own connection attempt; `nil`
    /// when it is not known, which turns that attempt off (with one log line) for a TCP connection.
    init(
        configuration: PostgresClient.Configuration,
        tls: PostgresTLSMode?,
        applicationClient: PostgresClient?,
        table: String,
        codec: some Codec<Value>,
        connectTimeout: Duration,
        queryTimeout: Duration,
        statementTimeout: Duration?,
        maxAge: Duration?,
        now: @escaping @Sendable () -> Date,
        logger: Logger,
        name: String = "PostgresStore",
        boundsStatements: Bool = true,
        preparation: (@Sendable (PostgresConnection, Logger) async throws -> Void)? = nil
    ) throws(StoreError) {
        let (address, endpoint) = Self.endpoint(of: configuration)
        guard Self.isValidTableName(table) else {
            throw StoreError(
                store: "\(name)(\(endpoint))", operation: .open, key: nil,
                reason: "table name \(String(reflecting: table)) is not a plain identifier "
                    + "(letters, digits and _, not starting with a digit, at most 48 characters)")
        }
        precondition(connectTimeout > .zero && queryTimeout > .zero, "timeouts must be positive")
        precondition(maxAge.map { $0 > .zero } ?? true, "maxAge must be positive")
        let statementTimeout = Self.wholeMilliseconds(statementTimeout ?? Self.defaultStatementTimeout(below: queryTimeout))
        guard statementTimeout >= .milliseconds(1), statementTimeout < queryTimeout else {
            throw StoreError(
                store: "\(name)(\(endpoint)/\(table))", operation: .open, key: nil,
                reason: "statementTimeout (\(PostgresConnectionWatchdog.format(statementTimeout)) in whole milliseconds) "
                    + "must be at least 1 ms and below queryTimeout (\(PostgresConnectionWatchdog.format(queryTimeout))), "
                    + "so that the server aborts a statement before the store stops waiting for it")
        }
        var configuration = configuration
        if let applicationClient {
            self.client = applicationClient
            self.runner = nil
        } else {
            configuration.options.connectTimeout = connectTimeout
            let client = PostgresClient(
                configuration: configuration,
                backgroundLogger: Logger(label: logger.label) { _ in PoolLogHandler(forward: logger) })
            self.client = client
            self.runner = Task { await client.run() }
        }
        self.table = table
        self.name = name
        self.preparation = preparation
        self.boundsStatements = boundsStatements
        self.endpoint = endpoint
        self.address = address
        self.codec = codec
        self.connectTimeout = connectTimeout
        self.queryTimeout = queryTimeout
        self.statementTimeout = statementTimeout
        self.maxAge = maxAge
        self.now = now
        self.logger = logger
        self.watchdog = PostgresConnectionWatchdog(
            configuration: configuration, tls: tls, address: address, connectTimeout: connectTimeout,
            // The attempt's own messages, like the pool's: diagnostics at `debug`.
            logger: Logger(label: logger.label) { _ in PoolLogHandler(forward: logger) })
        if !watchdog.canProbe {
            logger.warning(
                """
                the TLS mode of the client configuration is not known: the store does not connect by itself to find \
                out why it gets no connection, and an unreachable database fails after connectTimeout
                """,
                metadata: ["store": "\(description)", "connectTimeout": "\(PostgresConnectionWatchdog.format(connectTimeout))"])
        }
    }

    /// The designated initializer for a configuration the application made: the TLS mode is read
    /// from it (``PostgresTLSMode/init(reading:)``).
    convenience init(
        configuration: PostgresClient.Configuration,
        applicationClient: PostgresClient?,
        table: String,
        codec: some Codec<Value>,
        connectTimeout: Duration,
        queryTimeout: Duration,
        statementTimeout: Duration?,
        maxAge: Duration?,
        now: @escaping @Sendable () -> Date,
        logger: Logger
    ) throws(StoreError) {
        try self.init(
            configuration: configuration, tls: PostgresTLSMode(reading: configuration.tls), applicationClient: applicationClient,
            table: table, codec: codec, connectTimeout: connectTimeout, queryTimeout: queryTimeout,
            statementTimeout: statementTimeout, maxAge: maxAge, now: now, logger: logger)
    }

    /// Creates a store on the database at `url`, `postgres://user:password@host:port/database`.
    ///
    /// `postgresql://` works too; the port defaults to 5432 and the database to the user's name.
    /// `?sslmode=` chooses TLS: `disable`; `allow` or `prefer` (the default, as with `libpq`): TLS when
    /// the server offers it; `require`, `verify-ca` or `verify-full`: TLS or no connection, with the
    /// server's certificate and host name verified.
    /// Percent-encoded user names and passwords are decoded. See
    /// ``init(configuration:table:codec:connectTimeout:queryTimeout:statementTimeout:maxAge:now:logger:)`` for the rest.
    /// - Throws: `StoreError` (operation `open`) for a URL it cannot use, or a bad table name. The
    ///   error never contains the password.
    @available(*, deprecated, message: "pass table, timeouts, maxAge, now and logger as options: PostgresStoreOptions(…)")
    public convenience init(
        url: String,
        table: String = "strata_cache",
        codec: some Codec<Value>,
        connectTimeout: Duration = .seconds(3),
        queryTimeout: Duration = .seconds(30),
        statementTimeout: Duration? = nil,
        maxAge: Duration? = nil,
        now: @escaping @Sendable () -> Date = { Date() },
        logger: Logger = Logger(label: "strata.postgresstore")
    ) throws(StoreError) {
        // The URL's sslmode is the TLS mode, for the pool and the watchdog alike.
        let parsed = try PostgresURL.parse(url)
        try self.init(
            configuration: parsed.configuration, tls: parsed.tls, applicationClient: nil, table: table, codec: codec,
            connectTimeout: connectTimeout, queryTimeout: queryTimeout, statementTimeout: statementTimeout,
            maxAge: maxAge, now: now, logger: logger)
    }

    /// Creates a store on the database at `url` that encodes values as JSON.
    @available(*, deprecated, message: "pass table, timeouts, maxAge, now and logger as options: PostgresStoreOptions(…)")
    public convenience init(
        url: String,
        table: String = "strata_cache",
        connectTimeout: Duration = .seconds(3),
        queryTimeout: Duration = .seconds(30),
        statementTimeout: Duration? = nil,
        maxAge: Duration? = nil,
        now: @escaping @Sendable () -> Date = { Date() },
        logger: Logger = Logger(label: "strata.postgresstore")
    ) throws(StoreError) where Value: Codable {
        try self.init(
            url: url, table: table, codec: JSONCodec<Value>(), connectTimeout: connectTimeout,
            queryTimeout: queryTimeout, statementTimeout: statementTimeout, maxAge: maxAge, now: now, logger: logger)
    }

    /// Creates a store on the database `configuration` points at that encodes values as JSON.
    @available(*, deprecated, message: "pass table, timeouts, maxAge, now and logger as options: PostgresStoreOptions(…)")
    public convenience init(
        configuration: PostgresClient.Configuration,
        table: String = "strata_cache",
        connectTimeout: Duration = .seconds(3),
        queryTimeout: Duration = .seconds(30),
        statementTimeout: Duration? = nil,
        maxAge: Duration? = nil,
        now: @escaping @Sendable () -> Date = { Date() },
        logger: Logger = Logger(label: "strata.postgresstore")
    ) throws(StoreError) where Value: Codable {
        try self.init(
            configuration: configuration, table: table, codec: JSONCodec<Value>(), connectTimeout: connectTimeout,
            queryTimeout: queryTimeout, statementTimeout: statementTimeout, maxAge: maxAge, now: now, logger: logger)
    }

    deinit {
        runner?.cancel()
    }

    /// Stops the store: operations after this throw. A store with a client of its own also closes its
    /// connection pool and waits until it has stopped, for at most ``shutdownTimeout``; a store on the
    /// application's client leaves that client running.
    ///
    /// PostgresNIO's pool can fail to stop when one of its connections was closed under a running
    /// query (what the ``queryTimeout`` watchdog does). Past the bound the pool is abandoned with a
    /// warning: its connections are closed, and the process does not wait for its bookkeeping.
    public func shutdown() async {
        state.withLock { $0.isShutDown = true }
        guard let runner else { return }  // the application's client: not the store's to stop
        runner.cancel()
        if case .deadline = await raceAgainstDeadline(clock: ContinuousClock(), duration: Self.shutdownTimeout, { await runner.value }) {
            logger.warning(
                "the connection pool did not stop within the shutdown bound; abandoning it",
                metadata: ["store": "\(description)", "bound": "\(Self.shutdownTimeout)"])
        }
    }

    /// The format version written with every row (0 by default). A row of another version is a
    /// miss that this store leaves in place, and it never re-stamps one: during a rollout, the
    /// processes of the old and the new version of an app share one table, each reading only the
    /// rows it can decode (a key both use is loaded by each and written over by the last). Raise
    /// it when the stored value's encoding changes; set it before the store's first use.
    ///
    /// - Important: A store that does not check `format_version` reads every row whatever its
    ///   version (and deletes one it cannot decode). Raise the version only once every process that
    ///   shares the table runs a store that checks it.
    public var formatVersion: Int32 {
        get { state.withLock { $0.formatVersion } }
        set { state.withLock { $0.formatVersion = newValue } }
    }

    /// The largest encoded value the store keeps, in bytes (1 MiB by default). A larger value is
    /// not stored: `insert` logs it at `warning`, removes the key's row (so that no process serves
    /// the value it replaced) and returns, so the load that produced it still answers.
    public var maxValueBytes: Int {
        get { state.withLock { $0.maxValueBytes } }
        set {
            precondition(newValue >= 0, "maxValueBytes must not be negative")
            state.withLock { $0.maxValueBytes = newValue }
        }
    }

    /// 1 MiB.
    public static var defaultMaxValueBytes: Int { 1 << 20 }

    /// How long ``shutdown()`` waits for the connection pool to stop.
    public static var shutdownTimeout: Duration { .seconds(10) }

    /// Values from this store are shared with other processes: ``Origin/sharedCache``.
    public var origin: Origin { .sharedCache }

    // MARK: Store

    /// The entry for `key`, or `nil` when there is none or its row no longer decodes (that row is
    /// then deleted and logged at `warning`).
    /// - Throws: `StoreError` when the database is unreachable or the query fails.
    @concurrent
    public func retrieve(_ key: String) async throws -> CacheEntry<Value>? {
        let now = now()
        let staleAccess = now.addingTimeInterval(-Self.accessGranularity)
        let version = formatVersion
        let read: RowRead? = try await perform(.retrieve, key: key) { [table] connection, logger in
            // The touch and the read are one statement; the read sees the row as it was before the touch.
            // A row of another format version is another version of the app's: a miss, left alone.
            let rows = try await connection.queryUnlessClosed("""
                WITH touched AS (
                    UPDATE "\(unescaped: table)" SET last_access = \(now)
                    WHERE key = \(key) AND last_access < \(staleAccess) AND format_version = \(version)
                )
                SELECT value, stored_at_seconds, etag, last_modified, size, max_age_seconds, max_age_attoseconds
                FROM "\(unescaped: table)" WHERE key = \(key) AND format_version = \(version)
                """, logger: logger)
            // At most one row (the key is the primary key); read to the end either way, so the
            // statement completes before the connection goes back to the pool.
            var read: RowRead?
            for try await row in rows where read == nil {
                do {
                    let (value, seconds, etag, lastModified, size, maxAgeSeconds, maxAgeAttoseconds) = try row.decode(
                        (Data, Double, String?, String?, Int32, Int64?, Int64?).self)
                    let maxAge = maxAgeSeconds.map { Duration(secondsComponent: $0, attosecondsComponent: maxAgeAttoseconds ?? 0) }
                    read = .row(value: value, seconds: seconds, etag: etag, lastModified: lastModified, size: size, maxAge: maxAge)
                } catch {
                    read = .malformed("\(error)")
                }
            }
            return read
        }
        return await entry(from: read, key: key)
    }

    /// The entries for `keys` in one statement (`WHERE key = ANY(…)`), which also touches their
    /// `last_access` as ``retrieve(_:)`` does; a row that no longer decodes is a miss (deleted and
    /// logged). Keys with no row are absent.
    /// - Throws: `StoreError` (operation `retrieve`) when the database is unreachable or the query fails.
    @concurrent
    public func retrieveMany(_ keys: [String]) async throws -> [String: CacheEntry<Value>] {
        let keys = Array(Set(keys))
        guard !keys.isEmpty else { return [:] }
        let now = now()
        let staleAccess = now.addingTimeInterval(-Self.accessGranularity)
        let version = formatVersion
        let reads: [(String, RowRead)] = try await perform(.retrieve, key: keys.count == 1 ? keys[0] : nil) { [table] connection, logger in
            let rows = try await connection.queryUnlessClosed("""
                WITH touched AS (
                    UPDATE "\(unescaped: table)" SET last_access = \(now)
                    WHERE key = ANY(\(keys)) AND last_access < \(staleAccess) AND format_version = \(version)
                )
                SELECT key, value, stored_at_seconds, etag, last_modified, size, max_age_seconds, max_age_attoseconds
                FROM "\(unescaped: table)" WHERE key = ANY(\(keys)) AND format_version = \(version)
                """, logger: logger)
            var reads: [(String, RowRead)] = []
            for try await row in rows {
                guard let key = row.first.flatMap({ try? $0.decode(String.self, context: .default) }) else { continue }
                do {
                    let (_, value, seconds, etag, lastModified, size, maxAgeSeconds, maxAgeAttoseconds) = try row.decode(
                        (String, Data, Double, String?, String?, Int32, Int64?, Int64?).self)
                    let maxAge = maxAgeSeconds.map { Duration(secondsComponent: $0, attosecondsComponent: maxAgeAttoseconds ?? 0) }
                    reads.append((key, .row(value: value, seconds: seconds, etag: etag, lastModified: lastModified, size: size, maxAge: maxAge)))
                } catch {
                    reads.append((key, .malformed("\(error)")))
                }
            }
            return reads
        }
        var entries: [String: CacheEntry<Value>] = [:]
        for (key, read) in reads {
            if let entry = await entry(from: read, key: key) { entries[key] = entry }
        }
        return entries
    }

    /// The entry a row read holds, or `nil` for no row or a row that no longer decodes (that row is
    /// then deleted and logged).
    private func entry(from read: RowRead?, key: String) async -> CacheEntry<Value>? {
        switch read {
        case nil:
            return nil
        case .malformed(let reason)?:
            await discard(key: key, value: nil, reason: "row does not have the expected columns: \(reason)")
            return nil
        case .row(let bytes, let seconds, let etag, let lastModified, let size, let maxAge)?:
            guard Int(size) == bytes.count else {
                await discard(key: key, value: bytes, reason: "value is \(bytes.count) bytes, the row says \(size)")
                return nil
            }
            guard seconds.isFinite else {
                await discard(key: key, value: bytes, reason: "stored_at_seconds is \(seconds)")
                return nil
            }
            do {
                let value = try codec.decode(bytes)
                return CacheEntry(
                    value: value, storedAt: Date(timeIntervalSinceReferenceDate: seconds),
                    validators: CacheValidators(etag: etag, lastModified: lastModified, maxAge: maxAge))
            } catch {
                await discard(key: key, value: bytes, reason: "value does not decode: \(error)")
                return nil
            }
        }
    }

    /// Stores `entry` under `key` with one upsert, replacing any previous row atomically (and
    /// announcing it, when ``announceChanges(as:)`` is on). A value whose encoding exceeds
    /// ``maxValueBytes`` is not stored, and the key's row is removed instead.
    /// - Throws: `StoreError` when the value does not encode, the database is unreachable or the
    ///   statement fails; the previous row is then untouched.
    @concurrent
    public func insert(_ entry: CacheEntry<Value>, for key: String) async throws {
        _ = try await insertUnlessNewer(entry, for: key)
    }

    /// ``insert(_:for:)``, saying whether it was refused: `false` only when the table holds a row of
    /// `key` stored later (it stays, and nothing is announced). A value over the limit is not
    /// stored, and counts as not refused (`true`): no later row is there.
    @concurrent
    public func insertUnlessNewer(_ entry: CacheEntry<Value>, for key: String) async throws -> Bool {
        let bytes: Data
        do {
            bytes = try codec.encode(entry.value)
        } catch {
            throw StoreError(store: description, operation: .insert, key: key, reason: "value does not encode: \(error)", underlying: error)
        }
        let (version, maxValueBytes) = state.withLock { ($0.formatVersion, $0.maxValueBytes) }
        guard bytes.count <= maxValueBytes, let size = Int32(exactly: bytes.count) else {
            // Not stored; the row of the value it replaces goes, so no node serves that one instead.
            logger.warning(
                "a value larger than the store's limit is not stored: the key's row is removed",
                metadata: ["store": "\(description)", "key": "\(key)", "bytes": "\(bytes.count)", "limit": "\(maxValueBytes)"])
            try await delete(key, storedAtOrBefore: entry.storedAt)
            // Not refused by a later row: a caller keeps its own copy.
            return true
        }
        let now = now()
        let seconds = entry.storedAt.timeIntervalSinceReferenceDate
        let expiresAt = maxAge.map { entry.storedAt.addingTimeInterval($0 / .seconds(1)) }
        let maxAgeSeconds = entry.validators.maxAge?.components.seconds
        let maxAgeAttoseconds = entry.validators.maxAge?.components.attoseconds
        let tags = state.withLock { $0.tagger }?(key, entry.value) ?? []
        let (channel, notice) = announcement(.set, key: key, at: entry.storedAt)
        let written = try await perform(.insert, key: key) { [table] connection, logger -> Bool in
            // The write and its announcement are one statement: both commit, or neither.
            let rows = try await connection.queryUnlessClosed("""
                WITH written AS (
                INSERT INTO "\(unescaped: table)"
                    (key, value, stored_at, stored_at_seconds, etag, last_modified, last_access, size, expires_at,
                     max_age_seconds, max_age_attoseconds, format_version, tags)
                VALUES (\(key), \(bytes), \(entry.storedAt), \(seconds), \(entry.validators.etag),
                        \(entry.validators.lastModified), \(now), \(size), \(expiresAt), \(maxAgeSeconds), \(maxAgeAttoseconds),
                        \(version), \(tags))
                ON CONFLICT (key) DO UPDATE SET
                    value = EXCLUDED.value, stored_at = EXCLUDED.stored_at,
                    stored_at_seconds = EXCLUDED.stored_at_seconds, etag = EXCLUDED.etag,
                    last_modified = EXCLUDED.last_modified, last_access = EXCLUDED.last_access,
                    size = EXCLUDED.size, expires_at = EXCLUDED.expires_at,
                    max_age_seconds = EXCLUDED.max_age_seconds, max_age_attoseconds = EXCLUDED.max_age_attoseconds,
                    format_version = EXCLUDED.format_version, tags = EXCLUDED.tags
                -- The latest store time wins, whatever order the writes commit in.
                WHERE "\(unescaped: table)".stored_at_seconds <= EXCLUDED.stored_at_seconds
                RETURNING 1
                )
                , announced AS (
                    SELECT pg_notify(\(channel), \(notice)) FROM written WHERE \(channel)::text IS NOT NULL
                )
                SELECT (SELECT count(*) FROM written), (SELECT count(*) FROM announced)
                """, logger: logger)
            var count: Int64 = 0
            for try await (written, _) in rows.decode((Int64, Int64).self) { count = written }
            return count > 0
        }
        if sweepIsDue(now: now) { await sweepExpiredRows() }
        return written
    }

    /// Re-stamps the row for `key` with one `UPDATE` of its time and validator columns: the value is
    /// neither read nor rewritten. `false` when there is no row stored at or before `storedAt` (a
    /// row stored later stays as it is).
    /// - Throws: `StoreError` (operation `refresh`) when the database is unreachable or the statement fails.
    @concurrent
    public func refresh(_ key: String, storedAt: Date, validators: CacheValidators) async throws -> Bool {
        let now = now()
        let seconds = storedAt.timeIntervalSinceReferenceDate
        let expiresAt = maxAge.map { storedAt.addingTimeInterval($0 / .seconds(1)) }
        let maxAgeSeconds = validators.maxAge?.components.seconds
        let maxAgeAttoseconds = validators.maxAge?.components.attoseconds
        let (channel, notice) = announcement(.set, key: key, at: storedAt)
        let version = formatVersion
        return try await perform(.refresh, key: key) { [table] connection, logger in
            // Announced only when a row was re-stamped, in the same statement.
            let rows = try await connection.queryUnlessClosed("""
                WITH refreshed AS (
                    UPDATE "\(unescaped: table)" SET stored_at = \(storedAt), stored_at_seconds = \(seconds),
                        etag = \(validators.etag), last_modified = \(validators.lastModified), last_access = \(now),
                        expires_at = \(expiresAt), max_age_seconds = \(maxAgeSeconds), max_age_attoseconds = \(maxAgeAttoseconds)
                    WHERE key = \(key) AND format_version = \(version) AND stored_at_seconds <= \(seconds) RETURNING 1
                ), announced AS (
                    SELECT pg_notify(\(channel), \(notice)) FROM refreshed WHERE \(channel)::text IS NOT NULL
                )
                SELECT (SELECT count(*) FROM refreshed), (SELECT count(*) FROM announced)
                """, logger: logger)
            var count: Int64 = 0
            for try await (refreshed, _) in rows.decode((Int64, Int64).self) { count = refreshed }
            return count > 0
        }
    }

    /// Removes the row for `key`; succeeds when there is none. Announced only when a row was
    /// removed.
    /// - Throws: `StoreError` when the database is unreachable or the statement fails.
    @concurrent
    public func delete(_ key: String) async throws {
        try await delete(key, storedAtOrBefore: nil)
    }

    /// Removes the row for `key` if it was stored at or before `time`, in one statement: a row
    /// another node stored later stays (``NewestStoreTimeWins``). Announced only when a row was
    /// removed, in the same statement.
    /// - Throws: `StoreError` when the database is unreachable or the statement fails.
    @concurrent
    public func delete(_ key: String, storedAtOrBefore time: Date) async throws {
        try await delete(key, storedAtOrBefore: Optional(time))
    }

    private func delete(_ key: String, storedAtOrBefore time: Date?) async throws {
        let at = time ?? now()
        let limit = time?.timeIntervalSinceReferenceDate ?? Double.infinity
        let (channel, notice) = announcement(.remove, key: key, at: at)
        try await perform(.delete, key: key) { [table] connection, logger in
            try await Self.drain(connection.queryUnlessClosed("""
                WITH removed AS (
                    DELETE FROM "\(unescaped: table)" WHERE key = \(key) AND stored_at_seconds <= \(limit) RETURNING 1
                )
                SELECT pg_notify(\(channel), \(notice)) FROM removed WHERE \(channel)::text IS NOT NULL
                """, logger: logger))
        }
    }

    // MARK: Internals

    private enum RowRead: Sendable {
        case row(value: Data, seconds: Double, etag: String?, lastModified: String?, size: Int32, maxAge: Duration?)
        case malformed(String)
    }



    /// Deletes the undecodable row for `key` (only if it still holds `value`, so a fresh row another
    /// writer put there meanwhile survives) and logs why. A failure to delete is logged, not thrown:
    /// the read is a miss either way.
    private func discard(key: String, value: Data?, reason: String) async {
        logger.warning(
            "removing undecodable cache row",
            metadata: ["store": "\(description)", "key": "\(key)", "reason": "\(reason)"])
        do {
            try await perform(.delete, key: key) { [table] connection, logger in
                if let value {
                    try await Self.drain(connection.queryUnlessClosed(
                        #"DELETE FROM "\#(unescaped: table)" WHERE key = \#(key) AND value = \#(value)"#, logger: logger))
                } else {
                    try await Self.drain(connection.queryUnlessClosed(
                        #"DELETE FROM "\#(unescaped: table)" WHERE key = \#(key)"#, logger: logger))
                }
            }
        } catch {
            logger.warning(
                "could not remove undecodable cache row",
                metadata: ["store": "\(description)", "key": "\(key)", "error": "\(error)"])
        }
    }

    /// Reads the result to its end, so the statement has completed before the connection is reused.
    static func drain(_ rows: PostgresRowSequence) async throws {
        for try await _ in rows {}
    }

    /// The single integer a `SELECT count(*)` returns.
    static func singleInteger(_ rows: PostgresRowSequence) async throws -> Int {
        var count = 0
        for try await value in rows.decode(Int64.self) { count = Int(value) }
        return count
    }

    /// An operation racing its watchdog: who answered, and the two tasks to stop.
    private struct Race: Sendable {
        var answered = false
        var cancelled = false
        var tasks: [Task<Void, Never>] = []
    }



    /// Runs `body` on a pooled connection (creating the table first, once), and turns every failure
    /// into a `StoreError`.
    ///
    /// A watchdog (``watch(_:started:)``) bounds both the wait for a connection and the work on it.
    func perform<T: Sendable>(
        _ operation: StoreError.Operation,
        key: String?,
        _ body: @escaping @Sendable (PostgresConnection, Logger) async throws -> T
    ) async throws -> T {
        if state.withLock({ $0.isShutDown }) {
            throw StoreError(store: description, operation: operation, key: key, reason: "the store was shut down")
        }
        let started = ContinuousClock.now
        let lease = Locked(Lease.waiting)
        do {
            // The operation and its watchdog race; the first to finish answers. The operation runs in
            // a task of its own that the call does not wait for once the watchdog has given up:
            // PostgresNIO's pool does not always let go of a lease it cannot serve (after the watchdog
            // closed a connection under a running query), and the store's bound must not depend on it. The abandoned operation is cancelled and its connection closed.
            let race = Locked(Race())
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
                    let answer: @Sendable (Result<T, any Error>) -> Void = { result in
                        let (first, tasks) = race.withLock { race in
                            defer { race.answered = true }
                            return (!race.answered, race.tasks)
                        }
                        guard first else { return }
                        for task in tasks { task.cancel() }  // the other side, no longer needed
                        continuation.resume(with: result)
                    }
                    let operation = Task {
                        do {
                            answer(.success(try await self.client.withConnection { connection in
                                let proceed = lease.withLock { lease in
                                    guard case .waiting = lease else { return false }
                                    lease = .leased(connection, at: .now)
                                    return true
                                }
                                guard proceed else { throw CancellationError() }
                                self.noteProgress()
                                defer {
                                    lease.withLock { lease in
                                        if case .leased = lease { lease = .finished }
                                    }
                                }
                                try await self.prepare(on: connection)
                                let result = try await self.bounded(on: connection) { connection in
                                    try await body(connection, self.logger)
                                }
                                self.noteProgress()
                                return result
                            }))
                        } catch {
                            answer(.failure(error))
                        }
                    }
                    let watchdog = Task {
                        do {
                            try await self.watch(lease, started: started)
                        } catch is CancellationError {
                            // The operation answered first (this is then a no-op), or the caller
                            // was cancelled: answer at once, whatever the pool does with the lease.
                            answer(.failure(CancellationError()))
                        } catch {
                            answer(.failure(error))
                        }
                    }
                    let cancelNow = race.withLock { race in
                        race.tasks = [operation, watchdog]
                        return race.cancelled || race.answered
                    }
                    if cancelNow {
                        operation.cancel()
                        watchdog.cancel()
                    }
                }
            } onCancel: {
                let tasks = race.withLock { race in
                    race.cancelled = true
                    return race.tasks
                }
                for task in tasks { task.cancel() }
            }
        } catch {
            // Once the watchdog gave up, whatever the operation threw (a closed connection, a
            // cancelled lease) is a consequence; the timeout is the story.
            let timeout: Timeout? = lease.withLock { lease in
                if case .timedOut(let timeout) = lease { return timeout }
                return nil
            }
            throw storeError(operation, key: key, timeout ?? error, since: started)
        }
    }









    /// `host:port` (or the socket path), and that followed by `/database`.
    private static func endpoint(of configuration: PostgresClient.Configuration) -> (address: String, endpoint: String) {
        let database = configuration.database.flatMap { $0.isEmpty ? nil : $0 } ?? configuration.username
        let address: String
        if let host = configuration.host {
            address = (host.contains(":") ? "[\(host)]" : host) + ":\(configuration.port ?? 5432)"
        } else {
            address = configuration.unixSocketPath ?? "?"
        }
        return (address, "\(address)/\(database)")
    }
}

extension PostgresStore: NewestStoreTimeWins {}

extension PostgresStore: CustomStringConvertible {
    /// `PostgresStore(host:port/database/table)`, never with credentials.
    public var description: String { "\(name)(\(endpoint)/\(table))" }
}

/// The connection pool's background logger: forwards the pool's messages to the store's logger
/// (`info` and `notice` demoted to `debug`). It only forwards; connection failures are found from
/// typed errors by ``PostgresConnectionWatchdog``.
struct PoolLogHandler: LogHandler {
    var forward: Logger
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level

    init(forward: Logger) {
        self.forward = forward
        self.logLevel = forward.logLevel
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let merged = metadata.merging(event.metadata ?? [:]) { _, new in new }
        // The pool's routine messages (a failed attempt, retried with backoff, arrives at `info`
        // every few seconds while the database is down) are diagnostics: the store reports failures
        // through its errors. They are forwarded at `debug`; warnings and errors keep their level.
        let level = event.level <= .notice ? min(event.level, .debug) : event.level
        guard level >= forward.logLevel else { return }
        forward.log(
            level: level, event.message, metadata: merged, source: event.source,
            file: event.file, function: event.function, line: event.line)
    }
}
#endif
