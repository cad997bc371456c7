import Foundation
import Testing
@testable @_spi(StrataInternals) import Strata
@testable import StrataOutbox
import StrataTesting

/// Every outbox storage runs the same contract, unchanged.
@Suite("Outbox storage contract")
struct OutboxStorageContractTests {
    static let memory = OutboxStorageContract { MemoryOutboxStorage() }

    @Test("MemoryOutboxStorage", arguments: memory.applicableCases)
    func memoryStorage(_ behaviour: OutboxStorageContractCase) async throws {
        try await Self.memory.verify(behaviour)
    }

    static func fileName(_ id: UUID) -> String { "\(id.uuidString.lowercased()).\(FileOutboxStorage.fileExtension)" }

    /// Real files in a directory of each case's own.
    static let file = OutboxStorageContract<FileOutboxStorage>(
        reopen: { storage in FileOutboxStorage(directory: storage.directory, logger: quietLogger) },
        corruption: .init(
            corrupt: { storage, id in
                try Data("garbage".utf8).write(to: storage.directory.appendingPathComponent(fileName(id)))
            },
            isSetAside: { storage, id in
                let aside = storage.directory.appendingPathComponent(fileName(id) + ".unreadable")
                return (try? Data(contentsOf: aside)) == Data("garbage".utf8)
            })
    ) {
        FileOutboxStorage(directory: try TemporaryDirectory.scoped(), logger: quietLogger)
    }

    @Test("FileOutboxStorage", arguments: file.applicableCases)
    func fileStorage(_ behaviour: OutboxStorageContractCase) async throws {
        try await TemporaryDirectory.withScope {
            try await Self.file.verify(behaviour)
        }
    }

    @Test("FileOutboxStorage.entry(_:) reads its one file: a damaged file of another entry stays where it is until read itself")
    func fileEntryReadsOneFile() async throws {
        let directory = try TemporaryDirectory(prefix: "strata-file-outbox")
        let logs = LogCapture()
        let storage = FileOutboxStorage(directory: directory.url, logger: logs.logger)
        let (intact, damaged) = (
            OutboxEntry(id: UUID(), sequence: 0, scope: "s", kind: "note", payload: Data("0".utf8), createdAt: Date(timeIntervalSince1970: 1_767_225_600)),
            OutboxEntry(id: UUID(), sequence: 1, scope: "s", kind: "note", payload: Data("1".utf8), createdAt: Date(timeIntervalSince1970: 1_767_225_600)))
        try await storage.save(intact)
        try await storage.save(damaged)
        let damagedFile = directory.url.appendingPathComponent(Self.fileName(damaged.id))
        try Data("garbage".utf8).write(to: damagedFile)

        #expect(try await storage.entry(intact.id) == intact)
        // Before, entry(_:) read every file (through loadAll) and set this one aside on the way.
        #expect(try Data(contentsOf: damagedFile) == Data("garbage".utf8))
        #expect(logs.entries.isEmpty)

        #expect(try await storage.entry(damaged.id) == nil)
        #expect(!FileManager.default.fileExists(atPath: damagedFile.path))
        #expect(try Data(contentsOf: damagedFile.appendingPathExtension("unreadable")) == Data("garbage".utf8))
        #expect(logs.entries.filter { $0.level == .error }.map(\.message) == ["outbox entry unreadable; set aside, not deleted"])
        #expect(try await storage.loadAll() == [intact])
    }

    @Test("FileOutboxStorage keeps a drain's attempt in a file of its own; a lost, torn or stale one reads as the entry's own version, a save or removal takes it away")
    func fileAttemptsLiveBesideTheEntry() async throws {
        let (directory, logs, storage) = try Self.attemptFixture()
        let entry = OutboxEntry(
            id: UUID(), sequence: 0, scope: "s", kind: "note", payload: Data("0".utf8), createdAt: Date(timeIntervalSince1970: 1_767_225_600))
        let (entryFile, attemptFile) = Self.files(of: entry.id, in: directory)
        try await storage.save(entry)
        let saved = try Data(contentsOf: entryFile)
        var attempted = entry
        attempted.attempts = 2
        try await storage.saveAttempt(attempted)
        #expect(try Data(contentsOf: entryFile) == saved, "the entry's own file is left as its flushed save wrote it")
        let attemptBytes = try Data(contentsOf: attemptFile)
        #expect(try await storage.entry(entry.id) == attempted)
        #expect(try await FileOutboxStorage(directory: directory.url, logger: logs.logger).loadAll() == [attempted], "read by another instance")

        // What a power failure can leave of a file renamed without a flush: nothing, or torn bytes.
        for leftover in [Data(), attemptBytes.prefix(30), attemptBytes.dropLast(5)] {
            try leftover.write(to: attemptFile)
            let reopened = FileOutboxStorage(directory: directory.url, logger: logs.logger)
            #expect(try await reopened.entry(entry.id) == entry)
            #expect(try await reopened.loadAll() == [entry])
            #expect(try await reopened.entries(inScope: "s") == [entry])
        }
        #expect(logs.entries.isEmpty, "an unreadable attempt is not an unreadable entry: nothing set aside")

        // A flushed save (a park, a rewrite) takes the attempt away; one left behind (a process
        // killed between the save's rename and the attempt's removal) is based on the file the save
        // replaced, and does not count.
        try attemptBytes.write(to: attemptFile)
        var parked = attempted
        parked.attempts = 3
        parked.payload = Data("rewritten".utf8)
        try await storage.save(parked)
        #expect(!FileManager.default.fileExists(atPath: attemptFile.path))
        try attemptBytes.write(to: attemptFile)
        #expect(try await FileOutboxStorage(directory: directory.url).entry(entry.id) == parked)
        #expect(try await FileOutboxStorage(directory: directory.url).loadAll() == [parked])

        // A removal takes both files.
        try await storage.saveAttempt(attempted)
        try await storage.removeDelivered(entry.id)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.url.path).filter { !$0.hasPrefix(".") }.isEmpty)
    }

    @Test("FileOutboxStorage: an entry file that rots beside a whole attempt is set aside, and the attempt saved in its place; an attempt left alone is saved once old")
    func fileAttemptOutlivesARottenEntryFile() async throws {
        let (directory, logs, storage) = try Self.attemptFixture()
        let entry = OutboxEntry(
            id: UUID(), sequence: 0, scope: "s", kind: "note", payload: Data("0".utf8), createdAt: Date(timeIntervalSince1970: 1_767_225_600))
        let (entryFile, attemptFile) = Self.files(of: entry.id, in: directory)
        var attempted = entry
        attempted.attempts = 4
        // Rot of the whole file, of a digit of its header's checksum, of a byte of its body.
        let damages: [(String, (inout Data) -> Void)] = [
            ("whole", { $0 = Data("rotten".utf8) }),
            ("header", { $0[$0.startIndex + 20] = $0[$0.startIndex + 20] == UInt8(ascii: "0") ? UInt8(ascii: "1") : UInt8(ascii: "0") }),
            ("body", { $0[$0.endIndex - 3] ^= 0x01 }),
        ]
        var reads = 0
        for read in ["entry", "loadAll"] {
            for (name, damage) in damages {
            reads += 1
            try await storage.save(entry)
            try await storage.saveAttempt(attempted)
            var bytes = try Data(contentsOf: entryFile)
            damage(&bytes)
            try bytes.write(to: entryFile)
            let reopened = FileOutboxStorage(directory: directory.url, logger: logs.logger)
            let found = read == "entry" ? try await reopened.entry(entry.id) : try await reopened.loadAll().first
            #expect(found == attempted, "\(read), \(name)")
            #expect(try await FileOutboxStorage(directory: directory.url).entry(entry.id) == attempted, "saved again in its place")
            #expect(!FileManager.default.fileExists(atPath: attemptFile.path))
            let names = try FileManager.default.contentsOfDirectory(atPath: directory.url.path)
            #expect(names.contains { $0.hasPrefix(Self.fileName(entry.id) + ".unreadable") }, "the rotten file is kept aside: \(names)")
            try await storage.remove(entry.id)
            for name in names where name.contains(".unreadable") { try FileManager.default.removeItem(at: directory.url.appendingPathComponent(name)) }
            }
        }
        #expect(logs.entries.filter { $0.message.contains("its latest attempt was whole") }.count == reads)

        // An attempt whose entry file was set aside, and saving it in its place failed: left alone
        // while young (a removal in another process may be between its two steps), saved once old.
        try await storage.save(entry)
        try await storage.saveAttempt(attempted)
        try FileManager.default.moveItem(at: entryFile, to: entryFile.appendingPathExtension("unreadable"))
        #expect(try await storage.loadAll().isEmpty)
        #expect(FileManager.default.fileExists(atPath: attemptFile.path))
        try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(-120)], ofItemAtPath: attemptFile.path)
        #expect(try await storage.loadAll() == [attempted])
        #expect(try await FileOutboxStorage(directory: directory.url).entry(entry.id) == attempted)
        try await storage.remove(entry.id)
        try FileManager.default.removeItem(at: entryFile.appendingPathExtension("unreadable"))
        // An attempt alone with no entry file set aside: the write was removed (an attempt renamed
        // into place while another process removed it), so it is removed too once old, whole or torn.
        for leftover in [try Self.attemptFileBytes(attempted, base: entry), Data("strata-outbox-attempt 1 0f".utf8)] {
            try leftover.write(to: attemptFile)
            try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(-120)], ofItemAtPath: attemptFile.path)
            #expect(try await storage.loadAll().isEmpty)
            #expect(!FileManager.default.fileExists(atPath: attemptFile.path))
        }
    }

    /// A file storage in a new directory, logging to a capture.
    static func attemptFixture() throws -> (TemporaryDirectory, LogCapture, FileOutboxStorage) {
        let directory = try TemporaryDirectory(prefix: "strata-file-outbox-attempt")
        let logs = LogCapture()
        return (directory, logs, FileOutboxStorage(directory: directory.url, logger: logs.logger))
    }

    /// The entry file and the attempt file of `id` in `directory`.
    static func files(of id: UUID, in directory: TemporaryDirectory) -> (entry: URL, attempt: URL) {
        let entryFile = directory.url.appendingPathComponent(fileName(id))
        return (entryFile, entryFile.deletingPathExtension().appendingPathExtension("attempt"))
    }

    /// The bytes of an attempt file for `attempt`, based on `base`'s entry file, as the storage writes them.
    static func attemptFileBytes(_ attempt: OutboxEntry, base: OutboxEntry) throws -> Data {
        let entryBytes = try FileOutboxStorage.encode(base)
        let checksum = try #require(FileOutboxStorage.checksum(inHeaderOf: entryBytes))
        var bytes = Data("strata-outbox-attempt 1 \(checksum)\n".utf8)
        bytes.append(try FileOutboxStorage.encode(attempt))
        return bytes
    }

    static func encodedFile(_ entry: OutboxEntry) throws -> Data { try FileOutboxStorage.encode(entry) }

    @Test("the file storage runs every case")
    func fileRunsEverything() {
        #expect(Self.file.applicableCases == OutboxStorageContractCase.allCases)
    }

    @Test("a storage that breaks the contract fails it, naming the case and the field", arguments: [
        (Breakage.dropsReplacements, OutboxStorageContractCase.saveReplacesTheEntryWithItsID, "attempts"),
        (.losesQueuedAt, .everyFieldRoundTrips, "queuedAt"),
        (.losesConcurrentSaves, .concurrentSavesLoseNothing, "missing"),
        (.refusesMissingRemoves, .removeOfAMissingIDSucceeds, "remove of"),
        (.readsStaleByID, .entryReadsBackTheLatestVersion, "attempts"),
        (.readsRemovedByID, .entryOfAMissingIDIsNil, "expected nil"),
        (.keepsEverySave, .savingTheSameEntryTwiceKeepsOne, "duplicates"),
    ])
    func brokenStorageFails(_ breakage: Breakage, _ behaviour: OutboxStorageContractCase, _ named: String) async throws {
        let contract = OutboxStorageContract { BrokenOutboxStorage(breakage) }
        let violation = try await #require(throws: OutboxStorageContractError.self, "\(breakage) passed \(behaviour)") {
            try await contract.verify(behaviour)
        }
        #expect(violation.contractCase == behaviour)
        #expect(violation.message.contains(named), "\(violation)")
        await #expect(throws: OutboxStorageContractVerificationError.self) { try await contract.verifyAll() }
    }

    @Test("a case that needs a hook the contract lacks fails, naming the hook")
    func missingHookFails() async throws {
        await #expect {
            try await Self.memory.verify(.secondInstanceSeesSavesAndRemovals)
        } throws: { error in
            "\(error)".contains("`reopen` hook")
        }
    }
}

enum Breakage: Sendable {
    case dropsReplacements, losesQueuedAt, losesConcurrentSaves, refusesMissingRemoves
    /// `entry(_:)` answers from the first version saved of each id.
    case readsStaleByID
    /// `entry(_:)` still answers for a removed id.
    case readsRemovedByID
    /// Every save adds a row, even of an id already stored.
    case keepsEverySave
}

/// A memory storage with one defect.
final class BrokenOutboxStorage: OutboxStorage {
    let breakage: Breakage
    private let entries = Locked<[UUID: OutboxEntry]>([:])
    private let saves = Locked(0)
    /// Every entry ever saved, first version of each id (for `readsStaleByID`, `readsRemovedByID`).
    private let firstVersions = Locked<[UUID: OutboxEntry]>([:])
    /// Repeated saves of stored ids (for `keepsEverySave`).
    private let extraRows = Locked<[OutboxEntry]>([])

    init(_ breakage: Breakage) { self.breakage = breakage }

    func loadAll() async throws -> [OutboxEntry] {
        entries.withLock { Array($0.values) } + extraRows.withLock { $0 }
    }

    func entry(_ id: UUID) async throws -> OutboxEntry? {
        switch breakage {
        case .readsStaleByID: firstVersions.withLock { $0[id] }
        case .readsRemovedByID: entries.withLock { $0[id] } ?? firstVersions.withLock { $0[id] }
        default: entries.withLock { $0[id] }
        }
    }

    func save(_ entry: OutboxEntry) async throws {
        var entry = entry
        switch breakage {
        case .dropsReplacements where entries.withLock({ $0[entry.id] != nil }):
            return
        case .losesQueuedAt:
            entry.queuedAt = entry.createdAt
        case .losesConcurrentSaves:
            // Every fifth save is acknowledged and not kept.
            if saves.withLock({ count in count += 1; return count.isMultiple(of: 5) }) { return }
        case .keepsEverySave where entries.withLock({ $0[entry.id] != nil }):
            extraRows.withLock { $0.append(entry) }
            return
        default:
            break
        }
        firstVersions.withLock { if $0[entry.id] == nil { $0[entry.id] = entry } }
        entries.withLock { $0[entry.id] = entry }
    }

    func remove(_ id: UUID) async throws {
        let removed = entries.withLock { $0.removeValue(forKey: id) }
        if removed == nil, breakage == .refusesMissingRemoves {
            throw StoreError(store: "BrokenOutboxStorage", operation: .delete, key: id.uuidString, reason: "no such entry")
        }
    }
}
