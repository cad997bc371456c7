#if Postgres
import Foundation
import Logging
import PostgresNIO
@_spi(StrataInternals) import Strata
import StrataOutbox

/// An outbox's entries in PostgreSQL: one row per queued write, for servers (a worker whose queued
/// writes to another service must survive a restart or a move to another host).
///
/// ```swift
/// let storage = try PostgresOutboxStorage(url: "postgres://app:secret@db.internal:5432/app")
/// let outbox = Outbox(storage: storage, name: "billing-writes")
/// ```
///
/// ## Lifecycle
/// As ``PostgresStore``'s: with `url:` or `configuration:` the storage runs a `PostgresClient` of its
/// own (call ``shutdown()`` when done); with
/// ``init(client:configuration:table:connectTimeout:queryTimeout:statementTimeout:logger:)`` it uses the
/// application's client, which the application runs and shuts down. Connections are opened on
/// demand, so creating a storage never fails because the database is down: the operations do.
///
/// ## Tables
/// Created on first use with `CREATE TABLE IF NOT EXISTS` under a transaction-scoped advisory lock,
/// so any number of processes may start at once:
///
/// | column | type | holds |
/// |---|---|---|
/// | `id` | `UUID PRIMARY KEY` | `OutboxEntry.id` (the `Idempotency-Key`) |
/// | `sequence` | `BIGINT` | `OutboxEntry.sequence` (clamped to `BIGINT`) |
/// | `scope`, `kind` | `TEXT` | `OutboxEntry.scope`, `OutboxEntry.kind` |
/// | `state` | `TEXT` | `pending` or `parked` |
/// | `attempts` | `BIGINT` | `OutboxEntry.attempts` |
/// | `created_at`, `next_attempt_at` | `TIMESTAMPTZ` | when it was enqueued, when it may be tried next |
/// | `entry` | `BYTEA` | the whole entry as JSON: the only column read back |
/// | `updated_at` | `TIMESTAMPTZ` | the server's time of the last save |
///
/// The columns beside `entry` are for an operator's queries. Rows whose `entry` cannot be read back
/// are moved, as they were, to ``unreadableTable`` (`id`, `entry`, `reason`, `set_aside_at`).
///
/// ## Behaviour
/// - ``save(_:)`` is one `INSERT … ON CONFLICT (id) DO UPDATE`: committed when it returns, atomic, and
///   a failed save leaves the previous row untouched.
/// - ``loadAll()`` leaves out a row whose entry does not decode (or names another id), moves it to
///   ``unreadableTable`` in one statement, and logs it at `error`: never deleted, never a crash.
/// - Failures throw `StoreError` naming this storage and the operation (`retrieve` for
///   ``loadAll()`` and ``entry(_:)``, `insert` for ``save(_:)``, `delete` for ``remove(_:)``) and
///   the entry's id. A database that cannot be reached fails as ``PostgresStore`` does: within
///   ``connectTimeout``, with a ``PostgresConnectionError`` as the `underlying` error. A statement
///   the server aborted after ``statementTimeout`` fails with a ``PostgresStatementTimeoutError`` as the
///   `underlying` error: a ``save(_:)`` that fails so was not committed. Credentials never appear in
///   ``description``, errors or logs.
public final class PostgresOutboxStorage: OutboxStorage, Sendable, CustomStringConvertible {
    /// The table holding the entries.
    public let table: String
    /// The table unreadable rows are moved to: ``table`` followed by `_unreadable`.
    public var unreadableTable: String { table + "_unreadable" }
    /// Where the database is, without credentials: `host:port/database`.
    public var endpoint: String { connections.endpoint }
    /// How long an operation waits for a connection before it fails as unreachable.
    public var connectTimeout: Duration { connections.connectTimeout }
    /// How long an operation may take once it has a connection.
    public var queryTimeout: Duration { connections.queryTimeout }
    /// How long the server lets one statement run before it aborts it and rolls it back: below
    /// ``queryTimeout``, so that a ``save(_:)`` the server did not finish in time fails with a
    /// ``PostgresStatementTimeoutError`` (it was not committed) before the storage stops waiting. See
    /// ``PostgresStore/statementTimeout``.
    public var statementTimeout: Duration { connections.statementTimeout }

    /// The connection handling of ``PostgresStore`` (the client, its lifecycle, the timeouts and the
    /// typed connection failures), running this storage's statements on this storage's tables.
    private let connections: PostgresStore<Data>
    private let logger: Logger

    /// The connection watchdog of ``connections``, for tests.
    var watchdog: PostgresConnectionWatchdog { connections.watchdog }

    /// Creates a storage on the database `configuration` points at.
    /// - Parameters:
    ///   - configuration: where and how to connect. Its `options.connectTimeout` is set to `connectTimeout`.
    ///   - table: the table holding the entries: letters, digits and `_`, starting with a letter or `_`,
    ///     at most 48 characters. Created on first use, with ``unreadableTable`` beside it.
    ///   - connectTimeout: how long an operation waits for a connection before failing (3 seconds by default).
    ///   - queryTimeout: how long an operation may take once connected (30 seconds by default).
    ///   - statementTimeout: how long the server lets one statement run before it aborts it: at least
    ///     1 ms and below `queryTimeout` (see ``statementTimeout``). `nil`, the default: nine tenths
    ///     of `queryTimeout`.
    ///   - logger: where unreadable rows and the connection pool's own messages go.
    /// - Throws: `StoreError` (operation `open`) when `table` is not a plain identifier, or
    ///   `statementTimeout` is not below `queryTimeout`.
    public convenience init(
        configuration: PostgresClient.Configuration,
        table: String = "strata_outbox",
        connectTimeout: Duration = .seconds(3),
        queryTimeout: Duration = .seconds(30),
        statementTimeout: Duration? = nil,
        logger: Logger = Logger(label: "strata.postgresoutbox")
    ) throws(StoreError) {
        try self.init(
            configuration: configuration, tls: PostgresTLSMode(reading: configuration.tls), applicationClient: nil,
            table: table, connectTimeout: connectTimeout, queryTimeout: queryTimeout, statementTimeout: statementTimeout,
            logger: logger)
    }

    /// Creates a storage on the database at `url`, `postgres://user:password@host:port/database`
    /// (`?sslmode=disable|allow|prefer|require|verify-ca|verify-full`, as
    /// ``PostgresStore/init(url:table:connectTimeout:queryTimeout:statementTimeout:maxAge:now:logger:)`` reads it).
    /// See ``init(configuration:table:connectTimeout:queryTimeout:statementTimeout:logger:)`` for the rest.
    /// - Throws: `StoreError` (operation `open`) for a URL it cannot use, or a bad table name. The
    ///   error never contains the password.
    public convenience init(
        url: String,
        table: String = "strata_outbox",
        connectTimeout: Duration = .seconds(3),
        queryTimeout: Duration = .seconds(30),
        statementTimeout: Duration? = nil,
        logger: Logger = Logger(label: "strata.postgresoutbox")
    ) throws(StoreError) {
        let parsed: (configuration: PostgresClient.Configuration, tls: PostgresTLSMode)
        do {
            parsed = try PostgresURL.parse(url)
        } catch {
            // The URL's error names the store type; this is the storage's.
            var renamed = error
            if renamed.store.hasPrefix("PostgresStore(") {
                renamed.store = "PostgresOutboxStorage" + renamed.store.dropFirst("PostgresStore".count)
            }
            throw renamed
        }
        // The URL's sslmode is the TLS mode, for the pool and the watchdog alike.
        try self.init(
            configuration: parsed.configuration, tls: parsed.tls, applicationClient: nil, table: table,
            connectTimeout: connectTimeout, queryTimeout: queryTimeout, statementTimeout: statementTimeout, logger: logger)
    }

    /// Creates a storage on a `PostgresClient` the application already runs (and shuts down);
    /// ``shutdown()`` leaves it running.
    /// - Parameters:
    ///   - client: the application's client.
    ///   - configuration: the configuration the client was made with: it names the database in
    ///     ``description`` and errors, and the storage connects with it once by itself to find out
    ///     why the client gets no connection.
    ///   - table, connectTimeout, queryTimeout, statementTimeout, logger: as in
    ///     ``init(configuration:table:connectTimeout:queryTimeout:statementTimeout:logger:)``. On the
    ///     application's client every operation is one transaction, so that ``statementTimeout`` is
    ///     set for it alone (`SET LOCAL`).
    /// - Throws: `StoreError` (operation `open`) when `table` is not a plain identifier, or
    ///   `statementTimeout` is not below `queryTimeout`.
    public convenience init(
        client: PostgresClient,
        configuration: PostgresClient.Configuration,
        table: String = "strata_outbox",
        connectTimeout: Duration = .seconds(3),
        queryTimeout: Duration = .seconds(30),
        statementTimeout: Duration? = nil,
        logger: Logger = Logger(label: "strata.postgresoutbox")
    ) throws(StoreError) {
        try self.init(
            configuration: configuration, tls: PostgresTLSMode(reading: configuration.tls), applicationClient: client,
            table: table, connectTimeout: connectTimeout, queryTimeout: queryTimeout, statementTimeout: statementTimeout,
            logger: logger)
    }

    /// The one designated initializer; `tls` as in ``PostgresStore``'s.
    init(
        configuration: PostgresClient.Configuration,
        tls: PostgresTLSMode?,
        applicationClient: PostgresClient?,
        table: String,
        connectTimeout: Duration,
        queryTimeout: Duration,
        statementTimeout: Duration?,
        boundsStatements: Bool = true,
        logger: Logger
    ) throws(StoreError) {
        self.table = table
        self.logger = logger
        self.connections = try PostgresStore<Data>(
            configuration: configuration, tls: tls, applicationClient: applicationClient, table: table, codec: JSONCodec<Data>(),
            connectTimeout: connectTimeout, queryTimeout: queryTimeout, statementTimeout: statementTimeout, maxAge: nil,
            now: { Date() }, logger: logger, name: "PostgresOutboxStorage", boundsStatements: boundsStatements,
            preparation: { connection, logger in try await OutboxTables.create(table, on: connection, logger: logger) })
    }

    /// Stops the storage: operations after this throw. A storage with a client of its own closes its
    /// connection pool (waiting at most ``PostgresStore/shutdownTimeout``); on the application's
    /// client it leaves the client running.
    public func shutdown() async {
        await connections.shutdown()
    }

    /// `PostgresOutboxStorage(host:port/database/table)`, never with credentials.
    public var description: String { connections.description }

    // MARK: OutboxStorage

    /// Every readable entry, in any order; unreadable rows are moved to ``unreadableTable`` and logged.
    /// - Throws: `StoreError` (`.retrieve`) when the database is unreachable or the query fails.
    @concurrent
    public func loadAll() async throws -> [OutboxEntry] {
        let rows: [StoredRow] = try await connections.perform(.retrieve, key: nil) { [table] connection, logger in
            let rows = try await connection.queryUnlessClosed(#"SELECT id, entry FROM "\#(unescaped: table)""#, logger: logger)
            var stored: [StoredRow] = []
            for try await (id, entry) in rows.decode((UUID, Data).self) {
                stored.append(StoredRow(id: id, entry: entry))
            }
            return stored
        }
        var entries: [OutboxEntry] = []
        entries.reserveCapacity(rows.count)
        for row in rows {
            if let entry = await readable(row) { entries.append(entry) }
        }
        return entries
    }

    /// The entry with `id`, read through the primary key in one statement, or `nil` when there is
    /// none. A row that cannot be read back is moved to ``unreadableTable`` and logged, as
    /// ``loadAll()`` does, and reads as `nil`.
    /// - Throws: `StoreError` (`.retrieve`) when the database is unreachable or the query fails.
    @concurrent
    public func entry(_ id: UUID) async throws -> OutboxEntry? {
        let row: StoredRow? = try await connections.perform(.retrieve, key: id.lowercasedString) { [table] connection, logger in
            let rows = try await connection.queryUnlessClosed(#"SELECT id, entry FROM "\#(unescaped: table)" WHERE id = \#(id)"#, logger: logger)
            // At most one row (the id is the primary key); read to the end either way, so the
            // statement completes before the connection goes back to the pool.
            var stored: StoredRow?
            for try await (rowID, bytes) in rows.decode((UUID, Data).self) where stored == nil {
                stored = StoredRow(id: rowID, entry: bytes)
            }
            return stored
        }
        guard let row else { return nil }
        return await readable(row)
    }

    /// Inserts `entry`, or replaces the row with its id, in one statement.
    /// - Throws: `StoreError` (`.insert`) when the entry does not encode, the database is unreachable
    ///   or the statement fails; the previous row is then untouched.
    @concurrent
    public func save(_ entry: OutboxEntry) async throws {
        try await upsert(entry, removing: [])
    }

    /// `entry` encoded for its row, or the `StoreError` (`.insert`) that says why it does not encode.
    private func encoded(_ entry: OutboxEntry) throws -> Data {
        do {
            return try entry.encodedForStorage()
        } catch {
            throw StoreError(store: description, operation: .insert, key: entry.idempotencyKey, reason: "entry does not encode: \(error)", underlying: error)
        }
    }

    /// Upserts `entry`'s row, deleting the rows of `removed` in the same statement.
    private func upsert(_ entry: OutboxEntry, removing removed: [UUID]) async throws {
        let encoded = try encoded(entry)
        try await connections.perform(.insert, key: entry.idempotencyKey) { [table] connection, logger in
            try await Self.upsert(entry, encoded: encoded, into: table, removing: removed, on: connection, logger: logger)
        }
    }

    /// Inserts or replaces every entry of `entries` in one transaction: one commit, one flush of
    /// the server's log, for all of them (the outbox's group commit).
    /// - Throws: `StoreError` (`.insert`) when an entry does not encode, the database is unreachable
    ///   or a statement fails; no row is then changed.
    @concurrent
    public func save(contentsOf entries: [OutboxEntry]) async throws {
        guard entries.count > 1 else {
            if let entry = entries.first { try await save(entry) }
            return
        }
        let rows = try entries.map { ($0, try encoded($0)) }
        try await connections.perform(.insert, key: entries[0].idempotencyKey) { [table, rows] connection, logger in
            try await connection.transactionUnlessClosed(logger: logger) { connection in
                for (entry, encoded) in rows {
                    try await Self.upsert(entry, encoded: encoded, into: table, on: connection, logger: logger)
                }
            }
        }
    }

    /// Inserts or replaces `entry`'s row, and deletes the rows of `removing` in the same statement
    /// (a data-modifying `WITH` runs whether or not the insert reads it; with no ids it deletes none).
    private static func upsert(
        _ entry: OutboxEntry, encoded: Data, into table: String, removing removed: [UUID] = [], on connection: PostgresConnection,
        logger: Logger
    ) async throws {
        let sequence = Int64(clamping: entry.sequence)
        let attempts = Int64(entry.attempts)
        let state = entry.isPending ? "pending" : "parked"
        try await PostgresStore<Data>.drain(connection.queryUnlessClosed("""
            WITH removed AS (DELETE FROM "\(unescaped: table)" WHERE id = ANY(\(removed)))
            INSERT INTO "\(unescaped: table)"
                (id, sequence, scope, kind, state, attempts, created_at, next_attempt_at, entry, updated_at)
            VALUES (\(entry.id), \(sequence), \(entry.scope), \(entry.kind), \(state), \(attempts),
                    \(entry.createdAt), \(entry.nextAttemptAt), \(encoded), now())
            ON CONFLICT (id) DO UPDATE SET
                sequence = EXCLUDED.sequence, scope = EXCLUDED.scope, kind = EXCLUDED.kind,
                state = EXCLUDED.state, attempts = EXCLUDED.attempts, created_at = EXCLUDED.created_at,
                next_attempt_at = EXCLUDED.next_attempt_at, entry = EXCLUDED.entry, updated_at = EXCLUDED.updated_at
            """, logger: logger))
    }

    /// Removes the delivered writes' rows and replaces the row of `entry` (its attempt) in one
    /// statement, so one commit: a drain's one commit per delivery.
    /// - Throws: `StoreError` (`.insert`) when the entry does not encode, the database is unreachable
    ///   or the statement fails; no row is then changed.
    @concurrent
    public func saveAttempt(_ entry: OutboxEntry, removingDelivered delivered: [UUID]) async throws {
        try await upsert(entry, removing: delivered)
    }

    /// Removes the row with `id`; succeeds when there is none.
    /// - Throws: `StoreError` (`.delete`) when the database is unreachable or the statement fails.
    @concurrent
    public func remove(_ id: UUID) async throws {
        try await connections.perform(.delete, key: id.lowercasedString) { [table] connection, logger in
            try await PostgresStore<Data>.drain(connection.queryUnlessClosed(
                #"DELETE FROM "\#(unescaped: table)" WHERE id = \#(id)"#, logger: logger))
        }
    }

    // MARK: Shared by processes

    public var isSharedByProcesses: Bool { true }

    /// The table of scope claims: ``table`` followed by `_claims`.
    public var claimsTable: String { table + "_claims" }
    /// The one-row table of the last sequence given: ``table`` followed by `_sequence`.
    public var sequenceTable: String { table + "_sequence" }

    /// Claims `scope` with one conditional upsert (taken when free, lapsed or already this
    /// claimant's); when another claimant holds it, reads that claim and takes it over only if its
    /// process is known to be gone (a compare-and-set on that claimant). No lock outlives a statement.
    /// Lapse dates are compared with `now` of the asking process: keep the hosts' clocks in step.
    @concurrent
    public func claim(scope: String, for claimant: OutboxClaimant, until expiresAt: Date, now: Date) async throws -> OutboxClaimOutcome {
        let claimData: Data
        do {
            claimData = try JSONEncoder().encode(OutboxScopeClaim(claimant: claimant, expiresAt: expiresAt))
        } catch {
            throw StoreError(store: description, operation: .insert, key: scope, reason: "the claim does not encode: \(error)", underlying: error)
        }
        let claimantID = claimant.id.lowercasedString
        let until = expiresAt.timeIntervalSince1970
        let at = now.timeIntervalSince1970
        return try await connections.perform(.insert, key: scope) { [claimsTable] connection, logger -> OutboxClaimOutcome in
            for _ in 0..<2 {
                let taken = try await connection.queryUnlessClosed("""
                    INSERT INTO "\(unescaped: claimsTable)" (scope, claimant_id, claim, expires_at)
                    VALUES (\(scope), \(claimantID), \(claimData), \(until))
                    ON CONFLICT (scope) DO UPDATE SET
                        claimant_id = EXCLUDED.claimant_id, claim = EXCLUDED.claim, expires_at = EXCLUDED.expires_at
                    WHERE "\(unescaped: claimsTable)".claimant_id = EXCLUDED.claimant_id OR "\(unescaped: claimsTable)".expires_at <= \(at)
                    RETURNING scope
                    """, logger: logger)
                var claimed = false
                for try await _ in taken.decode(String.self) { claimed = true }
                if claimed { return .claimed }
                let rows = try await connection.queryUnlessClosed(
                    #"SELECT claimant_id, claim FROM "\#(unescaped: claimsTable)" WHERE scope = \#(scope)"#, logger: logger)
                var holder: (id: String, claim: Data)?
                for try await (id, data) in rows.decode((String, Data).self) where holder == nil { holder = (id, data) }
                guard let holder else { continue }  // released meanwhile: ask again
                guard let held = try? JSONDecoder().decode(OutboxScopeClaim.self, from: holder.claim) else {
                    // Unreadable (a hand edit): it lapses at its expires_at like any other.
                    return .heldElsewhere(OutboxScopeClaim(claimant: OutboxClaimant(processID: 0, host: ""), expiresAt: now.addingTimeInterval(1)))
                }
                guard OutboxClaimant.isGone(held.claimant) else { return .heldElsewhere(held) }
                let takenOver = try await connection.queryUnlessClosed("""
                    UPDATE "\(unescaped: claimsTable)" SET claimant_id = \(claimantID), claim = \(claimData), expires_at = \(until)
                    WHERE scope = \(scope) AND claimant_id = \(holder.id)
                    RETURNING scope
                    """, logger: logger)
                var replaced = false
                for try await _ in takenOver.decode(String.self) { replaced = true }
                if replaced { return .claimed }
            }
            // Another claimant moved in between both times: it holds the scope for now.
            return .heldElsewhere(OutboxScopeClaim(claimant: OutboxClaimant(processID: 0, host: ""), expiresAt: now.addingTimeInterval(1)))
        }
    }

    /// Gives `claimant`'s claim on `scope` back, if it still holds it, in one statement.
    @concurrent
    public func release(scope: String, for claimant: OutboxClaimant) async throws {
        let claimantID = claimant.id.lowercasedString
        try await connections.perform(.delete, key: scope) { [claimsTable] connection, logger in
            try await PostgresStore<Data>.drain(connection.queryUnlessClosed(
                #"DELETE FROM "\#(unescaped: claimsTable)" WHERE scope = \#(scope) AND claimant_id = \#(claimantID)"#, logger: logger))
        }
    }

    /// The readable entries of `scope`, in one statement through the `(scope, sequence)` index.
    @concurrent
    public func entries(inScope scope: String) async throws -> [OutboxEntry] {
        let rows: [StoredRow] = try await connections.perform(.retrieve, key: scope) { [table] connection, logger in
            let rows = try await connection.queryUnlessClosed(
                #"SELECT id, entry FROM "\#(unescaped: table)" WHERE scope = \#(scope)"#, logger: logger)
            var stored: [StoredRow] = []
            for try await (id, entry) in rows.decode((UUID, Data).self) { stored.append(StoredRow(id: id, entry: entry)) }
            return stored
        }
        var entries: [OutboxEntry] = []
        for row in rows {
            if let entry = await readable(row) { entries.append(entry) }
        }
        return entries
    }

    /// The next sequence, from ``sequenceTable``, in one statement.
    @concurrent
    public func nextSequence(after: UInt64) async throws -> UInt64 {
        let floor = Int64(clamping: after)
        return try await connections.perform(.insert, key: nil) { [sequenceTable] connection, logger -> UInt64 in
            let rows = try await connection.queryUnlessClosed("""
                INSERT INTO "\(unescaped: sequenceTable)" (id, value) VALUES (1, \(floor &+ 1))
                ON CONFLICT (id) DO UPDATE SET value = GREATEST("\(unescaped: sequenceTable)".value, \(floor)) + 1
                RETURNING value
                """, logger: logger)
            var value: Int64 = floor &+ 1
            for try await next in rows.decode(Int64.self) { value = next }
            return UInt64(max(value, 1))
        }
    }

    /// The last sequence given, from ``sequenceTable``, in one statement.
    @concurrent
    public func lastSequenceIssued() async throws -> UInt64? {
        try await connections.perform(.retrieve, key: nil) { [sequenceTable] connection, logger -> UInt64? in
            let rows = try await connection.queryUnlessClosed(
                #"SELECT value FROM "\#(unescaped: sequenceTable)" WHERE id = 1"#, logger: logger)
            var value: Int64 = 0
            for try await found in rows.decode(Int64.self) { value = found }
            return UInt64(max(value, 0))
        }
    }

    // MARK: Internals

    private struct StoredRow: Sendable {
        var id: UUID
        var entry: Data
    }

    /// The entry `row` holds, or `nil` after setting the row aside when it does not decode or names another id.
    private func readable(_ row: StoredRow) async -> OutboxEntry? {
        do {
            let entry = try OutboxEntry(storageEncoding: row.entry)
            guard entry.id == row.id else {
                await setAside(row, reason: "the row's id \(row.id.lowercasedString) is not the entry's id \(entry.idempotencyKey)")
                return nil
            }
            return entry
        } catch {
            await setAside(row, reason: "the entry does not decode: \(error)")
            return nil
        }
    }

    /// Moves the row, as it was, to the unreadable table in one statement (unless a save replaced
    /// it meanwhile), and logs it. A failure to move it is logged too; the row then stays.
    private func setAside(_ row: StoredRow, reason: String) async {
        var metadata: Logger.Metadata = [
            "outbox.storage": "\(description)", "outbox.entry": "\(row.id.lowercasedString)", "reason": "\(reason)",
            "table": "\(unreadableTable)",
        ]
        do {
            try await connections.perform(.delete, key: row.id.lowercasedString) { [table, unreadableTable] connection, logger in
                try await PostgresStore<Data>.drain(connection.queryUnlessClosed("""
                    WITH moved AS (
                        DELETE FROM "\(unescaped: table)" WHERE id = \(row.id) AND entry = \(row.entry) RETURNING id, entry
                    )
                    INSERT INTO "\(unescaped: unreadableTable)" (id, entry, reason) SELECT id, entry, \(reason) FROM moved
                    """, logger: logger))
            }
            logger.error("outbox entry unreadable; set aside, not deleted", metadata: metadata)
        } catch {
            metadata["error"] = "\(error)"
            logger.error("outbox entry unreadable; could not set it aside, left in place", metadata: metadata)
        }
    }
}

/// The outbox's two tables, created once per storage (in the transaction the store opens for it),
/// safely while other processes do the same.
private enum OutboxTables {
    static func create(_ table: String, on connection: PostgresConnection, logger: Logger) async throws {
        let unreadable = table + "_unreadable"
        let lockKey = "strata.table.\(table)"
        // Concurrent CREATE TABLE IF NOT EXISTS can still collide in the catalog; the lock serialises them.
        try await connection.queryUnlessClosed("SELECT pg_advisory_xact_lock(hashtext(\(lockKey)))", logger: logger)
        try await connection.queryUnlessClosed("""
            CREATE TABLE IF NOT EXISTS "\(unescaped: table)" (
                id UUID PRIMARY KEY,
                sequence BIGINT NOT NULL,
                scope TEXT NOT NULL,
                kind TEXT NOT NULL,
                state TEXT NOT NULL,
                attempts BIGINT NOT NULL,
                created_at TIMESTAMPTZ NOT NULL,
                next_attempt_at TIMESTAMPTZ NOT NULL,
                entry BYTEA NOT NULL,
                updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
            )
            """, logger: logger)
        try await connection.queryUnlessClosed(
            #"CREATE INDEX IF NOT EXISTS "\#(unescaped: table)_scope" ON "\#(unescaped: table)" (scope, sequence)"#,
            logger: logger)
        try await connection.queryUnlessClosed("""
            CREATE TABLE IF NOT EXISTS "\(unescaped: table + "_claims")" (
                scope TEXT PRIMARY KEY,
                claimant_id TEXT NOT NULL,
                claim BYTEA NOT NULL,
                expires_at DOUBLE PRECISION NOT NULL
            )
            """, logger: logger)
        try await connection.queryUnlessClosed("""
            CREATE TABLE IF NOT EXISTS "\(unescaped: table + "_sequence")" (
                id INTEGER PRIMARY KEY CHECK (id = 1),
                value BIGINT NOT NULL
            )
            """, logger: logger)
        try await connection.queryUnlessClosed("""
            INSERT INTO "\(unescaped: table + "_sequence")" (id, value)
            SELECT 1, coalesce(max(sequence), 0) FROM "\(unescaped: table)"
            ON CONFLICT (id) DO NOTHING
            """, logger: logger)
        try await connection.queryUnlessClosed("""
            CREATE TABLE IF NOT EXISTS "\(unescaped: unreadable)" (
                id UUID,
                entry BYTEA,
                reason TEXT NOT NULL,
                set_aside_at TIMESTAMPTZ NOT NULL DEFAULT now()
            )
            """, logger: logger)
    }
}
#endif
