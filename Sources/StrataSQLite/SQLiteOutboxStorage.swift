#if SQLite
import Foundation
import GRDB
import Logging
@_spi(StrataInternals) import Strata
import StrataOutbox

/// An outbox's entries in an SQLite database: one row per queued write, in a table of its own
/// (``tableName``) in a file of its own or in the file the application (or its `SQLiteStore`)
/// already uses.
///
/// ```swift
/// let outbox = Outbox(storage: try SQLiteOutboxStorage(path: supportDirectory.appending(path: "app.sqlite").path))
/// ```
///
/// - **Durable and atomic.** A ``save(_:)`` is one upsert in one transaction: when it returns the
///   entry is committed (on a file opened by this storage: WAL with `synchronous = FULL`, so the
///   commit survives power loss), and a crash during it leaves the previous version of the row.
/// - **Schema.** Created by a GRDB migration (`strata.outbox.v1`) when the storage is made, beside
///   whatever else the file holds. Besides the encoded entry (`entry`, JSON) each row has columns an
///   operator can query: `id`, `sequence`, `scope`, `kind`, `state`, `attempts`, `created_at`,
///   `next_attempt_at`.
/// - **Unreadable rows.** A row whose entry does not decode (or names another id) is left out of
///   ``loadAll()``, moved as it was into the table ``unreadableTableName`` with the reason, and
///   logged at `error`: never deleted, never a crash.
/// - **Failures** throw `StoreError` naming this storage, the operation (`open`, `retrieve` for
///   ``loadAll()`` and ``entry(_:)``, `insert` for ``save(_:)``, `delete` for ``remove(_:)``) and
///   the entry's id.
///
/// Several processes may use the same file (WAL and a busy timeout) and drain it at once: a scope is
/// drained by one outbox at a time, claimed in `strata_outbox_claims` within one short write
/// transaction, and new writes are numbered from `strata_outbox_sequence` (see `OutboxStorage`).
public final class SQLiteOutboxStorage: OutboxStorage, Sendable, CustomStringConvertible {
    /// The table holding the entries, for inspecting the file with other SQLite tools.
    public static var tableName: String { SQLiteOutboxSchema.entries }
    /// The table unreadable rows are moved to, with the reason and when.
    public static var unreadableTableName: String { SQLiteOutboxSchema.unreadable }

    /// The database file's path.
    public let path: String
    private let writer: any DatabaseWriter
    private let logger: Logger
    /// The file is one this storage opened itself (WAL, `synchronous = FULL`), so a sequence can be
    /// committed without a flush of its own (see ``nextSequence(after:)``).
    private let opensOwnFile: Bool
    /// The writer's `PRAGMA synchronous` level as this storage last set it (`nil`: not known, after
    /// a failure to set it). Read and set only on the writer's queue, inside its writes: a commit
    /// without a flush sets NORMAL unless it is already, a flushed one FULL, so a run of commits of
    /// one kind (a drain's) switches nothing.
    private let level = Locked<Int?>(nil)
    /// The entries this storage wrote last, with their bytes: a drain's read back of its scope takes
    /// them instead of decoding rows it wrote itself.
    private let memo = OutboxEntryMemo()

    /// Opens (creating if needed) the database at `path` and its outbox table.
    /// - Parameters:
    ///   - path: the database file: one of its own, or the one the application's `SQLiteStore` uses.
    ///     Its directory is created (mode `0700`) and the file (mode `0600`) when missing; a relative
    ///     path is resolved against the current directory.
    ///   - busyTimeout: how long a write waits for another connection's write lock before it fails.
    ///   - logger: where unreadable entries are reported.
    /// - Throws: `StoreError` with operation `.open` when the directory or file cannot be created,
    ///   the file is not an SQLite database, or it holds tables of the same names that this storage
    ///   did not create.
    ///
    /// Opening is synchronous: it opens the file and brings its schema up to date (a few
    /// milliseconds, or up to `busyTimeout` while another process holds the write lock).
    public convenience init(
        path: String,
        busyTimeout: Duration = .seconds(5),
        logger: Logger = Logger(label: "strata.sqliteoutbox")
    ) throws {
        let path = URL(fileURLWithPath: path).standardizedFileURL.path
        let description = Self.describe(path)
        do {
            try SQLiteDatabaseFile.create(at: path)
        } catch {
            throw StoreError(store: description, operation: .open, key: nil, reason: "cannot create the database file: \(error)", underlying: error)
        }
        var configuration = Configuration()
        configuration.label = "strata.sqliteoutbox"
        configuration.busyMode = .timeout(busyTimeout / .seconds(1))
        let pool: DatabasePool
        do {
            pool = try SQLiteDatabaseFile.openPool(path: path, configuration: configuration)
            // WAL's usual level (NORMAL) may lose the last commits on power loss; a queued write
            // must not. Set on the writer after the pool is open: GRDB sets NORMAL when it turns
            // WAL on, after `prepareDatabase` has run, so a level set there does not last.
            try pool.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA synchronous = FULL")
                guard try Int.fetchOne(db, sql: "PRAGMA synchronous") == 2 else {
                    throw DatabaseError(message: "PRAGMA synchronous = FULL did not take")
                }
            }
        } catch {
            throw StoreError(
                store: description, operation: .open, key: nil,
                reason: "not a usable SQLite database: \(SQLiteDatabaseFile.reason(for: error))", underlying: error)
        }
        try self.init(writer: pool, path: path, logger: logger, opensOwnFile: true)
    }

    /// Opens (creating if needed) the database at the file URL `path` and its outbox table, as the
    /// initialiser with a `String` path does.
    public convenience init(
        path: URL,
        busyTimeout: Duration = .seconds(5),
        logger: Logger = Logger(label: "strata.sqliteoutbox")
    ) throws {
        try self.init(path: path.path, busyTimeout: busyTimeout, logger: logger)
    }

    /// Keeps the entries in a database the application already has open: a GRDB `DatabaseQueue` or
    /// `DatabasePool`. The outbox's tables are added to it by a migration of their own
    /// (`strata.outbox.v1`, recorded in GRDB's `grdb_migrations` beside the application's).
    ///
    /// Durability is the database's: use WAL (a `DatabasePool`) with `synchronous = FULL`, or the
    /// default rollback journal, for a queued write to survive power loss. A `DatabasePool` sets
    /// `synchronous = NORMAL` on its writer when it turns WAL on, after `prepareDatabase` has run:
    /// set FULL on the writer once the pool is open (`pool.writeWithoutTransaction { try
    /// $0.execute(sql: "PRAGMA synchronous = FULL") }`). The storage logs a warning when it finds a
    /// WAL database below FULL.
    /// - Parameters:
    ///   - database: the application's queue or pool; the storage never closes it.
    ///   - logger: where unreadable entries are reported.
    /// - Throws: `StoreError` with operation `.open` when the tables cannot be created, or tables of
    ///   the same names exist that this storage did not create.
    public convenience init(database: any DatabaseWriter, logger: Logger = Logger(label: "strata.sqliteoutbox")) throws {
        try self.init(writer: database, path: database.path, logger: logger, opensOwnFile: false)
        let levels = try? database.writeWithoutTransaction { db in
            (try String.fetchOne(db, sql: "PRAGMA journal_mode"), try Int.fetchOne(db, sql: "PRAGMA synchronous"))
        }
        if let (mode, level) = levels, mode?.lowercased() == "wal", let level, level < 2 {
            logger.warning(
                "the outbox's database is in WAL mode with synchronous below FULL: a queued write may be lost on power loss",
                metadata: ["outbox.storage": "\(description)", "sqlite.synchronous": "\(level)"])
        }
    }

    private init(writer: any DatabaseWriter, path: String, logger: Logger, opensOwnFile: Bool) throws {
        self.writer = writer
        self.opensOwnFile = opensOwnFile
        self.path = path
        self.logger = logger
        do {
            try SQLiteOutboxSchema.migrate(writer)
        } catch let conflict as SQLiteSchema.Conflict {
            throw StoreError(store: Self.describe(path), operation: .open, key: nil, reason: conflict.description, underlying: conflict)
        } catch {
            throw StoreError(
                store: Self.describe(path), operation: .open, key: nil,
                reason: "cannot set up the outbox tables: \(SQLiteDatabaseFile.reason(for: error))", underlying: error)
        }
    }

    /// `SQLiteOutboxStorage(<path>)`, the storage's name in errors and logs.
    public var description: String { Self.describe(path) }

    private static func describe(_ path: String) -> String { "SQLiteOutboxStorage(\(path))" }

    /// The writer's `PRAGMA synchronous` level inside a commit that skips its flush (1, NORMAL, on a
    /// file this storage opened), for tests: a level set by a statement that was not prepared again
    /// would not change.
    package func synchronousLevelWhileUnflushed() async throws -> Int {
        try await writeUnflushed { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1 }
    }

    /// The writer's `PRAGMA synchronous` level inside a flushed commit (2, FULL), for tests.
    package func synchronousLevel() async throws -> Int {
        try await writeFlushed { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1 }
    }

    // MARK: OutboxStorage

    /// Every readable entry, in any order. Rows that cannot be read back are moved to
    /// ``unreadableTableName`` and logged (a failure to move one is logged too, and the row stays).
    /// - Throws: `StoreError` (`.retrieve`) when the database cannot be read.
    @concurrent
    public func loadAll() async throws -> [OutboxEntry] {
        let rows: [StoredOutboxRow]
        do {
            rows = try await writer.read { db in
                try Row.fetchAll(db, sql: "SELECT rowid, id, entry FROM \(SQLiteOutboxSchema.entries)").map {
                    StoredOutboxRow(rowid: $0[0], id: $0[1], entry: $0[2])
                }
            }
        } catch {
            throw failure(.retrieve, nil, error)
        }
        return await readable(rows)
    }

    /// The entries `rows` hold; a row that cannot be read back is set aside and left out.
    private func readable(_ rows: [StoredOutboxRow]) async -> [OutboxEntry] {
        var entries: [OutboxEntry] = []
        entries.reserveCapacity(rows.count)
        for row in rows {
            switch row.decode(memo) {
            case .success(let entry): entries.append(entry)
            case .failure(let unreadable): await setAside(row, reason: unreadable.reason)
            }
        }
        return entries
    }

    /// The entry with `id`, read through the primary key, or `nil` when there is none. A row that
    /// cannot be read back is moved to ``unreadableTableName`` and logged, as ``loadAll()`` does, and
    /// reads as `nil`.
    /// - Throws: `StoreError` (`.retrieve`) when the database cannot be read.
    @concurrent
    public func entry(_ id: UUID) async throws -> OutboxEntry? {
        let key = id.lowercasedString
        let row: StoredOutboxRow?
        do {
            row = try await writer.read { db in
                try Row.fetchOne(db, sql: "SELECT rowid, id, entry FROM \(SQLiteOutboxSchema.entries) WHERE id = ?", arguments: [key])
                    .map { StoredOutboxRow(rowid: $0[0], id: $0[1], entry: $0[2]) }
            }
        } catch {
            throw failure(.retrieve, key, error)
        }
        guard let row else { return nil }
        switch row.decode(memo) {
        case .success(let entry):
            return entry
        case .failure(let unreadable):
            await setAside(row, reason: unreadable.reason)
            return nil
        }
    }

    /// Inserts `entry`, or replaces the row with its id, in one transaction.
    /// - Throws: `StoreError` (`.insert`) when the entry does not encode or the write fails; the
    ///   previous version of the row is then intact.
    @concurrent
    public func save(_ entry: OutboxEntry) async throws {
        let arguments = try Self.arguments(entry, store: description, memo: memo)
        do {
            try await writeFlushed { db in
                try db.cachedStatement(sql: Self.upsertSQL).execute(arguments: arguments)
            }
        } catch {
            throw failure(.insert, entry.idempotencyKey, error)
        }
    }

    /// Inserts or replaces every entry of `entries` in one transaction: one commit, and one flush
    /// of the log, for all of them (the outbox's group commit).
    /// - Throws: `StoreError` (`.insert`) when an entry does not encode or the write fails; no row
    ///   is then changed.
    @concurrent
    public func save(contentsOf entries: [OutboxEntry]) async throws {
        guard entries.count > 1 else {
            if let entry = entries.first { try await save(entry) }
            return
        }
        let rows = try entries.map { try Self.arguments($0, store: description, memo: memo) }
        do {
            try await writeFlushed { db in
                let statement = try db.cachedStatement(sql: Self.upsertSQL)
                for row in rows { try statement.execute(arguments: row) }
            }
        } catch {
            throw failure(.insert, entries.first?.idempotencyKey, error)
        }
    }

    /// The upsert's arguments for `entry` (its encoding remembered in `memo`).
    private static func arguments(_ entry: OutboxEntry, store: String, memo: OutboxEntryMemo) throws -> StatementArguments {
        let key = entry.id.lowercasedString  // the row's id: the write's, whatever its key's revision
        let encoded: Data
        do {
            encoded = try entry.encodedForStorage()
        } catch {
            throw StoreError(store: store, operation: .insert, key: key, reason: "entry does not encode: \(error)", underlying: error)
        }
        memo.remember(entry, as: encoded)
        return [
            key, Int64(clamping: entry.sequence), entry.scope, entry.kind, entry.isPending ? "pending" : "parked",
            entry.attempts, entry.createdAt.timeIntervalSince1970, entry.nextAttemptAt.timeIntervalSince1970, encoded,
        ]
    }

    /// Replaces the row of a write whose attempt count or next attempt changed, in one
    /// transaction committed without a flush of its own (see ``OutboxStorage``).
    @concurrent
    public func saveAttempt(_ entry: OutboxEntry) async throws {
        let arguments = try Self.arguments(entry, store: description, memo: memo)
        do {
            try await writeUnflushed { db in try db.cachedStatement(sql: Self.upsertSQL).execute(arguments: arguments) }
        } catch {
            throw failure(.insert, entry.idempotencyKey, error)
        }
    }

    /// Removes the delivered writes' rows and replaces the row of `entry` (its attempt), in one
    /// transaction committed without a flush of its own: a drain's one commit per delivery.
    @concurrent
    public func saveAttempt(_ entry: OutboxEntry, removingDelivered delivered: [UUID]) async throws {
        let arguments = try Self.arguments(entry, store: description, memo: memo)
        let keys = delivered.map { $0.lowercasedString }
        delivered.forEach(memo.forget)
        do {
            try await writeUnflushed { db in
                let delete = try db.cachedStatement(sql: Self.deleteSQL)
                for key in keys { try delete.execute(arguments: Self.deleteArguments(key)) }
                try db.cachedStatement(sql: Self.upsertSQL).execute(arguments: arguments)
            }
        } catch {
            throw failure(.insert, entry.idempotencyKey, error)
        }
    }

    /// Removes a delivered write's row, in one transaction committed without a flush of its own
    /// (see ``OutboxStorage``).
    @concurrent
    public func removeDelivered(_ id: UUID) async throws {
        let key = id.lowercasedString
        memo.forget(id)
        do {
            try await writeUnflushed { db in
                try db.cachedStatement(sql: Self.deleteSQL).execute(arguments: Self.deleteArguments(key))
            }
        } catch {
            throw failure(.delete, key, error)
        }
    }

    /// Removes the row with `id`; succeeds when there is none.
    /// - Throws: `StoreError` (`.delete`) when the write fails; the row is then still there.
    @concurrent
    public func remove(_ id: UUID) async throws {
        let key = id.lowercasedString
        memo.forget(id)
        do {
            try await writeFlushed { db in
                try db.execute(sql: Self.deleteSQL, arguments: Self.deleteArguments(key))
            }
        } catch {
            throw failure(.delete, key, error)
        }
    }

    // MARK: Shared by processes

    public var isSharedByProcesses: Bool { true }

    /// Claims `scope` in one write transaction (the database's write lock, held for it alone).
    @concurrent
    public func claim(scope: String, for claimant: OutboxClaimant, until expiresAt: Date, now: Date) async throws -> OutboxClaimOutcome {
        do {
            let claimData = try JSONEncoder().encode(OutboxScopeClaim(claimant: claimant, expiresAt: expiresAt))
            return try await writeFlushed { db -> OutboxClaimOutcome in
                let held = try Data.fetchOne(db, sql: "SELECT claim FROM \(SQLiteOutboxSchema.claims) WHERE scope = ?", arguments: [scope])
                    .flatMap { try? JSONDecoder().decode(OutboxScopeClaim.self, from: $0) }
                let decision = OutboxClaimRule.decide(held: held, by: claimant, until: expiresAt, now: now)
                if decision.store != nil {
                    try db.execute(
                        sql: """
                            INSERT INTO \(SQLiteOutboxSchema.claims) (scope, claimant_id, claim, expires_at) VALUES (?, ?, ?, ?)
                            ON CONFLICT(scope) DO UPDATE SET claimant_id = excluded.claimant_id, claim = excluded.claim, expires_at = excluded.expires_at
                            """,
                        arguments: [scope, claimant.id.lowercasedString, claimData, expiresAt.timeIntervalSince1970])
                }
                return decision.outcome
            }
        } catch {
            throw failure(.insert, scope, error)
        }
    }

    /// Gives `claimant`'s claim on `scope` back, if it still holds it.
    @concurrent
    public func release(scope: String, for claimant: OutboxClaimant) async throws {
        do {
            try await writeFlushed { db in
                try db.execute(
                    sql: "DELETE FROM \(SQLiteOutboxSchema.claims) WHERE scope = ? AND claimant_id = ?",
                    arguments: [scope, claimant.id.lowercasedString])
            }
        } catch {
            throw failure(.delete, scope, error)
        }
    }

    /// The readable entries of `scope`, through the `(scope, sequence)` index; unreadable rows are set
    /// aside as ``loadAll()`` does.
    @concurrent
    public func entries(inScope scope: String) async throws -> [OutboxEntry] {
        let rows: [StoredOutboxRow]
        do {
            rows = try await writer.read { db in
                try Row.fetchAll(db, sql: "SELECT rowid, id, entry FROM \(SQLiteOutboxSchema.entries) WHERE scope = ?", arguments: [scope]).map {
                    StoredOutboxRow(rowid: $0[0], id: $0[1], entry: $0[2])
                }
            }
        } catch {
            throw failure(.retrieve, scope, error)
        }
        return await readable(rows)
    }

    /// The next sequence, from `strata_outbox_sequence`, in one write transaction.
    ///
    /// On a file this storage opened (WAL), that transaction commits with `synchronous = NORMAL`: no
    /// flush of its own. The WAL is one file written in order, so the flush of any later commit
    /// (the save of the write this sequence numbers, in this process or another) makes it durable
    /// too. Power lost before such a flush can lose the number, and then nothing used it: the
    /// write it numbered was not acknowledged, and no later number was issued durably. A process
    /// killed loses nothing (the commit is in the operating system's cache). On a database the
    /// application opened, the commit is the database's own.
    @concurrent
    public func nextSequence(after: UInt64) async throws -> UInt64 {
        let floor = Int64(clamping: after)
        let issue = { @Sendable (db: Database) throws -> Int64 in
            try db.cachedStatement(sql: Self.nextSequenceSQL).execute(arguments: [floor &+ 1, floor])
            return try Int64.fetchOne(db.cachedStatement(sql: Self.sequenceSQL)) ?? floor &+ 1
        }
        do {
            return UInt64(max(try await writeUnflushed(issue), 1))
        } catch {
            throw failure(.insert, nil, error)
        }
    }

    /// Numbers a new write and saves it in one transaction (one flushed commit): the sequence is
    /// issued as ``nextSequence(after:)`` issues it, and the row is written with it.
    @concurrent
    public func saveNumbered(after: UInt64, _ entry: @escaping @Sendable (UInt64) -> OutboxEntry?) async throws -> OutboxEntry? {
        let floor = Int64(clamping: after)
        let store = description
        let memo = memo
        do {
            return try await writeFlushed { db -> OutboxEntry? in
                try db.cachedStatement(sql: Self.nextSequenceSQL).execute(arguments: [floor &+ 1, floor])
                let issued = try Int64.fetchOne(db.cachedStatement(sql: Self.sequenceSQL)) ?? floor &+ 1
                guard let numbered = entry(UInt64(max(issued, 1))) else { return nil }
                try db.cachedStatement(sql: Self.upsertSQL).execute(arguments: try Self.arguments(numbered, store: store, memo: memo))
                return numbered
            }
        } catch let error as StoreError {
            throw error
        } catch {
            throw failure(.insert, nil, error)
        }
    }

    /// Runs `body` in one write transaction that commits without a flush of its own on a file
    /// this storage opened (WAL, so a later flushed commit makes it durable too; a killed process
    /// loses nothing), and as a plain transaction on the application's database.
    private func writeUnflushed<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await write(atLevel: 1, body)
    }

    /// Runs `body` in one write transaction that commits flushed: at `synchronous = FULL`, set
    /// first (and checked) unless it is already.
    private func writeFlushed<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await write(atLevel: 2, body)
    }

    /// `body` in one write transaction at `synchronous` level `wanted` (1 NORMAL, 2 FULL) on a file
    /// this storage opened; a plain transaction on the application's database.
    private func write<T: Sendable>(atLevel wanted: Int, _ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        guard opensOwnFile else { return try await writer.write(body) }
        let level = self.level
        return try await writer.writeWithoutTransaction { db -> T in
            try Self.setLevel(wanted, of: db, known: level)
            return try Self.transaction(db, body)
        }
    }

    /// Sets the writer's `PRAGMA synchronous` to `wanted` (1 NORMAL, 2 FULL) unless `known` says it
    /// is already, and checks that it took. Never from a cached statement: SQLite applies this pragma
    /// when its statement is prepared, so a cached statement run again changes nothing.
    private static func setLevel(_ wanted: Int, of db: Database, known: Locked<Int?>) throws {
        guard known.withLock({ $0 }) != wanted else { return }
        known.withLock { $0 = nil }
        try db.execute(sql: wanted == 2 ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL")
        guard try Int.fetchOne(db, sql: "PRAGMA synchronous") == wanted else {
            throw DatabaseError(message: "PRAGMA synchronous = \(wanted == 2 ? "FULL" : "NORMAL") did not take")
        }
        known.withLock { $0 = wanted }
    }

    /// `body` in one `BEGIN IMMEDIATE` transaction on a connection outside any transaction.
    private static func transaction<T>(_ db: Database, _ body: (Database) throws -> T) throws -> T {
        var value: T?
        try db.inTransaction(.immediate) {
            value = try body(db)
            return .commit
        }
        guard let value else { throw DatabaseError(message: "the transaction committed without running its body") }
        return value
    }

    /// Deletes a write's row: the one keyed by its id, and one an earlier version keyed by its
    /// idempotency key (`<id>-r<n>`, written by a process of that version sharing the file after
    /// `strata.outbox.v3`), a range of the primary key.
    private static let deleteSQL = "DELETE FROM \(SQLiteOutboxSchema.entries) WHERE id = ? OR (id >= ? AND id < ?)"

    private static func deleteArguments(_ key: String) -> StatementArguments { [key, key + "-r", key + "-s"] }

    private static let nextSequenceSQL =
        "INSERT INTO \(SQLiteOutboxSchema.sequence) (id, value) VALUES (1, ?) ON CONFLICT(id) DO UPDATE SET value = max(value, ?) + 1"
    private static let sequenceSQL = "SELECT value FROM \(SQLiteOutboxSchema.sequence) WHERE id = 1"

    /// The last sequence given, from `strata_outbox_sequence`.
    @concurrent
    public func lastSequenceIssued() async throws -> UInt64? {
        do {
            let value = try await writer.read { db in
                try Int64.fetchOne(db, sql: "SELECT value FROM \(SQLiteOutboxSchema.sequence) WHERE id = 1")
            }
            return UInt64(max(value ?? 0, 0))
        } catch {
            throw failure(.retrieve, nil, error)
        }
    }

    // MARK: Internals

    private static var upsertSQL: String {
        """
        INSERT INTO \(SQLiteOutboxSchema.entries) (id, sequence, scope, kind, state, attempts, created_at, next_attempt_at, entry)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT(id) DO UPDATE SET
            sequence = excluded.sequence, scope = excluded.scope, kind = excluded.kind, state = excluded.state,
            attempts = excluded.attempts, created_at = excluded.created_at,
            next_attempt_at = excluded.next_attempt_at, entry = excluded.entry
        """
    }

    /// Moves an unreadable row, as it is, into the quarantine table (unless a save replaced it
    /// meanwhile), and logs it.
    private func setAside(_ row: StoredOutboxRow, reason: String) async {
        let now = Date().timeIntervalSince1970
        var metadata: Logger.Metadata = [
            "outbox.storage": "\(description)", "outbox.entry": "\(row.idText)", "reason": "\(reason)",
            "table": "\(SQLiteOutboxSchema.unreadable)",
        ]
        do {
            try await writeFlushed { db in
                try db.execute(
                    sql: """
                        INSERT INTO \(SQLiteOutboxSchema.unreadable) (id, entry, reason, set_aside_at)
                        SELECT id, entry, ?, ? FROM \(SQLiteOutboxSchema.entries) WHERE rowid = ? AND entry IS ?
                        """,
                    arguments: [reason, now, row.rowid, row.entry])
                try db.execute(
                    sql: "DELETE FROM \(SQLiteOutboxSchema.entries) WHERE rowid = ? AND entry IS ?",
                    arguments: [row.rowid, row.entry])
            }
            logger.error("outbox entry unreadable; set aside, not deleted", metadata: metadata)
        } catch {
            metadata["error"] = "\(SQLiteDatabaseFile.reason(for: error))"
            logger.error("outbox entry unreadable; could not set it aside, left in place", metadata: metadata)
        }
    }

    /// `error` as the `StoreError` of `operation`; cancellation stays `CancellationError`.
    private func failure(_ operation: StoreError.Operation, _ key: String?, _ error: any Error) -> any Error {
        if error is CancellationError || error is StoreError { return error }
        return StoreError(store: description, operation: operation, key: key, reason: SQLiteDatabaseFile.reason(for: error), underlying: error)
    }
}

/// One row as stored, before any interpretation (so an unexpected type is unreadable, not a crash).
private struct StoredOutboxRow: Sendable {
    var rowid: DatabaseValue
    var id: DatabaseValue
    var entry: DatabaseValue

    struct Unreadable: Error {
        var reason: String
    }

    var idText: String {
        if case .string(let text) = id.storage { text } else { "\(id)" }
    }

    /// The row's entry: the one `memo` remembers for its id and bytes, or the bytes decoded.
    func decode(_ memo: OutboxEntryMemo) -> Result<OutboxEntry, Unreadable> {
        let bytes: Data
        switch entry.storage {
        case .blob(let data): bytes = data
        case .string(let text): bytes = Data(text.utf8)
        default: return .failure(Unreadable(reason: "the entry column holds \(entry), not an encoded entry"))
        }
        if case .string(let text) = id.storage, let known = memo.entry(text, bytes: bytes), text == known.id.lowercasedString {
            return .success(known)
        }
        let decoded: OutboxEntry
        do {
            decoded = try OutboxEntry(storageEncoding: bytes)
        } catch {
            return .failure(Unreadable(reason: "the entry does not decode: \(error)"))
        }
        // A row written before `strata.outbox.v3`, by a process of an earlier version sharing the
        // file, is keyed by the write's idempotency key: read too (its next save keys it by its id).
        guard case .string(let id) = id.storage, id == decoded.id.lowercasedString || id == decoded.idempotencyKey else {
            return .failure(Unreadable(reason: "the row's id \(self.id) is not the entry's id \(decoded.id.lowercasedString)"))
        }
        return .success(decoded)
    }
}
#endif
