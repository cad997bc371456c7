#if SQLite
import Foundation
import GRDB
import Strata
import StrataSQLite
import StrataTesting
import Testing

/// Migration `strata.cache.v3`: writes stamp `last_access` past the totals row's `newest_access`
/// instead of past `MAX(last_access)`, and the `last_access` index exists only while a store with
/// limits uses the file.
@Suite("SQLiteStore migration v3")
struct SQLiteStoreMigrationV3Tests {
    let directory: TemporaryDirectory
    let path: String

    init() throws {
        directory = try TemporaryDirectory(prefix: "strata-sqlite")
        path = directory.appending("cache.sqlite").path
    }

    /// Stamps far ahead of this machine's clock (the year 2096), as another process's clock could
    /// have written them: a new write must still be stamped past them.
    let future: Int64 = 4_000_000_000_000
    let payload = Data("{\"id\":1,\"name\":\"a\"}".utf8)

    /// The schema exactly as versions 1 and 2 of the store wrote it (the code before this migration),
    /// with three rows whose recency is b, then c, then a (most recent last is b).
    func writeVersion2Database() throws {
        try rawConnection(path).write { db in
            try db.execute(sql: """
                CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
                INSERT INTO grdb_migrations VALUES ('strata.cache.v1'), ('strata.cache.v2');
                CREATE TABLE strata_cache_entries (
                    key TEXT NOT NULL PRIMARY KEY, value BLOB NOT NULL, stored_at REAL NOT NULL,
                    etag TEXT, last_modified TEXT, last_access INTEGER NOT NULL, size INTEGER NOT NULL,
                    max_age REAL);
                CREATE INDEX strata_cache_entries_by_last_access ON strata_cache_entries (last_access);
                CREATE INDEX strata_cache_entries_by_stored_at ON strata_cache_entries (stored_at);
                CREATE TABLE strata_cache_totals (
                    id INTEGER NOT NULL PRIMARY KEY CHECK (id = 0), entry_count INTEGER NOT NULL, total_bytes INTEGER NOT NULL);
                INSERT INTO strata_cache_totals (id, entry_count, total_bytes) VALUES (0, 0, 0);
                CREATE TRIGGER strata_cache_entries_count_insert AFTER INSERT ON strata_cache_entries BEGIN
                    UPDATE strata_cache_totals SET entry_count = entry_count + 1, total_bytes = total_bytes + NEW.size WHERE id = 0;
                END;
                CREATE TRIGGER strata_cache_entries_count_delete AFTER DELETE ON strata_cache_entries BEGIN
                    UPDATE strata_cache_totals SET entry_count = entry_count - 1, total_bytes = total_bytes - OLD.size WHERE id = 0;
                END;
                CREATE TRIGGER strata_cache_entries_count_update AFTER UPDATE OF size ON strata_cache_entries BEGIN
                    UPDATE strata_cache_totals SET total_bytes = total_bytes - OLD.size + NEW.size WHERE id = 0;
                END;
                """)
            for (key, access) in [("a", future + 1), ("b", future + 3), ("c", future + 2)] {
                try db.execute(
                    sql: "INSERT INTO strata_cache_entries VALUES (?, ?, ?, NULL, NULL, ?, ?, NULL)",
                    arguments: [key, payload, referenceDate.timeIntervalSinceReferenceDate, access, payload.count])
            }
        }
    }

    func lastAccess(_ key: String) throws -> Int64? {
        try rawConnection(path).read { db in
            try Int64.fetchOne(db, sql: "SELECT last_access FROM \(entriesTable) WHERE key = ?", arguments: [key])
        }
    }

    func hasEvictionIndex() throws -> Bool {
        try rawConnection(path).read { db in
            try db.indexes(on: entriesTable).contains { $0.name == "\(entriesTable)_by_last_access" }
        }
    }

    func appliedMigrations() throws -> [String] {
        try rawConnection(path).read { db in
            try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations ORDER BY identifier")
        }
    }

    @Test func aVersion2Database_isUpgraded_andAWriteIsStampedPastItsNewestEntry() async throws {
        try writeVersion2Database()

        let sut = try SQLiteStore<Item>(path: path, logger: quietLogger)

        #expect(try appliedMigrations() == ["strata.cache.v1", "strata.cache.v2", "strata.cache.v3", "strata.cache.v4"])
        #expect(try !hasEvictionIndex(), "a store without limits does not keep the eviction index")
        #expect(try await sut.retrieve("a") == CacheEntry(value: itemA, storedAt: referenceDate))
        #expect(try await sut.count == 3)
        try await sut.insert(itemB, for: "d", storedAt: later)
        #expect(try lastAccess("d") == future + 4, "past the newest stamp in the file, though the clock is behind it")
        try await sut.insert(itemB, for: "a", storedAt: later)
        #expect(try lastAccess("a") == future + 5)
        #expect(try await sut.refresh("c", storedAt: later, validators: CacheValidators()))
        #expect(try lastAccess("c") == future + 6)
        #expect(try await sut.retrieve("d") == CacheEntry(value: itemB, storedAt: later))
        #expect(try await sut.count == 4)
        let expectedBytes = try encodedSize(itemB) * 2 + payload.count * 2
        #expect(try await sut.totalBytes == expectedBytes)
        #expect(try keysByAccess(at: path) == ["b", "d", "a", "c"])
        // Opening again finds nothing to migrate and the same rows.
        #expect(try await SQLiteStore<Item>(path: path, logger: quietLogger).count == 4)
    }

    @Test func aVersion2Database_openedWithLimits_evictsByTheRecencyItWasWrittenWith() async throws {
        try writeVersion2Database()

        let sut = try SQLiteStore<Item>(path: path, limits: .init(countLimit: 3), logger: quietLogger)
        #expect(try hasEvictionIndex())

        try await sut.insert(itemB, for: "d", storedAt: later)
        #expect(try keysByAccess(at: path) == ["c", "b", "d"], "a, the least recently used, goes first")

        _ = try await sut.retrieve("c")
        try await sut.insert(itemB, for: "e", storedAt: later)
        #expect(try keysByAccess(at: path) == ["d", "c", "e"], "b goes: c was read since")
        #expect(try await sut.count == 3)
    }

    @Test func aFileWrittenWithoutLimits_getsTheEvictionIndexWhenAStoreWithLimitsOpensIt() async throws {
        let unlimited = try SQLiteStore<Item>(path: path, logger: quietLogger)
        for key in ["k0", "k1", "k2", "k3"] { try await unlimited.insert(itemA, for: key, storedAt: referenceDate) }
        _ = try await unlimited.retrieve("k0")  // without limits a read does not make an entry recent
        #expect(try !hasEvictionIndex())

        let limited = try SQLiteStore<Item>(path: path, limits: .init(countLimit: 2), logger: quietLogger)
        #expect(try hasEvictionIndex())
        let plan = try await rawConnection(path).read { db in
            try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN SELECT key FROM \(entriesTable) ORDER BY last_access").map { $0["detail"] as String }
        }
        #expect(plan.contains { $0.contains("\(entriesTable)_by_last_access") }, "eviction reads the index: \(plan)")

        // Both stores keep writing the same file: each write is stamped past every other.
        try await unlimited.insert(itemB, for: "k1", storedAt: later)
        try await limited.insert(itemB, for: "k4", storedAt: later)

        #expect(try keysByAccess(at: path) == ["k1", "k4"])
        #expect(try await unlimited.count == 2)
        // A store without limits leaves the index in place for the store that needs it.
        _ = try SQLiteStore<Item>(path: path, logger: quietLogger)
        #expect(try hasEvictionIndex())
    }

    @Test func stampsStrictlyIncreaseAcrossStoresWritingTheSameFileInTheSameMillisecond() async throws {
        let first = try SQLiteStore<Item>(path: path, logger: quietLogger)
        let second = try SQLiteStore<Item>(path: path, logger: quietLogger)
        let keys = (0..<40).map { "key-\($0)" }

        for (index, key) in keys.enumerated() {
            try await (index.isMultiple(of: 2) ? first : second).insert(itemA, for: key, storedAt: referenceDate)
        }

        #expect(try keysByAccess(at: path) == keys)
        let stamps = try keys.map { try #require(try lastAccess($0)) }
        #expect(Set(stamps).count == keys.count, "no two writes share a stamp")
    }

    /// Migration `strata.cache.v4`: the `stored_at` index (kept up by every write, read only by the
    /// `removeEntries(storedBefore:)` sweep) is dropped from an older file; the sweep still works.
    @Test func migrationV4_dropsTheStoredAtIndex_andTheSweepStillRemovesByAge() async throws {
        try writeVersion2Database()
        let sut = try SQLiteStore<Item>(path: path, logger: quietLogger)
        let indexes = try await rawConnection(path).read { db in try db.indexes(on: entriesTable).map(\.name) }
        #expect(!indexes.contains("\(entriesTable)_by_stored_at"))
        try await sut.insert(itemB, for: "d", storedAt: later)
        #expect(try await sut.removeEntries(storedBefore: referenceDate.addingTimeInterval(1)) == 3)
        #expect(try await sut.count == 1)
        #expect(try await sut.retrieve("d") == CacheEntry(value: itemB, storedAt: later))
        #expect(try await sut.totalBytes == (try encodedSize(itemB)), "the totals the triggers keep follow the sweep")
    }

    private var later: Date { referenceDate.addingTimeInterval(60) }

    private func encodedSize(_ item: Item) throws -> Int { try JSONCodec<Item>().encode(item).count }
}
#endif
