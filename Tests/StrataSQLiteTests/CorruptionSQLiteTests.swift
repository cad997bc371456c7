#if SQLite
import Foundation
import Logging
@_spi(StrataInternals) import Strata
import StrataSQLite
import StrataTesting
import Testing

/// Foreign things where the database belongs, and a database damaged while the store has it open:
/// typed errors a fallback turns into the next tier, never a crash. (Damaged files at open and damaged
/// rows are in `SQLiteStoreTests`.)
@Suite("Corruption: SQLiteStore")
struct CorruptionSQLiteTests {
    let directory: TemporaryDirectory
    let path: String

    init() throws {
        directory = try TemporaryDirectory(prefix: "strata-sqlite-corruption")
        path = directory.appending("cache.sqlite").path
    }

    /// A zero-length file is what SQLite calls an empty database: the store opens it and works.
    @Test func aZeroLengthFileOpensAsAnEmptyStore() async throws {
        #expect(FileManager.default.createFile(atPath: path, contents: Data()))
        let store = try SQLiteStore<Item>(path: path, logger: quietLogger)
        #expect(try await store.retrieve("feed") == nil)
        try await store.insert(itemA, for: "feed", storedAt: referenceDate)
        #expect(try await store.retrieve("feed")?.value == itemA)
    }

    @Test func aDirectoryWhereTheDatabaseShouldBeIsATypedOpenError() throws {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        let error = try #require(throws: StoreError.self) { try SQLiteStore<Item>(path: path, logger: quietLogger) }
        #expect(error.operation == .open)
        #expect(error.store == "SQLiteStore(\(path))")
        #expect(!error.reason.isEmpty)
    }

    /// The database file is overwritten with garbage while the store has it open (another program, a
    /// bad disk): reads fail with a typed error, and the chain's next tier serves.
    @Test func aDatabaseDamagedWhileOpenFailsReadsTypedAndTheFallbackServes() async throws {
        let store = try SQLiteStore<Item>(path: path, logger: quietLogger)
        try await store.insert(itemA, for: "feed", storedAt: referenceDate)
        let size = try FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.write(contentsOf: pseudoRandomBytes(count: max(size?.intValue ?? 0, 8192), seed: 11))
        try handle.close()
        for suffix in ["-wal", "-shm"] {
            if let wal = FileHandle(forWritingAtPath: path + suffix) {
                try wal.write(contentsOf: pseudoRandomBytes(count: 32_768, seed: 12))
                try wal.close()
            }
        }

        let remote = ClosureLoader<Void, Item> { itemB }
        let chain = store.loader(key: "feed").fallingBack(to: remote)
        let served = try await chain.load()
        #expect(served == itemB)

        do {
            let read = try await store.retrieve("feed")
            // SQLite may still answer from pages it holds; what it answers must be whole.
            #expect(read == nil || read?.value == itemA)
        } catch let error as StoreError {
            #expect(error.operation == .retrieve)
            #expect(error.key == "feed")
            #expect(error.store == store.description)
        }
    }
}
#endif
