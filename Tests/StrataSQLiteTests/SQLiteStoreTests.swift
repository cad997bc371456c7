#if SQLite
import Foundation
import GRDB
import Logging
@_spi(StrataInternals) import Strata
@testable import StrataSQLite
import StrataTesting
import Testing

@Suite("SQLiteStore")
struct SQLiteStoreTests {
    let directory: TemporaryDirectory
    let path: String

    init() throws {
        directory = try TemporaryDirectory(prefix: "strata-sqlite")
        path = directory.appending("cache.sqlite").path
    }

    func makeSUT(
        limits: SQLiteStore<Item>.Limits = .none, logger: Logger = quietLogger
    ) throws -> SQLiteStore<Item> {
        try SQLiteStore<Item>(path: path, limits: limits, logger: logger)
    }

    // MARK: - Opening

    @Test func open_createsMissingDirectoriesAndOwnerOnlyFiles() async throws {
        let nested = directory.appending("a/b/cache.sqlite").path
        let sut = try SQLiteStore<Item>(path: nested, logger: quietLogger)
        try await sut.insert(itemA, for: "feed", storedAt: referenceDate)

        let manager = FileManager.default
        let directoryMode = try manager.attributesOfItem(atPath: directory.appending("a/b").path)[.posixPermissions] as? NSNumber
        #expect(directoryMode?.intValue == 0o700)
        for file in [nested, nested + "-wal", nested + "-shm"] {
            let mode = try manager.attributesOfItem(atPath: file)[.posixPermissions] as? NSNumber
            #expect(mode?.intValue == 0o600, "\(file)")
        }
    }

    @Test func open_usesWALAndDescribesItselfByPath() async throws {
        let sut = try makeSUT()
        let journalMode = try await rawConnection(path).read { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") }
        #expect(journalMode == "wal")
        #expect(sut.description == "SQLiteStore(\(path))")
        #expect(sut.origin == .disk)
        #expect(sut.path == path)
    }

    @Test func open_resolvesURLsAndRelativeComponents() throws {
        let sut = try SQLiteStore<Item>(path: directory.url.appendingPathComponent("x/../cache.sqlite"), logger: quietLogger)
        #expect(sut.path == path)
    }

    @Test func open_migrationsAreIdempotentOnReopen() async throws {
        func schema() throws -> [String] {
            try rawConnection(path).read { db in
                try String.fetchAll(db, sql: "SELECT type || ' ' || name FROM sqlite_master ORDER BY type, name")
            }
        }
        do {
            let first = try makeSUT()
            try await first.insert(itemA, for: "feed", storedAt: referenceDate)
        }
        let schemaAfterFirstOpen = try schema()
        for _ in 0..<3 {
            let reopened = try makeSUT()
            #expect(try await reopened.retrieve("feed")?.value == itemA)
        }

        #expect(try schema() == schemaAfterFirstOpen)
        let applied = try await rawConnection(path).read { db in
            try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations ORDER BY identifier")
        }
        #expect(applied == ["strata.cache.v1", "strata.cache.v2", "strata.cache.v3", "strata.cache.v4"])
        #expect(try await makeSUT().count == 1)
    }

    @Test(arguments: 0..<8)
    func open_manyConnectionsCreatingOneNewFileAtOnceAllSucceed(_ round: Int) async throws {
        // Each store has connections of its own, which SQLite locks against each other exactly as it
        // locks separate processes: all race to create the file, set WAL and run the migration.
        let file = directory.appending("race-\(round).sqlite").path
        let openers = 6
        try await withThrowingTaskGroup(of: Void.self) { group in
            for opener in 0..<openers {
                group.addTask {
                    let store = try SQLiteStore<Item>(path: file, logger: quietLogger)
                    try await store.insert(Item(id: opener, name: "opener"), for: "key-\(opener)", storedAt: referenceDate)
                }
            }
            try await group.waitForAll()
        }

        let reader = try SQLiteStore<Item>(path: file, logger: quietLogger)
        #expect(try await reader.count == openers)
        let applied = try await rawConnection(file).read { db in try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations") }
        #expect(applied == ["strata.cache.v1", "strata.cache.v2", "strata.cache.v3", "strata.cache.v4"])
    }

    @Test func open_whenAnotherProcessSetsUpTheTablesFirstItUsesThem() async throws {
        // Another connection holds the write lock, so this store's migration sees no table yet and then
        // waits for the lock. While it waits, the other side lets go and a second store sets up the
        // tables. The waiting migration then finds them already there: that is not a conflict.
        let blocker = try rawConnection(path, allowsOpenTransactions: true)
        try blocker.inDatabase { db in
            _ = try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL")
            try db.execute(sql: "CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY)")
            try db.beginTransaction(.immediate)
        }
        let otherSetUp = Locked(false)
        let path = path
        let logs = LogCapture()

        let sut = try SQLiteStore<Item>(
            path: path, codec: JSONCodec(), limits: .none,
            busyMode: .callback { _ in
                otherSetUp.withLock { done in
                    guard !done else { return }
                    done = true
                    try? blocker.inDatabase { db in try db.rollback() }
                    _ = try? SQLiteStore<Item>(path: path, logger: quietLogger)
                }
                return true
            },
            logger: logs.logger)

        #expect(otherSetUp.withLock { $0 })
        #expect(logs.entries.contains { $0.message == "another connection set up the cache tables while this one was opening" })
        try await sut.insert(itemA, for: "feed", storedAt: referenceDate)
        #expect(try await sut.count == 1)
    }

    @Test func open_keepsTheTablesOfAnotherApplicationInTheSameFile() async throws {
        try await rawConnection(path).write { db in
            try db.execute(sql: "CREATE TABLE settings (name TEXT PRIMARY KEY, value TEXT); INSERT INTO settings VALUES ('theme', 'dark')")
        }
        let sut = try makeSUT()
        try await sut.insert(itemA, for: "feed", storedAt: referenceDate)

        #expect(try await sut.retrieve("feed")?.value == itemA)
        let theme = try await rawConnection(path).read { db in try String.fetchOne(db, sql: "SELECT value FROM settings") }
        #expect(theme == "dark")
    }

    enum DamagedFile: String, CaseIterable, Sendable {
        case randomBytes, sqliteHeaderThenGarbage, text, truncatedDatabase

        func bytes(validDatabase: Data) -> Data {
            switch self {
            case .randomBytes: pseudoRandomBytes(count: 8192, seed: 42)
            case .sqliteHeaderThenGarbage: Data("SQLite format 3\0".utf8) + pseudoRandomBytes(count: 8176, seed: 7)
            case .text: Data("{\"feed\": \"this is a JSON file, not a database\"}\n".utf8)
            case .truncatedDatabase: validDatabase.prefix(100) + pseudoRandomBytes(count: 4000, seed: 9)
            }
        }
    }

    @Test(arguments: DamagedFile.allCases)
    func open_onAFileThatIsNotADatabaseThrowsATypedOpenErrorAndLeavesTheFileAlone(_ damage: DamagedFile) throws {
        let validDatabase: Data = try {
            let scratch = directory.appending("valid.sqlite").path
            _ = try SQLiteStore<Item>(path: scratch, logger: quietLogger)
            return try Data(contentsOf: URL(fileURLWithPath: scratch))
        }()
        let bytes = damage.bytes(validDatabase: validDatabase)
        try bytes.write(to: URL(fileURLWithPath: path))

        let error = try #require(throws: StoreError.self) { try makeSUT() }

        #expect(error.operation == .open)
        #expect(error.store == "SQLiteStore(\(path))")
        #expect(error.key == nil)
        #expect(error.underlying != nil)
        #expect(!error.reason.isEmpty)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == bytes, "a failed open must not rewrite the file")
    }

    @Test func open_onADatabaseWithAConflictingTableThrowsATypedOpenError() throws {
        try rawConnection(path).write { db in
            try db.execute(sql: "CREATE TABLE \(entriesTable) (id INTEGER PRIMARY KEY, payload TEXT); INSERT INTO \(entriesTable) (payload) VALUES ('theirs')")
        }

        let error = try #require(throws: StoreError.self) { try makeSUT() }

        #expect(error.operation == .open)
        #expect(error.reason.contains(entriesTable), "\(error.reason)")
        let theirs = try rawConnection(path).read { db in try String.fetchOne(db, sql: "SELECT payload FROM \(entriesTable)") }
        #expect(theirs == "theirs", "the other application's data is untouched")
    }

    @Test func open_onADatabaseClaimingOurMigrationWithForeignColumnsThrowsATypedOpenError() throws {
        try rawConnection(path).write { db in
            try db.execute(sql: """
                CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
                INSERT INTO grdb_migrations VALUES ('strata.cache.v1');
                CREATE TABLE \(entriesTable) (key TEXT PRIMARY KEY, blob BLOB);
                """)
        }

        let error = try #require(throws: StoreError.self) { try makeSUT() }

        #expect(error.operation == .open)
        #expect(error.reason.contains("stored_at"), "names a missing column: \(error.reason)")
    }

    @Test func open_onAnUncreatableDirectoryThrowsATypedOpenError() throws {
        let blocker = directory.appending("file")
        try Data("not a directory".utf8).write(to: blocker)

        let error = try #require(throws: StoreError.self) {
            try SQLiteStore<Item>(path: blocker.appendingPathComponent("cache.sqlite"), logger: quietLogger)
        }
        #expect(error.operation == .open)
    }

    // MARK: - Entries

    @Test func roundTripsManyKeysValidatorsAndDates() async throws {
        let sut = try makeSUT()
        let keys = ["", "feed", "../../etc/passwd", "ключ 🔑", String(repeating: "k", count: 10_000), "a'; DROP TABLE x; --"]
        for (index, key) in keys.enumerated() {
            let entry = CacheEntry(
                value: Item(id: index, name: key), storedAt: referenceDate.addingTimeInterval(Double(index) + 0.123_456_789),
                validators: CacheValidators(etag: index.isMultiple(of: 2) ? "W/\"\(index)\"" : nil, lastModified: index == 1 ? "Thu, 01 Jan 2026 00:00:00 GMT" : nil))
            try await sut.insert(entry, for: key)
        }
        for (index, key) in keys.enumerated() {
            let entry = try #require(try await sut.retrieve(key))
            #expect(entry.value == Item(id: index, name: key))
            #expect(entry.storedAt == referenceDate.addingTimeInterval(Double(index) + 0.123_456_789))
            #expect(entry.validators.etag == (index.isMultiple(of: 2) ? "W/\"\(index)\"" : nil))
        }
        #expect(try await sut.count == keys.count)
    }

    @Test func customCodecStoresItsBytesVerbatimAndCountsThem() async throws {
        let sut = try SQLiteStore<Data>(path: path, codec: DataCodec(), logger: quietLogger)
        let payload = Data([0, 1, 2, 0xFF, 0])
        try await sut.insert(payload, for: "bytes", storedAt: referenceDate)

        #expect(try await sut.retrieve("bytes")?.value == payload)
        #expect(try await sut.totalBytes == 5)
        let stored = try await rawConnection(path).read { db in try Data.fetchOne(db, sql: "SELECT value FROM \(entriesTable)") }
        #expect(stored == payload)
    }

    enum RowDamage: String, CaseIterable, Sendable {
        case valueIsGarbage, valueIsText, valueIsTruncatedJSON, storedAtIsText, etagIsABlob

        var sql: String {
            switch self {
            case .valueIsGarbage: "UPDATE \(entriesTable) SET value = X'DEADBEEF' WHERE key = ?"
            case .valueIsText: "UPDATE \(entriesTable) SET value = '{\"id\":1,\"name\":\"a\"}' WHERE key = ?"
            case .valueIsTruncatedJSON: "UPDATE \(entriesTable) SET value = substr(value, 1, 5) WHERE key = ?"
            case .storedAtIsText: "UPDATE \(entriesTable) SET stored_at = 'yesterday' WHERE key = ?"
            case .etagIsABlob: "UPDATE \(entriesTable) SET etag = X'00' WHERE key = ?"
            }
        }
    }

    @Test(arguments: RowDamage.allCases)
    func retrieve_ofAnUndecodableRowIsAMissThatRemovesItAndWarns(_ damage: RowDamage) async throws {
        let logs = LogCapture()
        let sut = try makeSUT(logger: logs.logger)
        try await sut.insert(itemA, for: "feed", storedAt: referenceDate)
        try await sut.insert(itemB, for: "other", storedAt: referenceDate)
        try await rawConnection(path).write { db in try db.execute(sql: damage.sql, arguments: ["feed"]) }

        #expect(try await sut.retrieve("feed") == nil)

        #expect(try !isStored("feed", at: path))
        #expect(try await sut.retrieve("other")?.value == itemB)
        #expect(try await sut.count == 1)
        let warning = try #require(logs.entries.first { $0.level == .warning })
        #expect(warning.message == "removing corrupt cache entry")
        #expect(warning.metadata["key"] == "feed")
        #expect(warning.metadata["store"] == "\(sut.description)")
    }

    @Test func failedEncodeThrowsATypedInsertErrorAndKeepsThePreviousValue() async throws {
        let sut = try SQLiteStore<Item>(path: path, codec: PoisonableCodec(), logger: quietLogger)
        try await sut.insert(itemA, for: "feed", storedAt: referenceDate)

        let error = try await #require(throws: StoreError.self) {
            try await sut.insert(PoisonableCodec.poison, for: "feed", storedAt: referenceDate.addingTimeInterval(1))
        }

        #expect(error.operation == .insert)
        #expect(error.key == "feed")
        #expect(error.underlying is PoisonableCodec.Poisoned)
        #expect(try await sut.retrieve("feed") == CacheEntry(value: itemA, storedAt: referenceDate))
    }

    @Test func aWriteThatFailsLateInItsTransactionRollsBackAndKeepsThePreviousValue() async throws {
        let sut = try SQLiteStore<Data>(path: path, codec: DataCodec(), limits: .init(byteLimit: 30), logger: quietLogger)
        try await sut.insert(Data(repeating: 1, count: 10), for: "a", storedAt: referenceDate)
        try await sut.insert(Data(repeating: 2, count: 10), for: "b", storedAt: referenceDate)
        // Overwriting "b" with 25 bytes breaks the byte limit, so the same transaction then evicts
        // "a" — and the database refuses that delete: the overwrite must be undone with it.
        try await rawConnection(path).write { db in
            try db.execute(sql: "CREATE TRIGGER refuse_delete BEFORE DELETE ON \(entriesTable) BEGIN SELECT RAISE(ABORT, 'disk says no'); END")
        }

        let error = try await #require(throws: StoreError.self) {
            try await sut.insert(Data(repeating: 3, count: 25), for: "b", storedAt: referenceDate.addingTimeInterval(1))
        }

        #expect(error.operation == .insert)
        #expect(error.key == "b")
        #expect(error.store == sut.description)
        #expect(error.reason.contains("disk says no"), "\(error.reason)")
        #expect(try await sut.retrieve("b") == CacheEntry(value: Data(repeating: 2, count: 10), storedAt: referenceDate))
        #expect(try await sut.retrieve("a")?.value == Data(repeating: 1, count: 10))
        #expect(try await (sut.count, sut.totalBytes) == (2, 20))
    }

    @Test func aWriteBlockedByAnotherConnectionBeyondTheBusyTimeoutFailsTyped() async throws {
        let sut = try SQLiteStore<Item>(path: path, busyTimeout: .milliseconds(50), logger: quietLogger)
        try await sut.insert(itemA, for: "feed", storedAt: referenceDate)
        let other = try rawConnection(path, allowsOpenTransactions: true)
        try other.inDatabase { db in try db.beginTransaction(.immediate) }

        let error = try await #require(throws: StoreError.self) {
            try await sut.insert(itemB, for: "feed", storedAt: referenceDate)
        }
        try other.inDatabase { db in try db.rollback() }

        #expect(error.operation == .insert)
        #expect(error.reason.contains("locked"), "\(error.reason)")
        #expect(try await sut.retrieve("feed")?.value == itemA, "reads go on while another connection writes")
        try await sut.insert(itemB, for: "feed", storedAt: referenceDate)
        #expect(try await sut.retrieve("feed")?.value == itemB)
    }

    @Test func everyOperationFailsTypedWhileTheTableIsGoneAndNothingIsLost() async throws {
        let sut = try makeSUT(limits: .init(countLimit: 10))
        try await sut.insert(itemA, for: "feed", storedAt: referenceDate)

        try await withEntriesTableRenamedAway(at: path) {
            let retrieve = try await #require(throws: StoreError.self) { try await sut.retrieve("feed") }
            let insert = try await #require(throws: StoreError.self) { try await sut.insert(itemB, for: "feed", storedAt: referenceDate) }
            let delete = try await #require(throws: StoreError.self) { try await sut.delete("feed") }
            let sweep = try await #require(throws: StoreError.self) { try await sut.removeEntries(storedBefore: .distantFuture) }
            let removeAll = try await #require(throws: StoreError.self) { try await sut.removeAll() }

            #expect([retrieve, insert, delete, sweep, removeAll].map(\.operation) == [.retrieve, .insert, .delete, .delete, .delete])
            #expect([retrieve, insert, delete].map(\.key) == ["feed", "feed", "feed"])
            #expect(retrieve.reason.contains("no such table"), "\(retrieve.reason)")
            #expect(retrieve.store == sut.description)
        }

        #expect(try await sut.retrieve("feed") == CacheEntry(value: itemA, storedAt: referenceDate))
        #expect(try await sut.count == 1)
    }

    // MARK: - Maintenance

    @Test func removeEntriesStoredBeforeADateReturnsHowManyWentAndKeepsTheRest() async throws {
        let sut = try makeSUT()
        for (hour, key) in ["old", "older", "new", "edge"].enumerated() {
            try await sut.insert(Item(id: hour, name: key), for: key, storedAt: referenceDate.addingTimeInterval(Double(hour) * 3600))
        }
        // Stored at +0 h, +1 h, +2 h, +3 h; the cut-off +2 h is exclusive.
        let removed = try await sut.removeEntries(storedBefore: referenceDate.addingTimeInterval(2 * 3600))

        #expect(removed == 2)
        #expect(try await sut.retrieve("old") == nil)
        #expect(try await sut.retrieve("older") == nil)
        #expect(try await sut.retrieve("new")?.value.name == "new")
        #expect(try await sut.retrieve("edge")?.value.name == "edge")
        #expect(try await sut.count == 2)
        #expect(try await sut.removeEntries(storedBefore: referenceDate) == 0)
    }

    @Test func countAndTotalBytesFollowInsertsOverwritesAndDeletes() async throws {
        let sut = try SQLiteStore<Data>(path: path, codec: DataCodec(), logger: quietLogger)
        #expect(try await sut.count == 0)
        #expect(try await sut.totalBytes == 0)

        try await sut.insert(Data(count: 10), for: "a", storedAt: referenceDate)
        try await sut.insert(Data(count: 20), for: "b", storedAt: referenceDate)
        #expect(try await (sut.count, sut.totalBytes) == (2, 30))

        try await sut.insert(Data(count: 5), for: "a", storedAt: referenceDate)
        #expect(try await (sut.count, sut.totalBytes) == (2, 25))

        try await sut.delete("b")
        #expect(try await (sut.count, sut.totalBytes) == (1, 5))

        try await sut.removeAll()
        #expect(try await (sut.count, sut.totalBytes) == (0, 0))
        #expect(try await sut.retrieve("a") == nil)
    }

    // MARK: - Concurrency

    @Test func manyConcurrentReadersAndWritersLoseNothing() async throws {
        let sut = try makeSUT()
        let tasks = 200
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<tasks {
                group.addTask {
                    let key = "key-\(index)"
                    let item = Item(id: index, name: key)
                    try await sut.insert(item, for: key, storedAt: referenceDate)
                    let read = try await sut.retrieve(key)
                    if read?.value != item { throw ConcurrencyFailure(key: key, read: read?.value) }
                    // Overlapping traffic: everyone also reads and rewrites a shared key.
                    _ = try await sut.retrieve("shared")
                    try await sut.insert(item, for: "shared", storedAt: referenceDate)
                }
            }
            try await group.waitForAll()
        }

        #expect(try await sut.count == tasks + 1)
        for index in 0..<tasks {
            #expect(try await sut.retrieve("key-\(index)")?.value == Item(id: index, name: "key-\(index)"))
        }
        let shared = try #require(try await sut.retrieve("shared")?.value)
        #expect((0..<tasks).contains(shared.id) && shared.name == "key-\(shared.id)")
    }

    @Test func twoStoresOnOneFileWritingConcurrentlyLoseNothing() async throws {
        let first = try makeSUT()
        let second = try makeSUT()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<100 {
                let store = index.isMultiple(of: 2) ? first : second
                group.addTask { try await store.insert(Item(id: index, name: "n"), for: "key-\(index)", storedAt: referenceDate) }
            }
            try await group.waitForAll()
        }
        #expect(try await first.count == 100)
        for index in 0..<100 {
            let reader = index.isMultiple(of: 2) ? second : first
            #expect(try await reader.retrieve("key-\(index)")?.value.id == index)
        }
    }
}

struct ConcurrencyFailure: Error {
    var key: String
    var read: Item?
}
#endif
