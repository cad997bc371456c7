import Foundation
import Testing
@testable @_spi(StrataInternals) import Strata
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

    /// Temporary files a crash left behind, as a killed writer leaves them: one old, one young (a
    /// write that may still be in progress elsewhere), a symbolic link, and a file that is not ours.
    func plantLeftovers(in directory: URL) throws {
        let old = Date(timeIntervalSinceNow: -2 * 3600)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        for name in [".tmp-old", ".tmp-young", "notes.txt"] {
            try Data(repeating: 7, count: 64).write(to: directory.appendingPathComponent(name))
        }
        let outside = self.directory.appending("outside")
        try Data("keep".utf8).write(to: outside)
        let link = directory.appendingPathComponent(".tmp-link")
        try? FileManager.default.removeItem(at: link)
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: outside)
        for name in [".tmp-old", "notes.txt", "outside"] {
            let path = name == "outside" ? outside.path : directory.appendingPathComponent(name).path
            try FileManager.default.setAttributes([.modificationDate: old], ofItemAtPath: path)
        }
    }

    @Test func firstWrite_sweepsTemporaryFilesOlderThanAnHour_once() async throws {
        let logs = LogCapture(level: .notice)
        let sut = makeSUT(logger: logs.logger)
        try plantLeftovers(in: sut.directory)

        _ = try await sut.retrieve("feed")
        #expect(filesInStore(sut).contains(".tmp-old"), "a read sweeps nothing")
        try await sut.insert(itemA, for: "feed", storedAt: referenceDate)
        #expect(filesInStore(sut) == [".tmp-link", ".tmp-young", sut.fileURL(for: "feed").lastPathComponent, "notes.txt"].sorted())
        #expect(FileManager.default.fileExists(atPath: directory.appending("outside").path))
        #expect(logs.entries.map(\.message) == ["removed temporary files left by interrupted writes"])
        #expect(logs.entries.first?.metadata["count"] == "1")

        // Once per store: later writes do not list the directory again.
        try plantLeftovers(in: sut.directory)
        try await sut.insert(itemB, for: "feed", storedAt: referenceDate)
        try await sut.delete("feed")
        #expect(filesInStore(sut).contains(".tmp-old"))
        #expect(sut.ioCounts.withLock { ($0.directoryScans, $0.temporaryFilesSwept) } == (1, 1))

        // The next store on the directory (the next launch) sweeps on its first write.
        let next = makeSUT()
        try await next.insert(itemA, for: "other", storedAt: referenceDate)
        #expect(!filesInStore(next).contains(".tmp-old"))
    }

    @Test func removeTemporaryFiles_removesThoseOlderThanTheAgeGiven() async throws {
        let sut = makeSUT()
        #expect(try await sut.removeTemporaryFiles() == 0, "no directory yet: nothing to sweep")
        try plantLeftovers(in: sut.directory)
        try await sut.insert(itemA, for: "feed", storedAt: referenceDate)  // sweeps .tmp-old

        try plantLeftovers(in: sut.directory)
        #expect(try await sut.removeTemporaryFiles(olderThan: .seconds(3 * 3600)) == 0)
        #expect(try await sut.removeTemporaryFiles() == 1)
        #expect(try await sut.removeTemporaryFiles(olderThan: .zero) == 1)
        #expect(filesInStore(sut) == [".tmp-link", sut.fileURL(for: "feed").lastPathComponent, "notes.txt"].sorted())
        #expect(try await sut.retrieve("feed")?.value == itemA)
    }

    @Test func removeTemporaryFiles_onAnUnlistableDirectory_throwsAStoreError() async throws {
        let sut = makeSUT()
        // A self-looping symbolic link where the directory should be fails even for root.
        try FileManager.default.createSymbolicLink(atPath: sut.directory.path, withDestinationPath: sut.directory.lastPathComponent)
        let error = await #expect(throws: StoreError.self) { try await sut.removeTemporaryFiles() }
        #expect(error?.operation == .delete)
        #expect(error?.key == nil)
        #expect(error?.reason.hasPrefix("cannot sweep temporary files") == true)
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
