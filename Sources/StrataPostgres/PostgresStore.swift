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
/// let feed = memory.loader(key: "feed", freshness: .maxAge(.minutes(1)))
///     .fallingBack(to: shared.loader(key: "feed", freshness: .maxAge(.hours(1))))
///     .fallingBack(to: remote.writingThrough(to: shared, key: "feed"))
/// ```
///
/// ## Lifecycle
/// Three ways to run it:
/// - **On its own.** Made from a URL or a `PostgresClient.Configuration`, the store owns its
///   `PostgresClient` and runs the client's `run()` in a task of its own from `init` on. Call
///   ``shutdown()`` when you are done (it closes the pool's connections); a store that is simply
///   released cancels that task too.
/// - **On the application's client.** ``init(client:configuration:table:codec:connectTimeout:queryTimeout:maxAge:now:logger:)``
///   uses a `PostgresClient` the application already runs (a server that also queries the database):
///   the store never runs it and never shuts it down.
/// - **As a swift-service-lifecycle `Service`.** Add the store to the server's `ServiceGroup` (after the
///   client, when the client is the application's): its ``run()`` does the store's periodic
///   maintenance and, on graceful shutdown or cancellation, shuts the store down.
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
///   `database unreachable at host:port:`, so a `fallingBack(to:)` can serve another tier. When an
///   operation has waited a moment and the pool has not connected, the store probes the database with
///   a connection of its own (`PostgresConnection.connect`) and reads PostgresNIO's typed `PSQLError`:
///   a refused or unreachable server, rejected credentials (SQLSTATE 28P01, 28000) or a missing
///   database (3D000) fail the operation at once, with the server's own words. A probe that cannot
///   decide (a TLS setup of your own it cannot repeat) changes nothing: the operation fails after
///   ``connectTimeout``. When the pool is merely busy (other operations keep getting connections) it
///   waits up to ``queryTimeout`` instead.
///   Once connected, an operation that gets no answer within ``queryTimeout`` closes its
///   connection and throws. No operation hangs.
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
    /// How long entries are kept, if limited; see ``removeExpiredEntries()``.
    public let maxAge: Duration?

    let client: PostgresClient
    /// The task running ``client`` when the store owns it; `nil` on the application's client.
    private let runner: Task<Void, Never>?
    let codec: any Codec<Value>
    let now: @Sendable () -> Date
    let logger: Logger
    /// Asks the database directly why the pool cannot connect.
    let probe: ConnectionProbe
    let state = Locked(State())

    struct State: Sendable {
        var tableReady = false
        var lastSweep: Date?
        var isShutDown = false
        /// When an operation last got a connection, or finished its work on one.
        var lastProgress: ContinuousClock.Instant?
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
    ///   - maxAge: when set, rows are stamped to expire `maxAge` after their `storedAt`, and expired rows
    ///     are swept after an insert, at most once a minute per store.
    ///   - now: the wall clock for `last_access` and expiry.
    ///   - logger: where undecodable rows, sweeps and the connection pool's own messages go (the pool's
    ///     routine messages, such as each failed connection attempt, at `debug`).
    /// - Throws: `StoreError` (operation `open`) when `table` is not a plain identifier.
    init(
        configuration: PostgresClient.Configuration,
        probeConfiguration: PostgresConnection.Configuration?,
        table: String,
        codec: some Codec<Value>,
        connectTimeout: Duration,
        queryTimeout: Duration,
        maxAge: Duration?,
        now: @escaping @Sendable () -> Date,
        logger: Logger
    ) throws(StoreError) {
        let (address, endpoint) = Self.endpoint(of: configuration)
        try Self.checkTableName(table, endpoint: endpoint)
        precondition(connectTimeout > .zero && queryTimeout > .zero, "timeouts must be positive")
        precondition(maxAge.map { $0 > .zero } ?? true, "maxAge must be positive")
        var configuration = configuration
        configuration.options.connectTimeout = connectTimeout
        let client = PostgresClient(
            configuration: configuration,
            backgroundLogger: Logger(label: logger.label) { _ in DemotingLogHandler(forward: logger) })
        self.client = client
        self.runner = Task { await client.run() }
        self.probe = ConnectionProbe(
            configuration: probeConfiguration ?? ConnectionProbe.configuration(from: configuration),
            connectTimeout: connectTimeout, logger: logger)
        self.table = table
        self.endpoint = endpoint
        self.address = address
        self.codec = codec
        self.connectTimeout = connectTimeout
        self.queryTimeout = queryTimeout
        self.maxAge = maxAge
        self.now = now
        self.logger = logger
    }

    /// The designated initialiser, with the configuration of the store's connection probes when the
    /// caller knows it exactly (the URL initialisers do: they know the TLS mode).
    public convenience init(
        configuration: PostgresClient.Configuration,
        table: String = "strata_cache",
        codec: some Codec<Value>,
        connectTimeout: Duration = .seconds(3),
        queryTimeout: Duration = .seconds(30),
        maxAge: Duration? = nil,
        now: @escaping @Sendable () -> Date = { Date() },
        logger: Logger = Logger(label: "strata.postgresstore")
    ) throws(StoreError) {
        try self.init(
            configuration: configuration, probeConfiguration: nil, table: table, codec: codec,
            connectTimeout: connectTimeout, queryTimeout: queryTimeout, maxAge: maxAge, now: now, logger: logger)
    }

    /// Creates a store that works on a `PostgresClient` the application already runs.
    ///
    /// The store never calls the client's `run()` and never shuts it down: the application does (for
    /// example in the same `ServiceGroup`). ``shutdown()`` only stops the store.
    ///
    /// ```swift
    /// let client = PostgresClient(configuration: configuration)
    /// let shared = try PostgresStore<[FeedItem]>(client: client, configuration: configuration, codec: JSONCodec())
    /// let group = ServiceGroup(services: [client, shared], logger: logger)
    /// try await group.run()
    /// ```
    /// - Parameters:
    ///   - client: the application's client.
    ///   - configuration: the configuration `client` was made with: the store names the database with
    ///     it (never with the password) and probes the database with it when the client cannot
    ///     connect. It is not used to open the store's own pool.
    ///   - table, codec, connectTimeout, queryTimeout, maxAge, now, logger: as for
    ///     ``init(configuration:table:codec:connectTimeout:queryTimeout:maxAge:now:logger:)``.
    /// - Throws: `StoreError` (operation `open`) when `table` is not a plain identifier.
    public init(
        client: PostgresClient,
        configuration: PostgresClient.Configuration,
        table: String = "strata_cache",
        codec: some Codec<Value>,
        connectTimeout: Duration = .seconds(3),
        queryTimeout: Duration = .seconds(30),
        maxAge: Duration? = nil,
        now: @escaping @Sendable () -> Date = { Date() },
        logger: Logger = Logger(label: "strata.postgresstore")
    ) throws(StoreError) {
        let (address, endpoint) = Self.endpoint(of: configuration)
        try Self.checkTableName(table, endpoint: endpoint)
        precondition(connectTimeout > .zero && queryTimeout > .zero, "timeouts must be positive")
        precondition(maxAge.map { $0 > .zero } ?? true, "maxAge must be positive")
        self.client = client
        self.runner = nil
        self.probe = ConnectionProbe(
            configuration: ConnectionProbe.configuration(from: configuration), connectTimeout: connectTimeout, logger: logger)
        self.table = table
        self.endpoint = endpoint
        self.address = address
        self.codec = codec
        self.connectTimeout = connectTimeout
        self.queryTimeout = queryTimeout
        self.maxAge = maxAge
        self.now = now
        self.logger = logger
    }

    /// Creates a store on the database at `url`, `postgres://user:password@host:port/database`.
    ///
    /// `postgresql://` works too; the port defaults to 5432 and the database to the user's name.
    /// `?sslmode=disable|prefer|require` chooses TLS (`prefer` by default, as with `libpq`).
    /// Percent-encoded user names and passwords are decoded. See
    /// ``init(configuration:table:codec:connectTimeout:queryTimeout:maxAge:now:logger:)`` for the rest.
    /// - Throws: `StoreError` (operation `open`) for a URL it cannot use, or a bad table name. The
    ///   error never contains the password.
    public convenience init(
        url: String,
        table: String = "strata_cache",
        codec: some Codec<Value>,
        connectTimeout: Duration = .seconds(3),
        queryTimeout: Duration = .seconds(30),
        maxAge: Duration? = nil,
        now: @escaping @Sendable () -> Date = { Date() },
        logger: Logger = Logger(label: "strata.postgresstore")
    ) throws(StoreError) {
        let parsed = try PostgresURL.parse(url)
        try self.init(
            configuration: parsed.configuration, probeConfiguration: parsed.probeConfiguration, table: table, codec: codec,
            connectTimeout: connectTimeout, queryTimeout: queryTimeout, maxAge: maxAge, now: now, logger: logger)
    }

    /// Creates a store on the database at `url` that encodes values as JSON.
    public convenience init(
        url: String,
        table: String = "strata_cache",
        connectTimeout: Duration = .seconds(3),
        queryTimeout: Duration = .seconds(30),
        maxAge: Duration? = nil,
        now: @escaping @Sendable () -> Date = { Date() },
        logger: Logger = Logger(label: "strata.postgresstore")
    ) throws(StoreError) where Value: Codable {
        try self.init(
            url: url, table: table, codec: JSONCodec<Value>(), connectTimeout: connectTimeout,
            queryTimeout: queryTimeout, maxAge: maxAge, now: now, logger: logger)
    }

    /// Creates a store on the database `configuration` points at that encodes values as JSON.
    public convenience init(
        configuration: PostgresClient.Configuration,
        table: String = "strata_cache",
        connectTimeout: Duration = .seconds(3),
        queryTimeout: Duration = .seconds(30),
        maxAge: Duration? = nil,
        now: @escaping @Sendable () -> Date = { Date() },
        logger: Logger = Logger(label: "strata.postgresstore")
    ) throws(StoreError) where Value: Codable {
        try self.init(
            configuration: configuration, table: table, codec: JSONCodec<Value>(), connectTimeout: connectTimeout,
            queryTimeout: queryTimeout, maxAge: maxAge, now: now, logger: logger)
    }

    deinit {
        runner?.cancel()
    }

    /// Stops the store: operations after this throw. A store that owns its client also closes the
    /// connection pool and waits until it has stopped, for at most ``shutdownTimeout``; the
    /// application's client is left running.
    ///
    /// PostgresNIO's pool can fail to stop when one of its connections was closed under a running
    /// query (what the ``queryTimeout`` watchdog does); seen under load in the query-timeout test,
    /// where the whole test run hung. Past the bound the pool is abandoned with a warning: its
    /// connections are closed, and the process does not wait for its bookkeeping.
    public func shutdown() async {
        state.withLock { $0.isShutDown = true }
        // The application's client is the application's to stop.
        guard let runner else { return }
        runner.cancel()
        let stopped = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let answered = Locked(false)
            let answer: @Sendable (Bool) -> Void = { stopped in
                let first = answered.withLock { answered in
                    defer { answered = true }
                    return !answered
                }
                if first { continuation.resume(returning: stopped) }
            }
            let bound = Task {
                do { try await Task.sleep(for: Self.shutdownTimeout) } catch { return }  // stopped in time
                answer(false)
            }
            Task {
                await runner.value
                bound.cancel()
                answer(true)
            }
        }
        if !stopped {
            logger.warning(
                "the connection pool did not stop within the shutdown bound; abandoning it",
                metadata: ["store": "\(description)", "bound": "\(Self.shutdownTimeout)"])
        }
    }

    /// How long ``shutdown()`` waits for the connection pool to stop.
    public static var shutdownTimeout: Duration { .seconds(10) }

    /// Values from this store are shared with other processes: ``Origin/sharedCache``.
    public var origin: Origin { .sharedCache }

    // MARK: Store

    /// The entry for `key`, or `nil` when there is none or its row no longer decodes (that row is
    /// then deleted and logged at `warning`).
    /// - Throws: `StoreError` when the database is unreachable or the query fails.
    public func retrieve(_ key: String) async throws -> Cached<Value>? {
        let now = now()
        let staleAccess = now.addingTimeInterval(-Self.accessGranularity)
        let read: RowRead? = try await perform(.retrieve, key: key) { [table] connection, logger in
            // The touch and the read are one statement; the read sees the row as it was before the touch.
            let rows = try await connection.query("""
                WITH touched AS (
                    UPDATE "\(unescaped: table)" SET last_access = \(now)
                    WHERE key = \(key) AND last_access < \(staleAccess)
                )
                SELECT value, stored_at_seconds, etag, last_modified, size, max_age_seconds, max_age_attoseconds
                FROM "\(unescaped: table)" WHERE key = \(key)
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
                return Cached(
                    value: value, storedAt: Date(timeIntervalSinceReferenceDate: seconds),
                    validators: CacheValidators(etag: etag, lastModified: lastModified, maxAge: maxAge))
            } catch {
                await discard(key: key, value: bytes, reason: "value does not decode: \(error)")
                return nil
            }
        }
    }

    /// Stores `entry` under `key` with one upsert, replacing any previous row atomically.
    /// - Throws: `StoreError` when the value does not encode, the database is unreachable or the
    ///   statement fails; the previous row is then untouched.
    public func insert(_ entry: Cached<Value>, for key: String) async throws {
        let bytes: Data
        do {
            bytes = try codec.encode(entry.value)
        } catch {
            throw StoreError(store: description, operation: .insert, key: key, reason: "value does not encode: \(error)", underlying: error)
        }
        guard let size = Int32(exactly: bytes.count) else {
            throw StoreError(store: description, operation: .insert, key: key, reason: "value is \(bytes.count) bytes, more than a row holds")
        }
        let now = now()
        let seconds = entry.storedAt.timeIntervalSinceReferenceDate
        let expiresAt = maxAge.map { entry.storedAt.addingTimeInterval($0 / .seconds(1)) }
        let maxAgeSeconds = entry.validators.maxAge?.components.seconds
        let maxAgeAttoseconds = entry.validators.maxAge?.components.attoseconds
        try await perform(.insert, key: key) { [table] connection, logger in
            try await Self.drain(connection.query("""
                INSERT INTO "\(unescaped: table)"
                    (key, value, stored_at, stored_at_seconds, etag, last_modified, last_access, size, expires_at,
                     max_age_seconds, max_age_attoseconds)
                VALUES (\(key), \(bytes), \(entry.storedAt), \(seconds), \(entry.validators.etag),
                        \(entry.validators.lastModified), \(now), \(size), \(expiresAt), \(maxAgeSeconds), \(maxAgeAttoseconds))
                ON CONFLICT (key) DO UPDATE SET
                    value = EXCLUDED.value, stored_at = EXCLUDED.stored_at,
                    stored_at_seconds = EXCLUDED.stored_at_seconds, etag = EXCLUDED.etag,
                    last_modified = EXCLUDED.last_modified, last_access = EXCLUDED.last_access,
                    size = EXCLUDED.size, expires_at = EXCLUDED.expires_at,
                    max_age_seconds = EXCLUDED.max_age_seconds, max_age_attoseconds = EXCLUDED.max_age_attoseconds
                """, logger: logger))
        }
        if sweepIsDue(now: now) { await sweepExpiredRows() }
    }

    /// Re-stamps the row for `key` with one `UPDATE` of its time and validator columns: the value is
    /// neither read nor rewritten. `false` when there is no row.
    /// - Throws: `StoreError` (operation `refresh`) when the database is unreachable or the statement fails.
    public func refresh(_ key: String, storedAt: Date, validators: CacheValidators) async throws -> Bool {
        let now = now()
        let seconds = storedAt.timeIntervalSinceReferenceDate
        let expiresAt = maxAge.map { storedAt.addingTimeInterval($0 / .seconds(1)) }
        let maxAgeSeconds = validators.maxAge?.components.seconds
        let maxAgeAttoseconds = validators.maxAge?.components.attoseconds
        return try await perform(.refresh, key: key) { [table] connection, logger in
            let rows = try await connection.query("""
                WITH refreshed AS (
                    UPDATE "\(unescaped: table)" SET stored_at = \(storedAt), stored_at_seconds = \(seconds),
                        etag = \(validators.etag), last_modified = \(validators.lastModified), last_access = \(now),
                        expires_at = \(expiresAt), max_age_seconds = \(maxAgeSeconds), max_age_attoseconds = \(maxAgeAttoseconds)
                    WHERE key = \(key) RETURNING 1
                )
                SELECT count(*) FROM refreshed
                """, logger: logger)
            return try await Self.singleInteger(rows) > 0
        }
    }

    /// Removes the row for `key`; succeeds when there is none.
    /// - Throws: `StoreError` when the database is unreachable or the statement fails.
    public func delete(_ key: String) async throws {
        try await perform(.delete, key: key) { [table] connection, logger in
            try await Self.drain(connection.query(
                #"DELETE FROM "\#(unescaped: table)" WHERE key = \#(key)"#, logger: logger))
        }
    }

    enum RowRead: Sendable {
        case row(value: Data, seconds: Double, etag: String?, lastModified: String?, size: Int32, maxAge: Duration?)
        case malformed(String)
    }
}

extension PostgresStore: CustomStringConvertible {
    /// `PostgresStore(host:port/database/table)`, never with credentials.
    public var description: String { "PostgresStore(\(endpoint)/\(table))" }
}
#endif
