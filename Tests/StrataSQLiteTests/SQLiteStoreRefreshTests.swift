#if SQLite
import Foundation
import GRDB
import Logging
@_spi(StrataInternals) import Strata
@testable import StrataSQLite
import StrataTesting
import Testing

/// `max_age` (migration `strata.cache.v2`) and `refresh` as one `UPDATE`.
@Suite("SQLiteStore maxAge and refresh")
struct SQLiteStoreRefreshTests {
    let directory: TemporaryDirectory
    let path: String

    init() throws {
        directory = try TemporaryDirectory(prefix: "strata-sqlite")
        path = directory.appending("cache.sqlite").path
    }

    let revalidated = CacheValidators(etag: "\"v2\"", lastModified: "Thu, 22 Oct 2015 08:00:00 GMT", maxAge: .milliseconds(2_500))
    let later = referenceDate.addingTimeInterval(3_600.5)

    func column<T: DatabaseValueConvertible>(_ name: String, of key: String, as type: T.Type = T.self) throws -> T? {
        try rawConnection(path).read { db in
            try T.fetchOne(db, sql: "SELECT \(name) FROM \(entriesTable) WHERE key = ?", arguments: [key])
        }
    }

    // MARK: - Migration v2

    /// The schema exactly as version 1 of the store wrote it, with one row, as a file from an older
    /// release would be found on disk.
    func writeVersion1Database() throws {
        try rawConnection(path).write { db in
            try db.execute(sql: """
                CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
                INSERT INTO grdb_migrations VALUES ('strata.cache.v1');
                CREATE TABLE strata_cache_entries (
                    key TEXT NOT NULL PRIMARY KEY, value BLOB NOT NULL, stored_at REAL NOT NULL,
                    etag TEXT, last_modified TEXT, last_access INTEGER NOT NULL, size INTEGER NOT NULL);
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
            let payload = try JSONEncoder().encode(itemA)
            try db.execute(
                sql: "INSERT INTO strata_cache_entries VALUES ('feed', ?, ?, '\"v1\"', NULL, 1, ?)",
                arguments: [payload, referenceDate.timeIntervalSinceReferenceDate, payload.count])
        }
    }

    @Test func aVersion1Database_isUpgradedInPlace_andItsRowsReadWithoutMaxAge() async throws {
        try writeVersion1Database()

        let sut = try SQLiteStore<Item>(path: path, logger: quietLogger)

        #expect(try await sut.retrieve("feed") == CacheEntry(value: itemA, storedAt: referenceDate, validators: CacheValidators(etag: "\"v1\"")))
        let applied = try await rawConnection(path).read { db in
            try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations ORDER BY identifier")
        }
        #expect(applied == ["strata.cache.v1", "strata.cache.v2", "strata.cache.v3", "strata.cache.v4"])
        try await sut.insert(itemB, for: "posts", storedAt: later, validators: revalidated)
        #expect(try await sut.retrieve("posts") == CacheEntry(value: itemB, storedAt: later, validators: revalidated))
        #expect(try await sut.count == 2, "the v1 totals triggers still count")
        #expect(try await sut.refresh("feed", storedAt: later, validators: revalidated))
        #expect(try await sut.retrieve("feed") == CacheEntry(value: itemA, storedAt: later, validators: revalidated))
        // Opening again finds nothing to migrate.
        #expect(try await SQLiteStore<Item>(path: path, logger: quietLogger).retrieve("posts")?.validators == revalidated)
    }

    @Test func maxAge_isStoredAsRealSeconds_andNilAsNull() async throws {
        let sut = try SQLiteStore<Item>(path: path, logger: quietLogger)
        try await sut.insert(itemA, for: "timed", storedAt: referenceDate, validators: revalidated)
        try await sut.insert(itemA, for: "untimed", storedAt: referenceDate)

        #expect(try column("max_age", of: "timed", as: Double.self) == 2.5)
        #expect(try column("typeof(max_age)", of: "timed", as: String.self) == "real")
        #expect(try column("typeof(max_age)", of: "untimed", as: String.self) == "null")
    }

    @Test(arguments: ["'soon'", "-1.0", "X'00'"])
    func anUnreadableMaxAge_isACorruptEntry_aMissThatIsRemoved(_ literal: String) async throws {
        let sut = try SQLiteStore<Item>(path: path, logger: quietLogger)
        try await sut.insert(itemA, for: "feed", storedAt: referenceDate, validators: revalidated)
        try await rawConnection(path).write { db in
            try db.execute(sql: "UPDATE \(entriesTable) SET max_age = \(literal) WHERE key = 'feed'")
        }

        #expect(try await sut.retrieve("feed") == nil)
        #expect(try !isStored("feed", at: path))
    }

    @Test func anIntegerMaxAge_writtenByAnotherTool_readsAsWholeSeconds() async throws {
        let sut = try SQLiteStore<Item>(path: path, logger: quietLogger)
        try await sut.insert(itemA, for: "feed", storedAt: referenceDate)
        try await rawConnection(path).write { db in
            try db.execute(sql: "UPDATE \(entriesTable) SET max_age = 600 WHERE key = 'feed'")
        }
        #expect(try await sut.retrieve("feed")?.validators.maxAge == .seconds(600))
    }

    // MARK: - Refresh

    @Test func refresh_updatesTheMetadataInPlace_withoutTouchingTheValueOrTheCodec() async throws {
        let codec = CountingCodec()
        let sut = try SQLiteStore<Item>(path: path, codec: codec, logger: quietLogger)
        try await sut.insert(itemA, for: "feed", storedAt: referenceDate, validators: CacheValidators(etag: "\"v1\""))
        let valueBefore = try column("value", of: "feed", as: Data.self)

        #expect(try await sut.refresh("feed", storedAt: later, validators: revalidated))

        #expect(codec.counts == .init(encodes: 1, decodes: 0), "a refresh must not decode or encode the value")
        #expect(try column("value", of: "feed", as: Data.self) == valueBefore)
        #expect(try column("stored_at", of: "feed", as: Double.self) == later.timeIntervalSinceReferenceDate)
        #expect(try await sut.count == 1)
        #expect(try await sut.retrieve("feed") == CacheEntry(value: itemA, storedAt: later, validators: revalidated))
    }

    @Test func refresh_ofAMissingKey_isFalse_andInsertsNoRow() async throws {
        let sut = try SQLiteStore<Item>(path: path, logger: quietLogger)
        try await sut.insert(itemA, for: "other", storedAt: referenceDate)

        #expect(try await sut.refresh("feed", storedAt: later, validators: revalidated) == false)
        #expect(try !isStored("feed", at: path))
        #expect(try await sut.count == 1)
    }

    @Test(arguments: [SQLiteStoreLimits.none, .init(countLimit: 10)])
    func refresh_makesTheEntryTheMostRecentlyUsed(_ limits: SQLiteStoreLimits) async throws {
        let sut = try SQLiteStore<Item>(path: path, limits: limits, logger: quietLogger)
        for key in ["k1", "k2", "k3"] { try await sut.insert(itemA, for: key, storedAt: referenceDate) }

        #expect(try await sut.refresh("k1", storedAt: later, validators: revalidated))

        #expect(try keysByAccess(at: path) == ["k2", "k3", "k1"])
    }

    @Test func refresh_countsAsAUse_forEviction() async throws {
        let sut = try SQLiteStore<Item>(path: path, limits: .init(countLimit: 2), logger: quietLogger)
        try await sut.insert(itemA, for: "k1", storedAt: referenceDate)
        try await sut.insert(itemB, for: "k2", storedAt: referenceDate)
        #expect(try await sut.refresh("k1", storedAt: later, validators: revalidated))

        try await sut.insert(itemA, for: "k3", storedAt: referenceDate)

        #expect(try await sut.retrieve("k2") == nil, "k2 was the least recently used once k1 was refreshed")
        #expect(try await sut.retrieve("k1") == CacheEntry(value: itemA, storedAt: later, validators: revalidated))
    }

    @Test func failedRefresh_throwsAStoreErrorForRefresh_andKeepsTheEntry() async throws {
        let sut = try SQLiteStore<Item>(path: path, logger: quietLogger)
        try await sut.insert(itemA, for: "feed", storedAt: referenceDate)

        try await withEntriesTableRenamedAway(at: path) {
            await #expect {
                _ = try await sut.refresh("feed", storedAt: later, validators: revalidated)
            } throws: { error in
                guard let error = error as? StoreError else { return false }
                return error.operation == .refresh && error.key == "feed" && error.store == sut.description
            }
        }
        #expect(try await sut.retrieve("feed") == CacheEntry(value: itemA, storedAt: referenceDate))
    }

    @Test func refresh_withANonFiniteDate_throws_andKeepsTheEntry() async throws {
        let sut = try SQLiteStore<Item>(path: path, logger: quietLogger)
        try await sut.insert(itemA, for: "feed", storedAt: referenceDate)

        let error = try await #require(throws: StoreError.self) {
            try await sut.refresh("feed", storedAt: Date(timeIntervalSinceReferenceDate: .nan), validators: revalidated)
        }
        #expect(error.operation == .refresh)
        #expect(try await sut.retrieve("feed") == CacheEntry(value: itemA, storedAt: referenceDate))
    }
}

/// JSON, counting every encode and decode.
struct CountingCodec: Codec {
    struct Counts: Sendable, Equatable {
        var encodes = 0
        var decodes = 0
    }

    private let state = Locked(Counts())

    var counts: Counts { state.withLock { $0 } }

    func encode(_ value: Item) throws -> Data {
        state.withLock { $0.encodes += 1 }
        return try JSONEncoder().encode(value)
    }

    func decode(_ data: Data) throws -> Item {
        state.withLock { $0.decodes += 1 }
        return try JSONDecoder().decode(Item.self, from: data)
    }
}
#endif
