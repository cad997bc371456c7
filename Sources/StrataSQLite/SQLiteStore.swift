#if SQLite
import Foundation
import GRDB
import Logging
@_spi(StrataInternals) import Strata

/// A persistent store of many keys in one SQLite database file (GRDB `DatabasePool`, WAL mode).
///
/// - One row per key in the table ``tableName``; values are encoded by a ``Codec`` (JSON by default).
/// - The file and its directory are created on demand: the directory with mode `0700`, the file with
///   mode `0600` (SQLite gives its `-wal` and `-shm` files the same mode).
/// - Readers run concurrently on the pool's reader connections; writes are serialised, each in one
///   immediate transaction. Reads and writes never block the cooperative thread pool while they wait
///   for the database: they use GRDB's async `read` and `write`. (Opening is synchronous; see `init`.)
/// - Several processes may open the same file at once (WAL, and a busy timeout of 5 s by default):
///   each sees the others' committed writes.
/// - Optional ``Limits`` on the number of entries and on their total encoded bytes, enforced by
///   evicting the least recently used entries in the same transaction as the write that exceeds them.
/// - An entry that no longer decodes is a miss: it is deleted and logged at `warning`. A failed write
///   throws ``StoreError`` and leaves the previous entry intact. A file that is not an SQLite
///   database, or a database whose tables conflict with this store's, fails at open with a
///   ``StoreError`` whose operation is `.open` — never a crash.
///
/// ```swift
/// let store = try SQLiteStore<[FeedItem]>(
///     path: cachesDirectory.appending(path: "strata/cache.sqlite"),
///     limits: .init(countLimit: 1_000, byteLimit: 50_000_000))
/// let feed = store.loader(key: "feed", freshness: .maxAge(.seconds(3600)))
/// ```
///
/// ### Recency
/// A write always stamps the entry as most recent. A read makes an entry recent only when the store
/// has limits (without limits nothing is evicted, so recency is never used and a read stays a pure
/// read on a reader connection). Even then a read does not write: it notes the key in memory, and
/// the notes are applied in this store's next write transaction (or once 64 keys are pending). So a
/// hit costs no extra transaction, and eviction still sees every read this store made. Notes are
/// best effort: those not yet written when the store goes away or when their write fails, and reads
/// made by another process, only lose their effect on eviction order, never data.
public final class SQLiteStore<Value: Sendable>: Store, Sendable {
    /// Cache keys are strings: the table's primary key.
    public typealias Key = String

    /// Bounds on what the store keeps (the same type for every `Value`).
    public typealias Limits = SQLiteStoreLimits

    /// The name of the table holding the entries, for inspecting the file with other SQLite tools.
    public static var tableName: String { SQLiteSchema.entries }

    /// The database file's absolute, standardised path.
    public let path: String
    /// The limits this store enforces on its writes.
    public let limits: Limits
    private let pool: DatabasePool
    private let codec: any Codec<Value>
    private let logger: Logger
    private let pendingAccesses = Locked(PendingAccesses())

    /// Reads noted since the last write are applied once this many keys are pending.
    static var accessFlushThreshold: Int { 64 }

    /// Opens (creating if needed) the database at `path`, encoding values with `codec`.
    /// - Parameters:
    ///   - path: the database file. Its directory is created (mode `0700`) and the file (mode `0600`)
    ///     when missing; a relative path is resolved against the current directory.
    ///   - codec: turns values into bytes and back.
    ///   - limits: bounds on entry count and total encoded bytes; none by default.
    ///   - busyTimeout: how long a write waits for another process's write lock before it fails.
    ///   - logger: where corrupt entries and evictions are reported.
    /// - Throws: ``StoreError`` with operation `.open` when the directory or file cannot be created,
    ///   the file is not an SQLite database, or it holds tables of the same name that this store did
    ///   not create.
    ///
    /// Opening is synchronous: it opens the file and brings its schema up to date (a few
    /// milliseconds, or up to `busyTimeout` while another process holds the write lock).
    public convenience init(
        path: String,
        codec: some Codec<Value>,
        limits: Limits = .none,
        busyTimeout: Duration = .seconds(5),
        logger: Logger = Logger(label: "strata.sqlitestore")
    ) throws {
        try self.init(path: path, codec: codec, limits: limits, busyMode: .timeout(busyTimeout / .seconds(1)), logger: logger)
    }

    /// The designated initialiser: `busyMode` is GRDB's, so tests can see when a write waits for a lock.
    init(
        path: String,
        codec: some Codec<Value>,
        limits: Limits,
        busyMode: Database.BusyMode,
        logger: Logger
    ) throws {
        let path = URL(fileURLWithPath: path).standardizedFileURL.path
        self.path = path
        self.limits = limits
        self.codec = codec
        self.logger = logger
        self.pool = try Self.openPool(path: path, limits: limits, busyMode: busyMode, logger: logger)
    }

    /// Opens (creating if needed) the database at the file URL `path`, encoding values with `codec`.
    /// - Parameters:
    ///   - path: the database file's URL; its directory (`0700`) and the file (`0600`) are created
    ///     when missing.
    ///   - codec: turns values into bytes and back.
    ///   - limits: bounds on entry count and total encoded bytes; none by default.
    ///   - busyTimeout: how long a write waits for another process's write lock before it fails.
    ///   - logger: where corrupt entries and evictions are reported.
    /// - Throws: ``StoreError`` with operation `.open` (see the `String` path initialiser).
    public convenience init(
        path: URL,
        codec: some Codec<Value>,
        limits: Limits = .none,
        busyTimeout: Duration = .seconds(5),
        logger: Logger = Logger(label: "strata.sqlitestore")
    ) throws {
        try self.init(path: path.path, codec: codec, limits: limits, busyTimeout: busyTimeout, logger: logger)
    }

    /// Opens (creating if needed) the database at `path`, encoding values as JSON.
    public convenience init(
        path: String,
        limits: Limits = .none,
        busyTimeout: Duration = .seconds(5),
        logger: Logger = Logger(label: "strata.sqlitestore")
    ) throws where Value: Codable {
        try self.init(path: path, codec: JSONCodec<Value>(), limits: limits, busyTimeout: busyTimeout, logger: logger)
    }

    /// Opens (creating if needed) the database at the file URL `path`, encoding values as JSON.
    public convenience init(
        path: URL,
        limits: Limits = .none,
        busyTimeout: Duration = .seconds(5),
        logger: Logger = Logger(label: "strata.sqlitestore")
    ) throws where Value: Codable {
        try self.init(path: path.path, codec: JSONCodec<Value>(), limits: limits, busyTimeout: busyTimeout, logger: logger)
    }

    /// Values served by this store come from a database on this machine.
    public var origin: Origin { .disk }

    // MARK: - Store

    /// The entry for `key`, or `nil` when there is none or it no longer decodes (it is then deleted).
    /// - Throws: ``StoreError`` (`.retrieve`) when the database cannot be read.
    @concurrent
    public func retrieve(_ key: String) async throws -> CacheEntry<Value>? {
        let row: StoredRow?
        do {
            row = try await pool.read { db in try StoredRow.fetch(key, in: db) }
        } catch {
            throw failure(.retrieve, key: key, error)
        }
        guard let row else { return nil }
        let decoded: CacheEntry<Value>
        switch row.decode(with: codec) {
        case .success(let entry):
            decoded = entry
        case .failure(let corruption):
            await discardCorrupt(row, key: key, reason: corruption.description)
            return nil
        }
        await noteAccess(key)
        return decoded
    }

    /// Stores `entry` under `key`, replacing any previous entry, then evicts beyond ``limits``.
    /// - Throws: ``StoreError`` (`.insert`) when the value does not encode or the write fails; the
    ///   previous entry is then intact.
    @concurrent
    public func insert(_ entry: CacheEntry<Value>, for key: String) async throws {
        let payload: Data
        do {
            payload = try codec.encode(entry.value)
        } catch {
            throw StoreError(store: description, operation: .insert, key: key, reason: "value does not encode: \(error)", underlying: error)
        }
        let storedAt = entry.storedAt.timeIntervalSinceReferenceDate
        guard storedAt.isFinite else {
            throw StoreError(store: description, operation: .insert, key: key, reason: "storedAt is not a finite date")
        }
        let validators = entry.validators
        let limits = limits
        let accesses = drainAccesses()
        let outcome: InsertOutcome
        do {
            outcome = try await pool.write { db in
                try Self.applyAccesses(accesses, in: db)
                if let byteLimit = limits.byteLimit, payload.count > byteLimit {
                    try db.execute(sql: "DELETE FROM \(SQLiteSchema.entries) WHERE key = ?", arguments: [key])
                    return .tooLarge
                }
                try db.cachedStatement(sql: StoreSQL.upsert).execute(arguments: [
                    key, payload, storedAt, validators.etag, validators.lastModified, validators.maxAge.map { $0 / Duration.seconds(1) } as Double?,
                    Self.millisecondsNow(), payload.count,
                ])
                return .stored(evicted: try Self.evict(beyond: limits, keeping: key, in: db))
            }
        } catch {
            throw failure(.insert, key: key, error)
        }
        switch outcome {
        case .tooLarge:
            logger.notice(
                "entry larger than the store's byte limit was not kept",
                metadata: ["store": "\(description)", "key": "\(key)", "bytes": "\(payload.count)", "byteLimit": "\(limits.byteLimit ?? 0)"])
        case .stored(let evicted) where evicted > 0:
            logger.debug("evicted least recently used entries", metadata: ["store": "\(description)", "count": "\(evicted)"])
        case .stored:
            break
        }
    }

    /// Removes the entry for `key`; succeeds when there is none.
    /// - Throws: ``StoreError`` (`.delete`) when the write fails; the entry is then still there.
    @concurrent
    public func delete(_ key: String) async throws {
        let accesses = drainAccesses()
        do {
            try await pool.write { db in
                try Self.applyAccesses(accesses, in: db)
                try db.execute(sql: "DELETE FROM \(SQLiteSchema.entries) WHERE key = ?", arguments: [key])
            }
        } catch {
            throw failure(.delete, key: key, error)
        }
    }

    /// Re-stamps the entry for `key` in place with one `UPDATE` of its metadata columns: the value
    /// is neither read nor decoded nor written. The entry also becomes the most recently used.
    /// - Returns: `false` when there is no row for `key` (nothing is then stored).
    /// - Throws: ``StoreError`` (`.refresh`) when `storedAt` is not a finite date or the write fails;
    ///   the entry is then as it was.
    @concurrent
    public func refresh(_ key: String, storedAt: Date, validators: CacheValidators) async throws -> Bool {
        let storedAt = storedAt.timeIntervalSinceReferenceDate
        guard storedAt.isFinite else {
            throw StoreError(store: description, operation: .refresh, key: key, reason: "storedAt is not a finite date")
        }
        let accesses = drainAccesses()
        do {
            return try await pool.write { db in
                try Self.applyAccesses(accesses, in: db)
                try db.cachedStatement(sql: StoreSQL.refresh).execute(arguments: [
                    storedAt, validators.etag, validators.lastModified, validators.maxAge.map { $0 / Duration.seconds(1) } as Double?,
                    Self.millisecondsNow(), key,
                ])
                return db.changesCount > 0
            }
        } catch {
            throw failure(.refresh, key: key, error)
        }
    }

    // MARK: - Maintenance

    /// Deletes every entry stored before `date` (by ``CacheEntry/storedAt``), for example to sweep entries
    /// no freshness policy would serve any more.
    /// - Returns: how many entries were removed.
    /// - Throws: ``StoreError`` (`.delete`) when the write fails; nothing is then removed.
    @discardableResult
    @concurrent
    public func removeEntries(storedBefore date: Date) async throws -> Int {
        let seconds = date.timeIntervalSinceReferenceDate
        do {
            return try await pool.write { db in
                try db.execute(sql: "DELETE FROM \(SQLiteSchema.entries) WHERE stored_at < ?", arguments: [seconds])
                return db.changesCount
            }
        } catch {
            throw failure(.delete, key: nil, error)
        }
    }

    /// Deletes every entry.
    /// - Throws: ``StoreError`` (`.delete`) when the write fails; nothing is then removed.
    @concurrent
    public func removeAll() async throws {
        _ = drainAccesses()
        do {
            try await pool.write { db in
                try db.execute(sql: "DELETE FROM \(SQLiteSchema.entries)")
            }
        } catch {
            throw failure(.delete, key: nil, error)
        }
    }

    /// The number of entries stored (read from a counter the database keeps exact, not by a scan).
    /// - Throws: ``StoreError`` (`.retrieve`) when the database cannot be read.
    public var count: Int {
        get async throws { try await totals().count }
    }

    /// The total bytes of the stored encoded values (what ``Limits/byteLimit`` bounds).
    /// - Throws: ``StoreError`` (`.retrieve`) when the database cannot be read.
    public var totalBytes: Int {
        get async throws { try await totals().bytes }
    }

    private func totals() async throws -> (count: Int, bytes: Int) {
        do {
            return try await pool.read { db in try Self.readTotals(db) }
        } catch {
            throw failure(.retrieve, key: nil, error)
        }
    }

    // MARK: - Opening

    private static func openPool(path: String, limits: Limits, busyMode: Database.BusyMode, logger: Logger) throws -> DatabasePool {
        let description = "SQLiteStore(\(path))"
        func openError(_ reason: String, _ error: (any Error)? = nil) -> StoreError {
            StoreError(store: description, operation: .open, key: nil, reason: reason, underlying: error)
        }
        do {
            try SQLiteDatabaseFile.create(at: path)
        } catch {
            throw openError("cannot create the database file: \(error)", error)
        }
        var configuration = Configuration()
        configuration.label = "strata.sqlite"
        configuration.busyMode = busyMode
        let pool: DatabasePool
        do {
            pool = try SQLiteDatabaseFile.openPool(path: path, configuration: configuration)
        } catch {
            throw openError("not a usable SQLite database: \(reason(for: error))", error)
        }
        do {
            if try SQLiteSchema.migrate(pool) == .byAnotherConnection {
                logger.debug("another connection set up the cache tables while this one was opening", metadata: ["store": "\(description)"])
            }
        } catch let conflict as SQLiteSchema.Conflict {
            throw openError(conflict.description, conflict)
        } catch {
            throw openError("cannot set up the cache tables: \(reason(for: error))", error)
        }
        if limits.isLimited {
            do {
                try SQLiteSchema.ensureEvictionIndex(pool)
            } catch {
                throw openError("cannot create the eviction index: \(reason(for: error))", error)
            }
        }
        return pool
    }

    // MARK: - SQL

    /// Milliseconds since 1970, the clock part of a `last_access` stamp.
    private static func millisecondsNow() -> Int64 {
        Int64((Date().timeIntervalSince1970 * 1000).rounded(.down))
    }

    private static func readTotals(_ db: Database) throws -> (count: Int, bytes: Int) {
        let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT entry_count, total_bytes FROM \(SQLiteSchema.totals) WHERE id = 0"))
        guard let row,
              let count = Int.fromDatabaseValue(row[0] as DatabaseValue),
              let bytes = Int.fromDatabaseValue(row[1] as DatabaseValue)
        else { throw SQLiteSchema.Conflict(description: "the table '\(SQLiteSchema.totals)' lacks its row") }
        return (count, bytes)
    }

    /// Marks `keys` as used, oldest note first, so the last one read is the most recent (each stamp
    /// is past the one before: the triggers raise `newest_access` with every update).
    private static func applyAccesses(_ keys: [String], in db: Database) throws {
        guard !keys.isEmpty else { return }
        let statement = try db.cachedStatement(sql: StoreSQL.touch)
        let now = millisecondsNow()
        for key in keys {
            try statement.execute(arguments: [now, key])
        }
    }

    /// Deletes least recently used entries (never `key`, just written) until `limits` hold.
    /// - Returns: how many entries were evicted.
    private static func evict(beyond limits: Limits, keeping key: String, in db: Database) throws -> Int {
        guard limits.isLimited else { return 0 }
        var evicted = 0
        var totals = try readTotals(db)
        if let countLimit = limits.countLimit, totals.count > countLimit {
            try db.execute(
                sql: """
                    DELETE FROM \(SQLiteSchema.entries) WHERE key IN (
                        SELECT key FROM \(SQLiteSchema.entries) WHERE key <> ? ORDER BY last_access LIMIT ?)
                    """,
                arguments: [key, totals.count - countLimit])
            evicted += db.changesCount
            totals = try readTotals(db)
        }
        if let byteLimit = limits.byteLimit, totals.bytes > byteLimit {
            var excess = totals.bytes - byteLimit
            var victims: [DatabaseValue] = []
            let rows = try Row.fetchCursor(
                db, sql: "SELECT key, size FROM \(SQLiteSchema.entries) WHERE key <> ? ORDER BY last_access",
                arguments: [key])
            while excess > 0, let row = try rows.next() {
                victims.append(row[0])
                excess -= Int.fromDatabaseValue(row[1] as DatabaseValue) ?? 0
            }
            let statement = try db.cachedStatement(sql: "DELETE FROM \(SQLiteSchema.entries) WHERE key = ?")
            for victim in victims {
                try statement.execute(arguments: [victim])
                evicted += db.changesCount
            }
        }
        return evicted
    }

    // MARK: - Recency notes

    private func noteAccess(_ key: String) async {
        guard limits.isLimited else { return }
        let pending = pendingAccesses.withLock { $0.record(key) }
        guard pending >= Self.accessFlushThreshold else { return }
        let accesses = drainAccesses()
        do {
            try await pool.write { db in try Self.applyAccesses(accesses, in: db) }
        } catch {
            // Only the eviction order is at stake; the read itself succeeded.
            logger.debug("could not record recent reads", metadata: ["store": "\(description)", "reason": "\(Self.reason(for: error))"])
        }
    }

    private func drainAccesses() -> [String] {
        guard limits.isLimited else { return [] }
        return pendingAccesses.withLock { $0.drain() }
    }

    // MARK: - Corrupt entries and errors

    /// Deletes the unreadable row, unless another write replaced it since it was read.
    private func discardCorrupt(_ row: StoredRow, key: String, reason: String) async {
        logger.warning(
            "removing corrupt cache entry",
            metadata: ["store": "\(description)", "key": "\(key)", "reason": "\(reason)"])
        do {
            try await pool.write { db in
                try db.execute(
                    sql: "DELETE FROM \(SQLiteSchema.entries) WHERE key = ? AND value IS ? AND stored_at IS ?",
                    arguments: [key, row.value, row.storedAt])
            }
        } catch {
            logger.warning(
                "could not remove corrupt cache entry",
                metadata: ["store": "\(description)", "key": "\(key)", "reason": "\(Self.reason(for: error))"])
        }
    }

    /// `error` as the ``StoreError`` of `operation`; cancellation stays `CancellationError`.
    private func failure(_ operation: StoreError.Operation, key: String?, _ error: any Error) -> any Error {
        if error is CancellationError || error is StoreError { return error }
        return StoreError(store: description, operation: operation, key: key, reason: Self.reason(for: error), underlying: error)
    }

    static func reason(for error: any Error) -> String { SQLiteDatabaseFile.reason(for: error) }
}

/// Bounds on what the store keeps; the least recently used entries are evicted beyond them.
public struct SQLiteStoreLimits: Sendable, Hashable {
    /// The most entries kept; `nil` for no limit.
    public var countLimit: Int?
    /// The most total bytes of encoded values kept; `nil` for no limit. An entry larger than
    /// the whole limit is not kept (and the previous entry for its key is removed, being stale).
    public var byteLimit: Int?

    /// Limits on entry count and encoded bytes; both `nil` (no limit) by default.
    public init(countLimit: Int? = nil, byteLimit: Int? = nil) {
        precondition(countLimit.map { $0 > 0 } ?? true, "countLimit must be positive")
        precondition(byteLimit.map { $0 >= 0 } ?? true, "byteLimit must not be negative")
        self.countLimit = countLimit
        self.byteLimit = byteLimit
    }

    /// No limits: nothing is evicted.
    public static let none = SQLiteStoreLimits()

    var isLimited: Bool { countLimit != nil || byteLimit != nil }
}

extension SQLiteStore: CustomStringConvertible {
    /// `SQLiteStore(<path>)`, the store's name in chains, errors and logs.
    public var description: String { "SQLiteStore(\(path))" }
}

/// The outcome of one insert transaction.
private enum InsertOutcome: Sendable {
    case stored(evicted: Int)
    case tooLarge
}

/// The store's statements with arguments, built once (not per write: a cached statement is looked up
/// by its SQL text, and `SQLiteStore` is generic, so it cannot hold them as static constants itself).
private enum StoreSQL {
    /// The `last_access` stamp of a write, given the current time in milliseconds since 1970 as
    /// argument `now`: the current time, or one past the newest stamp ever written (kept by the
    /// triggers in the totals row) when the clock is behind it (same millisecond, or another
    /// process's clock ahead of ours). Read inside the write transaction, so stamps strictly increase
    /// across every connection and process.
    static func accessStamp(now: String) -> String {
        "max(\(now), (SELECT newest_access FROM \(SQLiteSchema.totals) WHERE id = 0) + 1)"
    }

    /// The insert-or-replace of one entry.
    static let upsert = """
        INSERT INTO \(SQLiteSchema.entries) (key, value, stored_at, etag, last_modified, max_age, last_access, size)
        VALUES (?1, ?2, ?3, ?4, ?5, ?6, \(accessStamp(now: "?7")), ?8)
        ON CONFLICT(key) DO UPDATE SET
            value = excluded.value, stored_at = excluded.stored_at, etag = excluded.etag,
            last_modified = excluded.last_modified, max_age = excluded.max_age,
            last_access = excluded.last_access, size = excluded.size
        """

    static let refresh = """
        UPDATE \(SQLiteSchema.entries)
        SET stored_at = ?1, etag = ?2, last_modified = ?3, max_age = ?4, last_access = \(accessStamp(now: "?5"))
        WHERE key = ?6
        """

    static let touch = """
        UPDATE \(SQLiteSchema.entries) SET last_access = \(accessStamp(now: "?1")) WHERE key = ?2
        """
}

/// Keys read since the last write, each with the order of its latest read.
private struct PendingAccesses: Sendable {
    private var order: [String: Int] = [:]
    private var sequence = 0

    /// Notes a read of `key`; returns how many keys are pending.
    mutating func record(_ key: String) -> Int {
        order[key] = sequence
        sequence += 1
        return order.count
    }

    /// The pending keys, least recently read first; none are pending afterwards.
    mutating func drain() -> [String] {
        defer { order = [:] }
        return order.sorted { $0.value < $1.value }.map(\.key)
    }
}

/// One row as stored, before any interpretation (so an unexpected type is corruption, not a crash).
private struct StoredRow: Sendable {
    var value: DatabaseValue
    var storedAt: DatabaseValue
    var etag: DatabaseValue
    var lastModified: DatabaseValue
    var maxAge: DatabaseValue

    struct Corruption: Error {
        var description: String
    }

    static func fetch(_ key: String, in db: Database) throws -> StoredRow? {
        let statement = try db.cachedStatement(
            sql: "SELECT value, stored_at, etag, last_modified, max_age FROM \(SQLiteSchema.entries) WHERE key = ?")
        guard let row = try Row.fetchOne(statement, arguments: [key]) else { return nil }
        return StoredRow(value: row[0], storedAt: row[1], etag: row[2], lastModified: row[3], maxAge: row[4])
    }

    func decode<Value: Sendable>(with codec: any Codec<Value>) -> Result<CacheEntry<Value>, Corruption> {
        guard case .blob(let payload) = value.storage else {
            return .failure(Corruption(description: "value is not a blob"))
        }
        let seconds: Double
        switch storedAt.storage {
        case .double(let double): seconds = double
        case .int64(let integer): seconds = Double(integer)
        default: return .failure(Corruption(description: "stored_at is not a number"))
        }
        guard seconds.isFinite else { return .failure(Corruption(description: "stored_at is not finite")) }
        guard let etag = Self.optionalText(etag), let lastModified = Self.optionalText(lastModified) else {
            return .failure(Corruption(description: "a validator is not text"))
        }
        guard let maxAge = Self.optionalDuration(maxAge) else {
            return .failure(Corruption(description: "max_age is not a non-negative number of seconds"))
        }
        let decoded: Value
        do {
            decoded = try codec.decode(payload)
        } catch {
            return .failure(Corruption(description: "value does not decode: \(error)"))
        }
        return .success(CacheEntry(
            value: decoded, storedAt: Date(timeIntervalSinceReferenceDate: seconds),
            validators: CacheValidators(etag: etag, lastModified: lastModified, maxAge: maxAge)))
    }

    /// `.some(nil)` for NULL, `.some(duration)` for a finite, non-negative number of seconds, `nil` for
    /// anything else.
    private static func optionalDuration(_ value: DatabaseValue) -> Duration?? {
        switch value.storage {
        case .null: .some(nil)
        case .int64(let seconds) where seconds >= 0: .some(.seconds(seconds))
        case .double(let seconds): Duration(exactSeconds: seconds).map { .some($0) }
        default: nil
        }
    }

    /// `.some(nil)` for NULL, `.some(text)` for text, `nil` for anything else.
    private static func optionalText(_ value: DatabaseValue) -> String?? {
        switch value.storage {
        case .null: .some(nil)
        case .string(let text): .some(text)
        default: nil
        }
    }
}

extension Duration {
    /// The duration of `seconds` (as read from `max_age`), split into whole seconds and attoseconds so
    /// that whole and binary-fraction values (3600, 2.5, 0.25) come back exactly; `nil` when `seconds`
    /// is negative, not finite or beyond `Int64` seconds.
    fileprivate init?(exactSeconds seconds: Double) {
        guard seconds.isFinite, seconds >= 0, seconds < 9.2e18 else { return nil }
        let whole = seconds.rounded(.down)
        var wholeSeconds = Int64(whole)
        var attoseconds = Int64(((seconds - whole) * 1e18).rounded())
        if attoseconds >= 1_000_000_000_000_000_000 {
            wholeSeconds += 1
            attoseconds -= 1_000_000_000_000_000_000
        }
        self.init(secondsComponent: wholeSeconds, attosecondsComponent: attoseconds)
    }
}
#endif
