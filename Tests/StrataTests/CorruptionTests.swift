import Foundation
import Logging
import Testing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

/// Foreign and damaged things in a store's place: each is a miss, removed when it is a file the store
/// owns, reported at `warning` with the store, the key and the reason; never a crash, and the store
/// keeps working.
@Suite("Corruption")
struct CorruptionTests {
    /// The store reported the entry of "feed" as corrupt, at warning, naming itself and a reason.
    static func expectCorruptEntryWarning(in logs: LogCapture, store: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let warning = try #require(logs.entries.first { $0.level == .warning }, sourceLocation: sourceLocation)
        #expect(warning.message == "removing corrupt cache entry", sourceLocation: sourceLocation)
        #expect(warning.metadata["store"] == "\(store)", sourceLocation: sourceLocation)
        #expect(warning.metadata["key"] == "feed", sourceLocation: sourceLocation)
        #expect(!"\(warning.metadata["reason"] ?? "")".isEmpty, sourceLocation: sourceLocation)
    }

    let directory: TemporaryDirectory

    init() throws {
        directory = try TemporaryDirectory(prefix: "strata-corruption")
    }

    /// Contents found where an entry file should be.
    enum ForeignFile: String, CaseIterable, Sendable {
        case png, otherJSON, sqliteDatabase, randomBytes, truncatedEntry, entryWithTrailingBytes, futureVersion, zeroLength
        case entryWhosePayloadIsAnotherShape

        func bytes(validEntry: Data) -> Data {
            switch self {
            case .png:
                Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 0x0D, 0x49, 0x48, 0x44, 0x52] + [UInt8](repeating: 0, count: 64))
            case .otherJSON:
                Data(#"{"users":[{"name":"ada","admin":true}],"version":3}"#.utf8)
            case .sqliteDatabase:
                Data("SQLite format 3\0".utf8) + Data([0x10, 0x00, 0x01, 0x01]) + Data(repeating: 0, count: 4076)
            case .randomBytes:
                {
                    var generator = SplitMix64(seed: 65_536)
                    return Data((0..<65_536).map { _ in UInt8(truncatingIfNeeded: generator.next()) })
                }()
            case .truncatedEntry:
                validEntry.prefix(validEntry.count / 2)
            case .entryWithTrailingBytes:
                validEntry + Data("tail".utf8)
            case .futureVersion:
                Data(validEntry.prefix(4)) + Data([99]) + validEntry.dropFirst(5)
            case .zeroLength:
                Data()
            case .entryWhosePayloadIsAnotherShape:
                EntryEnvelope.encode(key: "feed", storedAt: referenceDate, validators: .none, payload: Data(#"{"title":"not an item"}"#.utf8))
            }
        }
    }

    @Test(arguments: ForeignFile.allCases)
    func fileStore_aForeignFileIsAMissThatIsRemovedAndReportedAtWarning(_ foreign: ForeignFile) async throws {
        let logs = LogCapture()
        let store = FileStore<Item>(directory: directory.appending("cache"), logger: logs.logger)
        try await store.insert(itemA, for: "feed", storedAt: referenceDate)
        try await store.insert(itemB, for: "other", storedAt: referenceDate)
        let file = store.fileURL(for: "feed")
        try foreign.bytes(validEntry: try Data(contentsOf: file)).write(to: file)

        #expect(try await store.retrieve("feed") == nil)

        #expect(!FileManager.default.fileExists(atPath: file.path), "the foreign file is removed")
        try Self.expectCorruptEntryWarning(in: logs, store: store.description)
        // The store keeps working, for this key and the others.
        #expect(try await store.retrieve("other")?.value == itemB)
        try await store.insert(itemB, for: "feed", storedAt: referenceDate)
        #expect(try await store.retrieve("feed")?.value == itemB)
    }

    @Test(arguments: ForeignFile.allCases)
    func limitedFileStore_aForeignFileIsAMissThatIsRemovedAndTheIndexForgetsIt(_ foreign: ForeignFile) async throws {
        let logs = LogCapture()
        let store = FileStore<Item>(directory: directory.appending("cache"), countLimit: 2, logger: logs.logger)
        try await store.insert(itemA, for: "feed", storedAt: referenceDate)
        let file = store.fileURL(for: "feed")
        try foreign.bytes(validEntry: try Data(contentsOf: file)).write(to: file)

        #expect(try await store.retrieve("feed") == nil)
        #expect(logs.entries.contains { $0.level == .warning && $0.metadata["key"] == "feed" })
        // Two new entries fit the limit of two: the removed one no longer counts.
        try await store.insert(itemA, for: "a", storedAt: referenceDate)
        try await store.insert(itemB, for: "b", storedAt: referenceDate)
        #expect(try await store.retrieve("a")?.value == itemA)
        #expect(try await store.retrieve("b")?.value == itemB)
    }

    /// A directory where an entry file should be is not the store's to remove and cannot be read:
    /// retrieve fails with a typed error (as `FileStoreTests.unreadableEntry_throwsAStoreErrorNamingTheStoreAndKey`
    /// specifies), which a chain turns into its next tier; writing that key fails typed too; the
    /// directory is left alone and other keys are unaffected.
    @Test(arguments: [false, true])
    func fileStore_aDirectoryWhereAnEntryShouldBeFailsTypedAndTheChainFallsBack(nonEmpty: Bool) async throws {
        let store = FileStore<Item>(directory: directory.appending("cache"), logger: quietLogger)
        try await store.insert(itemB, for: "other", storedAt: referenceDate)
        let file = store.fileURL(for: "feed")
        try FileManager.default.createDirectory(at: file, withIntermediateDirectories: true)
        if nonEmpty { try Data("theirs".utf8).write(to: file.appendingPathComponent("theirs.txt")) }

        let readError = try await #require(throws: StoreError.self) { try await store.retrieve("feed") }
        #expect(readError.operation == .retrieve && readError.key == "feed" && readError.store == store.description)
        let served = try await store.loader(key: "feed").fallingBack(to: ClosureLoader<Void, Item> { itemA }).load()
        #expect(served == itemA)

        let writeError = try await #require(throws: StoreError.self) {
            try await store.insert(itemA, for: "feed", storedAt: referenceDate)
        }
        #expect(writeError.operation == .insert && writeError.key == "feed" && writeError.store == store.description)
        #expect(try await store.retrieve("other")?.value == itemB)
        var isDirectory: ObjCBool = false
        #expect(FileManager.default.fileExists(atPath: file.path, isDirectory: &isDirectory) && isDirectory.boolValue)
        if nonEmpty { #expect(FileManager.default.fileExists(atPath: file.appendingPathComponent("theirs.txt").path)) }
    }

    /// A file where the store's directory should be: reads are misses, writes fail with a typed error,
    /// and the file is left alone.
    @Test func fileStore_aFileWhereTheDirectoryShouldBeIsAMissAndWritesFailTyped() async throws {
        let location = directory.appending("cache")
        try Data("not a directory".utf8).write(to: location)
        let store = FileStore<Item>(directory: location, logger: quietLogger)

        #expect(try await store.retrieve("feed") == nil)
        let error = try await #require(throws: StoreError.self) {
            try await store.insert(itemA, for: "feed", storedAt: referenceDate)
        }
        #expect(error.operation == .insert)
        #expect(error.store == store.description)
        #expect(try Data(contentsOf: location) == Data("not a directory".utf8))
    }

    // MARK: UserDefaultsStore

    enum ForeignDefault: String, CaseIterable, Sendable {
        case garbageData, string, number, dictionary, array, truncatedEntry, payloadOfAnotherShape

        func value(validEntry: Data) -> Any {
            switch self {
            case .garbageData: Data([0xDE, 0xAD, 0xBE, 0xEF])
            case .string: "a string the app wrote"
            case .number: 42
            case .dictionary: ["feed": "not an entry"]
            case .array: [1, 2, 3]
            case .truncatedEntry: validEntry.prefix(validEntry.count - 3)
            case .payloadOfAnotherShape:
                EntryEnvelope.encode(key: "feed", storedAt: referenceDate, validators: .none, payload: Data("[1,2]".utf8))
            }
        }
    }

    @Test(arguments: ForeignDefault.allCases)
    func userDefaultsStore_aForeignValueIsAMissThatIsRemovedAndReportedAtWarning(_ foreign: ForeignDefault) async throws {
        try await UserDefaultsSuite.withScope {
            let logs = LogCapture()
            let store = UserDefaultsStore<Item>(suiteName: UserDefaultsSuite.scoped(), logger: logs.logger)
            let defaults = try #require(UserDefaults(suiteName: store.suiteName))
            try await store.insert(itemA, for: "feed", storedAt: referenceDate)
            try await store.insert(itemB, for: "other", storedAt: referenceDate)
            let valid = try #require(defaults.data(forKey: "strata.feed"))
            defaults.set(foreign.value(validEntry: valid), forKey: "strata.feed")

            #expect(try await store.retrieve("feed") == nil)

            #expect(defaults.object(forKey: "strata.feed") == nil, "the foreign value is removed")
            try Self.expectCorruptEntryWarning(in: logs, store: store.description)
            #expect(try await store.retrieve("other")?.value == itemB)
            try await store.insert(itemB, for: "feed", storedAt: referenceDate)
            #expect(try await store.retrieve("feed")?.value == itemB)
        }
    }

    /// Another key's entry under ours (copied defaults) is not ours to delete: a miss, kept, not reported.
    @Test func userDefaultsStore_anotherKeysEntryIsAMissAndIsKept() async throws {
        try await UserDefaultsSuite.withScope {
            let logs = LogCapture()
            let store = UserDefaultsStore<Item>(suiteName: UserDefaultsSuite.scoped(), logger: logs.logger)
            let defaults = try #require(UserDefaults(suiteName: store.suiteName))
            try await store.insert(itemA, for: "other", storedAt: referenceDate)
            defaults.set(defaults.data(forKey: "strata.other"), forKey: "strata.feed")

            #expect(try await store.retrieve("feed") == nil)
            #expect(defaults.object(forKey: "strata.feed") != nil)
            #expect(logs.entries.isEmpty)
        }
    }
}
