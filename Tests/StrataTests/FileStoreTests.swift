import Foundation
import Testing
@testable import Strata
import StrataTesting

@Suite("FileStore")
struct FileStoreTests {
    let directory: TemporaryDirectory

    init() throws {
        directory = try TemporaryDirectory()
    }

    func makeSUT(
        _ subdirectory: String = "cache", codec: (any Codec<Item>)? = nil, logger: Logger = quietLogger
    ) -> FileStore<Item> {
        let url = directory.appending(subdirectory)
        if let codec { return FileStore(directory: url, codec: codec, logger: logger) }
        return FileStore(directory: url, logger: logger)
    }

    func filesInStore(_ sut: FileStore<Item>) -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: sut.directory.path))?.sorted() ?? []
    }

    @Test func insert_createsMissingDirectoriesWithOwnerOnlyPermissions() async throws {
        let sut = makeSUT("nested/deeper/cache")
        #expect(!FileManager.default.fileExists(atPath: sut.directory.path))

        try await sut.insert(itemA, for: "feed", storedAt: referenceDate)

        let attributes = try FileManager.default.attributesOfItem(atPath: sut.directory.path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o700)
        #expect(try await sut.retrieve("feed")?.value == itemA)
    }

    @Test func insert_writesEntryFilesWithMode0600() async throws {
        let sut = makeSUT()
        try await sut.insert(itemA, for: "feed", storedAt: referenceDate)
        let attributes = try FileManager.default.attributesOfItem(atPath: sut.fileURL(for: "feed").path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
    }

    @Test func retrieve_onMissingDirectoryDeliversEmptyWithoutCreatingIt() async throws {
        let sut = makeSUT("never-written")
        #expect(try await sut.retrieve("feed") == nil)
        #expect(!FileManager.default.fileExists(atPath: sut.directory.path))
    }

    @Test(arguments: ["../../etc/passwd", "/absolute/path", "a/b/c", "", String(repeating: "k", count: 300), "ключ 🔑", "CON", ".."])
    func keys_mapToFixedLengthNamesInsideTheDirectory(key: String) async throws {
        let sut = makeSUT()
        try await sut.insert(itemA, for: key, storedAt: referenceDate)

        let file = sut.fileURL(for: key)
        #expect(file.deletingLastPathComponent().standardizedFileURL.path.trimmingSuffix("/") == sut.directory.path.trimmingSuffix("/"))
        #expect(file.lastPathComponent.count == 64)
        #expect(filesInStore(sut) == [file.lastPathComponent])
        #expect(try await sut.retrieve(key)?.value == itemA)
    }

    @Test func insert_leavesNoTemporaryFilesBehind() async throws {
        let sut = makeSUT()
        for round in 0..<20 {
            try await sut.insert(Item(id: round, name: "v\(round)"), for: "feed", storedAt: referenceDate)
        }
        #expect(filesInStore(sut) == [sut.fileURL(for: "feed").lastPathComponent])
    }

    @Test func failedInsert_keepsThePreviousEntryAndThrowsAStoreError() async throws {
        let sut = makeSUT(codec: RejectingCodec(rejectedID: 666))
        try await sut.insert(itemA, for: "feed", storedAt: referenceDate)

        await #expect {
            try await sut.insert(Item(id: 666, name: "poison"), for: "feed", storedAt: referenceDate)
        } throws: { error in
            guard let error = error as? StoreError else { return false }
            return error.operation == .insert && error.key == "feed" && error.description.contains("does not encode")
        }
        #expect(try await sut.retrieve("feed")?.value == itemA)
        #expect(filesInStore(sut).count == 1)
    }

    @Test func failedRename_keepsNoTemporaryFileAndThrowsAStoreError() async throws {
        let sut = makeSUT()
        // A non-empty directory where the entry file should be makes rename(2) fail.
        let blocker = sut.fileURL(for: "feed")
        try FileManager.default.createDirectory(at: blocker.appendingPathComponent("child"), withIntermediateDirectories: true)

        await #expect(throws: StoreError.self) {
            try await sut.insert(itemA, for: "feed", storedAt: referenceDate)
        }
        #expect(filesInStore(sut) == [blocker.lastPathComponent])
    }

    @Test(arguments: [
        Data(), Data("{\"id\":1}".utf8), Data([0x53, 0x54, 0x52, 0x41]), Data(repeating: 0xFF, count: 4096),
    ])
    func corruptFiles_areMissesAndAreRemovedWithAWarning(bytes: Data) async throws {
        let logs = LogCapture()
        let sut = makeSUT(logger: logs.logger)
        try await sut.insert(itemA, for: "feed", storedAt: referenceDate)
        try bytes.write(to: sut.fileURL(for: "feed"))

        #expect(try await sut.retrieve("feed") == nil)
        #expect(!FileManager.default.fileExists(atPath: sut.fileURL(for: "feed").path))
        #expect(logs.entries.contains { $0.level == .warning && $0.message.contains("corrupt") && $0.metadata["key"] == "feed" })
    }

    @Test func everyTruncationOfAValidEntry_isAMiss() async throws {
        let sut = makeSUT()
        try await sut.insert(itemA, for: "feed", storedAt: referenceDate)
        let valid = try Data(contentsOf: sut.fileURL(for: "feed"))
        for length in 0..<valid.count {
            try valid.prefix(length).write(to: sut.fileURL(for: "feed"))
            #expect(try await sut.retrieve("feed") == nil, "truncated to \(length) of \(valid.count) bytes")
        }
    }

    @Test func payloadThatNoLongerDecodes_isAMissAndIsRemoved() async throws {
        let writer = FileStore<String>(directory: directory.appending("cache"), logger: quietLogger)
        try await writer.insert("not an item", for: "feed", storedAt: referenceDate)
        let sut = makeSUT()

        #expect(try await sut.retrieve("feed") == nil)
        #expect(!FileManager.default.fileExists(atPath: sut.fileURL(for: "feed").path))
    }

    @Test func anotherKeysEntryUnderOurFileName_isAMissButIsNotDeleted() async throws {
        let sut = makeSUT()
        try await sut.insert(itemA, for: "other", storedAt: referenceDate)
        try FileManager.default.copyItem(at: sut.fileURL(for: "other"), to: sut.fileURL(for: "feed"))

        #expect(try await sut.retrieve("feed") == nil)
        #expect(FileManager.default.fileExists(atPath: sut.fileURL(for: "feed").path))
    }

    @Test func unreadableEntry_throwsAStoreErrorNamingTheStoreAndKey() async throws {
        let sut = makeSUT()
        // A directory in place of the entry file cannot be read as a file.
        try FileManager.default.createDirectory(at: sut.fileURL(for: "feed"), withIntermediateDirectories: true)

        await #expect {
            _ = try await sut.retrieve("feed")
        } throws: { error in
            guard let error = error as? StoreError else { return false }
            return error.operation == .retrieve && error.key == "feed" && error.store == sut.description
        }
    }

    @Test func dataCodec_storesBytesUnchanged() async throws {
        let sut = FileStore<Data>(directory: directory.url, codec: DataCodec())
        let bytes = Data((0...255).map(UInt8.init))
        try await sut.insert(bytes, for: "raw", storedAt: referenceDate)
        #expect(try await sut.retrieve("raw")?.value == bytes)
    }

    @Test func storeObjects_areReleasedAfterUse() async throws {
        try await withLeakTracking { leaks in
            let sut = leaks.track(makeSUT())
            try await sut.insert(itemA, for: "feed", storedAt: referenceDate)
            _ = try await sut.retrieve("feed")
            try await sut.delete("feed")
        }
    }
}

/// Encodes as JSON but refuses one id, to make a write fail after a good one.
struct RejectingCodec: Codec {
    struct Rejected: Error {}
    let rejectedID: Int
    func encode(_ value: Item) throws -> Data {
        if value.id == rejectedID { throw Rejected() }
        return try JSONCodec<Item>().encode(value)
    }
    func decode(_ data: Data) throws -> Item { try JSONCodec<Item>().decode(data) }
}

import Logging

extension String {
    func trimmingSuffix(_ suffix: String) -> String {
        hasSuffix(suffix) ? String(dropLast(suffix.count)) : self
    }
}
