import Foundation
import Logging
import Testing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

@Suite("FileStore limits and index")
struct FileStoreLimitTests {
    let directory: TemporaryDirectory

    init() throws {
        directory = try TemporaryDirectory()
    }

    var url: URL { directory.appending("cache") }
    var journalPath: String { url.appendingPathComponent(IndexJournal.fileName).path }

    func makeSUT(countLimit: Int? = nil, byteLimit: Int? = nil, logger: Logger = quietLogger) -> FileStore<Item> {
        FileStore(directory: url, countLimit: countLimit, byteLimit: byteLimit, synchronizesWrites: false, logger: logger)
    }

    /// The entry files in the directory (64-hex names), without the index, lock or temporary files.
    func entryFiles() -> Set<String> {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []
        return Set(names.filter { EntryName(fileName: $0) != nil })
    }

    func fileName(_ key: String) -> String { EntryName(key: key).fileName }

    func item(_ n: Int) -> Item { Item(id: n, name: "item \(n)") }

    func setModificationDate(_ date: Date, of path: String) throws {
        try FileManager.default.setAttributes([.modificationDate: date], ofItemAtPath: path)
    }

    // MARK: Limits

    @Test func countLimit_evictsLeastRecentlyUsedOnInsert() async throws {
        let sut = makeSUT(countLimit: 3)
        for n in 1...5 { try await sut.insert(item(n), for: "k\(n)", storedAt: referenceDate) }

        #expect(entryFiles() == Set(["k3", "k4", "k5"].map(fileName)))
        #expect(try await sut.retrieve("k1") == nil)
        #expect(try await sut.retrieve("k2") == nil)
        for n in 3...5 { #expect(try await sut.retrieve("k\(n)")?.value == item(n)) }
    }

    @Test func byteLimit_evictsUntilTheFilesFit() async throws {
        let probe = makeSUT()
        try await probe.insert(item(1), for: "k1", storedAt: referenceDate)
        let entrySize = try #require(FileManager.default.attributesOfItem(atPath: probe.fileURL(for: "k1").path)[.size] as? Int)
        try FileManager.default.removeItem(at: url)

        // Room for three entries of this size, not four (every key and value below has the same length).
        let sut = makeSUT(byteLimit: entrySize * 3 + entrySize / 2)
        for n in 1...6 { try await sut.insert(item(n), for: "k\(n)", storedAt: referenceDate) }

        #expect(entryFiles() == Set(["k4", "k5", "k6"].map(fileName)))
        let total = try entryFiles().reduce(0) { sum, name in
            sum + (try FileManager.default.attributesOfItem(atPath: url.appendingPathComponent(name).path)[.size] as? Int ?? 0)
        }
        #expect(total <= entrySize * 3 + entrySize / 2)
    }

    @Test func entryLargerThanTheByteLimit_isNotKeptAndDropsTheOutdatedPreviousEntry() async throws {
        let sut = FileStore<String>(directory: url, byteLimit: 400, synchronizesWrites: false, logger: quietLogger)
        try await sut.insert("small", for: "big", storedAt: referenceDate)
        try await sut.insert("other", for: "other", storedAt: referenceDate)

        try await sut.insert(String(repeating: "x", count: 1000), for: "big", storedAt: referenceDate)

        #expect(try await sut.retrieve("big") == nil)
        #expect(try await sut.retrieve("other")?.value == "other")
        #expect(entryFiles() == [fileName("other")])
    }

    @Test func retrieveRefreshesRecency_andReplacingAnEntryEvictsNothing() async throws {
        let sut = makeSUT(countLimit: 3)
        for n in 1...3 { try await sut.insert(item(n), for: "k\(n)", storedAt: referenceDate) }
        _ = try await sut.retrieve("k1")
        try await sut.insert(item(20), for: "k2", storedAt: referenceDate)  // replace: no eviction
        #expect(entryFiles().count == 3)

        try await sut.insert(item(4), for: "k4", storedAt: referenceDate)

        #expect(entryFiles() == Set(["k1", "k2", "k4"].map(fileName)))
    }

    @Test func lruOrder_isHonouredAcrossReopen() async throws {
        let first = makeSUT(countLimit: 3)
        for n in 1...3 { try await first.insert(item(n), for: "k\(n)", storedAt: referenceDate) }
        _ = try await first.retrieve("k1")  // order now, least recent first: k2, k3, k1
        try await first.delete("absent")  // a write: it carries the instance's reads into the journal

        let reopened = makeSUT(countLimit: 3)
        try await reopened.insert(item(4), for: "k4", storedAt: referenceDate)
        #expect(entryFiles() == Set(["k3", "k1", "k4"].map(fileName)))

        let again = makeSUT(countLimit: 3)
        try await again.insert(item(5), for: "k5", storedAt: referenceDate)
        #expect(entryFiles() == Set(["k1", "k4", "k5"].map(fileName)))
        #expect(try again.index?.synchronizedNamesByRecency() == ["k5", "k4", "k1"].map { EntryName(key: $0) })
    }

    @Test func readsThroughAnotherInstance_countOnceThatInstanceWrites() async throws {
        let writer = makeSUT(countLimit: 2)
        let reader = makeSUT(countLimit: 2)
        try await writer.insert(item(1), for: "k1", storedAt: referenceDate)
        try await writer.insert(item(2), for: "k2", storedAt: referenceDate)
        #expect(try await reader.retrieve("k1")?.value == item(1))
        try await reader.delete("absent")  // the reader's next write appends its read of k1

        try await writer.insert(item(3), for: "k3", storedAt: referenceDate)

        #expect(entryFiles() == Set(["k1", "k3"].map(fileName)))
        #expect(try await reader.retrieve("k2") == nil, "evicted by the other instance: simply a miss")
    }

    @Test func reads_writeNothing_andTheNextWriteRecordsThemInOrder() async throws {
        let sut = makeSUT(countLimit: 3)
        for n in 1...3 { try await sut.insert(item(n), for: "k\(n)", storedAt: referenceDate) }
        let journal = try Data(contentsOf: URL(fileURLWithPath: journalPath))

        _ = try await sut.retrieve("k1")
        _ = try await sut.retrieve("k2")
        _ = try await sut.retrieve("k1")
        // Nothing written for the reads: the journal is byte for byte what it was, and no other
        // instance can see them yet.
        #expect(try Data(contentsOf: URL(fileURLWithPath: journalPath)) == journal)
        #expect(try makeSUT(countLimit: 3).index?.synchronizedNamesByRecency() == ["k3", "k2", "k1"].map { EntryName(key: $0) })

        // This instance's next write appends them (k1, k2, k1), then its own record, then evicts by
        // the recency they give: k3 (least recent) goes.
        try await sut.insert(item(4), for: "k4", storedAt: referenceDate)
        #expect(entryFiles() == Set(["k1", "k2", "k4"].map(fileName)))
        #expect(try makeSUT(countLimit: 3).index?.synchronizedNamesByRecency() == ["k4", "k1", "k2"].map { EntryName(key: $0) })
    }

    /// Another process holding the index lock (a long compaction, or a file that iOS data protection
    /// keeps locked) does not stop reads: they never take the lock.
    @Test(.timeLimit(.minutes(1)))
    func reads_doNotWaitForTheIndexLock() async throws {
        let sut = makeSUT(countLimit: 3)
        try await sut.insert(item(1), for: "k1", storedAt: referenceDate)
        let fd = open(url.appendingPathComponent(IndexJournal.lockFileName).path, O_RDWR | O_CLOEXEC)
        try #require(fd >= 0)
        defer { close(fd) }
        try #require(flock(fd, LOCK_EX) == 0)
        defer { flock(fd, LOCK_UN) }

        #expect(try await sut.retrieve("k1")?.value == item(1))
        #expect(try await sut.retrieve("k1")?.value == item(1))
    }

    @Test func readsOfAnEntryRemovedMeanwhile_doNotReviveIt() async throws {
        let sut = makeSUT(countLimit: 3)
        let other = makeSUT(countLimit: 3)
        try await sut.insert(item(1), for: "k1", storedAt: referenceDate)
        try await sut.insert(item(2), for: "k2", storedAt: referenceDate)
        _ = try await sut.retrieve("k1")
        try await other.delete("k1")

        try await sut.insert(item(3), for: "k3", storedAt: referenceDate)
        #expect(try sut.index?.synchronizedNamesByRecency() == ["k3", "k2"].map { EntryName(key: $0) })
    }

    @Test func eviction_happensOnWriteNotOnRead() async throws {
        let unlimited = makeSUT()
        for n in 1...5 {
            try await unlimited.insert(item(n), for: "k\(n)", storedAt: referenceDate)
            try setModificationDate(referenceDate.addingTimeInterval(Double(n)), of: unlimited.fileURL(for: "k\(n)").path)
        }
        let sut = makeSUT(countLimit: 2)

        for n in 1...5 { #expect(try await sut.retrieve("k\(n)")?.value == item(n)) }
        #expect(entryFiles().count == 5, "reads never evict")

        try await sut.insert(item(6), for: "k6", storedAt: referenceDate)
        // No index yet: rebuilt from the directory, files ordered by modification time (k5 newest).
        #expect(entryFiles() == Set(["k5", "k6"].map(fileName)))
    }

    // MARK: Start-up cost

    @Test func opening_aStoreOf5000Entries_readsNothingUntilUsed_andOneRetrieveReadsOneFile() async throws {
        let writer = makeSUT(countLimit: 10_000)
        for n in 0..<5000 { try await writer.insert(item(n), for: "key-\(n)", storedAt: referenceDate) }
        // Ten files vanish behind every store's back: a store that scanned the directory at start-up
        // would notice; one that does not still counts them until it touches them.
        for n in 0..<10 { try FileManager.default.removeItem(at: writer.fileURL(for: "key-\(n)")) }

        let sut = makeSUT(countLimit: 10_000)
        #expect(sut.ioCounts.withLock { $0 } == FileStoreIOCounts(), "init does no I/O")

        #expect(try await sut.retrieve("key-4321")?.value == item(4321))
        #expect(sut.ioCounts.withLock { $0 } == FileStoreIOCounts(entryReads: 1), "one retrieve reads one entry file and no index")
        #expect(sut.index?.loadedNamesByRecency == nil)

        try await sut.insert(item(5000), for: "key-5000", storedAt: referenceDate)
        #expect(sut.ioCounts.withLock { $0 } == FileStoreIOCounts(entryReads: 1, journalLoads: 1), "the first insert reads the journal, and only it")
        let indexed = try #require(sut.index?.loadedNamesByRecency)
        #expect(indexed.count == 5001, "the vanished files were not noticed: nothing scanned the directory")
        #expect(indexed.first == EntryName(key: "key-5000"))
        #expect(indexed.dropFirst().first == EntryName(key: "key-4321"), "the read made it the most recently used before the insert")

        #expect(try await sut.retrieve("key-3") == nil)
        #expect(sut.index?.loadedNamesByRecency?.count == 5000, "a vanished file is dropped from the index once touched")
    }

    // MARK: Rebuild and repair

    @Test func deletedIndex_isRebuiltFromTheFiles_withoutLosingEntries() async throws {
        let sut = makeSUT(countLimit: 10)
        for n in 1...5 { try await sut.insert(item(n), for: "k\(n)", storedAt: referenceDate) }
        try FileManager.default.removeItem(atPath: journalPath)

        let reopened = makeSUT(countLimit: 10)
        try await reopened.insert(item(6), for: "k6", storedAt: referenceDate)

        #expect(reopened.ioCounts.withLock { ($0.rebuilds, $0.directoryScans) } == (1, 1))
        #expect(FileManager.default.fileExists(atPath: journalPath))
        for n in 1...6 { #expect(try await reopened.retrieve("k\(n)")?.value == item(n)) }
        #expect(Set(try reopened.index?.synchronizedNamesByRecency() ?? []) == Set((1...6).map { EntryName(key: "k\($0)") }))
    }

    enum Damage: String, CaseIterable, CustomTestStringConvertible {
        case garbage, emptyFile, truncatedHeader, wrongVersion, flippedRecordByte, unknownRecordKind
        var testDescription: String { rawValue }

        func apply(to bytes: inout Data) {
            switch self {
            case .garbage: bytes = Data(repeating: 0xA5, count: 700)
            case .emptyFile: bytes = Data()
            case .truncatedHeader: bytes = bytes.prefix(7)
            case .wrongVersion: bytes[4] = 99
            case .flippedRecordByte: bytes[IndexJournal.headerSize + IndexJournal.recordSize + 10] ^= 0x40
            case .unknownRecordKind: bytes[IndexJournal.headerSize] = 7
            }
        }
    }

    @Test(arguments: Damage.allCases)
    func damagedIndex_isRebuiltFromTheFiles_neverACrashNorDataLoss(_ damage: Damage) async throws {
        let logs = LogCapture()
        let sut = makeSUT(countLimit: 10)
        for n in 1...4 { try await sut.insert(item(n), for: "k\(n)", storedAt: referenceDate) }
        var bytes = try Data(contentsOf: URL(fileURLWithPath: journalPath))
        damage.apply(to: &bytes)
        try bytes.write(to: URL(fileURLWithPath: journalPath))

        let reopened = makeSUT(countLimit: 10, logger: logs.logger)
        for n in 1...4 { #expect(try await reopened.retrieve("k\(n)")?.value == item(n)) }
        try await reopened.insert(item(5), for: "k5", storedAt: referenceDate)

        #expect(reopened.ioCounts.withLock { $0.rebuilds } == 1)
        for n in 1...5 { #expect(try await reopened.retrieve("k\(n)")?.value == item(n)) }
        #expect(Set(try reopened.index?.synchronizedNamesByRecency() ?? []) == Set((1...5).map { EntryName(key: "k\($0)") }))
        #expect(logs.entries.contains { $0.level == .notice && $0.message.contains("rebuilt the cache index") })
    }

    @Test func tornFinalRecord_isCutWithoutARebuild() async throws {
        let sut = makeSUT(countLimit: 2)
        for n in 1...2 { try await sut.insert(item(n), for: "k\(n)", storedAt: referenceDate) }
        // A crash in the middle of appending the next record leaves part of it.
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: journalPath))
        try handle.seekToEnd()
        try handle.write(contentsOf: IndexJournal.encode(.access(EntryName(key: "k9"), size: 1)).prefix(20))
        try handle.close()

        let reopened = makeSUT(countLimit: 2)
        try await reopened.insert(item(3), for: "k3", storedAt: referenceDate)

        #expect(reopened.ioCounts.withLock { $0.rebuilds } == 0)
        #expect(entryFiles() == Set(["k2", "k3"].map(fileName)))
        let size = try #require(FileManager.default.attributesOfItem(atPath: journalPath)[.size] as? Int)
        #expect((size - IndexJournal.headerSize) % IndexJournal.recordSize == 0)
    }

    @Test func filesWrittenBehindTheIndexesBack_areAdoptedOnAccessOrAtCompaction() async throws {
        let sut = makeSUT(countLimit: 3)
        try await sut.insert(item(1), for: "k1", storedAt: referenceDate)
        let outsider = makeSUT()  // no limits: keeps no index
        try await outsider.insert(item(2), for: "k2", storedAt: referenceDate)
        try await outsider.insert(item(3), for: "k3", storedAt: referenceDate)

        #expect(try await sut.retrieve("k2")?.value == item(2))  // adopted on access
        try await sut.insert(item(4), for: "k4", storedAt: referenceDate)
        try await sut.insert(item(5), for: "k5", storedAt: referenceDate)
        // k2 counted (k1, least recently used, was evicted for k5); k3 is unknown to the index so far.
        #expect(entryFiles() == Set(["k2", "k3", "k4", "k5"].map(fileName)))

        // Writes grow the journal (reads do not): k5 written again and again.
        for _ in 0...FileStoreIndex.minimumCompactionRecords { try await sut.insert(item(5), for: "k5", storedAt: referenceDate) }
        #expect(sut.ioCounts.withLock { $0.compactions } == 1)
        try await sut.insert(item(6), for: "k6", storedAt: referenceDate)

        // Compaction adopted k3 as least recently used; the next insert evicted it and k2.
        #expect(entryFiles() == Set(["k4", "k5", "k6"].map(fileName)))
    }

    @Test func directoryRemovedBehindTheStoresBack_isRecreatedAndIndexedAfresh() async throws {
        let sut = makeSUT(countLimit: 2)
        try await sut.insert(item(1), for: "k1", storedAt: referenceDate)
        try FileManager.default.removeItem(at: url)

        try await sut.insert(item(2), for: "k2", storedAt: referenceDate)
        try await sut.insert(item(3), for: "k3", storedAt: referenceDate)
        try await sut.insert(item(4), for: "k4", storedAt: referenceDate)

        #expect(entryFiles() == Set(["k3", "k4"].map(fileName)))
        #expect(try sut.index?.synchronizedNamesByRecency() == ["k4", "k3"].map { EntryName(key: $0) })
    }

    // MARK: Compaction and temporary files

    @Test func journal_isCompactedPastTwiceTheLiveEntries_keepingTheRecencyOrder() async throws {
        let sut = makeSUT(countLimit: 10)
        // Writes grow the journal (reads do not): 400 inserts, k1, k2, k3 in turn.
        for round in 0..<400 { try await sut.insert(item(round), for: "k\(round % 3 + 1)", storedAt: referenceDate) }
        _ = try await sut.retrieve("k2")  // order now, most recent first: k2, then k1 (round 399), then k3
        // The insert appends the read, then its own record.
        try await sut.insert(item(4), for: "k4", storedAt: referenceDate)

        #expect(sut.ioCounts.withLock { $0.compactions } >= 1)
        let size = try #require(FileManager.default.attributesOfItem(atPath: journalPath)[.size] as? Int)
        let records = (size - IndexJournal.headerSize) / IndexJournal.recordSize
        #expect(records <= FileStoreIndex.minimumCompactionRecords + 1)
        let reopened = makeSUT(countLimit: 10)
        #expect(try reopened.index?.synchronizedNamesByRecency() == ["k4", "k2", "k1", "k3"].map { EntryName(key: $0) })
    }

    @Test func staleTemporaryFiles_areSweptOnRebuild_freshOnesAreLeftAlone() async throws {
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        let stale = url.appendingPathComponent(".tmp-\(UUID().uuidString)").path
        let fresh = url.appendingPathComponent(".tmp-\(UUID().uuidString)").path
        try Data("half an entry".utf8).write(to: URL(fileURLWithPath: stale))
        try Data("being written".utf8).write(to: URL(fileURLWithPath: fresh))
        try setModificationDate(Date().addingTimeInterval(-2 * FileStoreIndex.staleTemporaryAge), of: stale)

        let sut = makeSUT(countLimit: 5)
        #expect(FileManager.default.fileExists(atPath: stale), "nothing is swept when the store is created")
        try await sut.insert(item(1), for: "k1", storedAt: referenceDate)

        #expect(!FileManager.default.fileExists(atPath: stale))
        #expect(FileManager.default.fileExists(atPath: fresh))
        #expect(sut.ioCounts.withLock { $0.temporaryFilesSwept } == 1)
    }

    @Test func staleTemporaryFiles_areSweptOnCompaction() async throws {
        let sut = makeSUT(countLimit: 5)
        try await sut.insert(item(1), for: "k1", storedAt: referenceDate)
        let stale = url.appendingPathComponent(".tmp-\(UUID().uuidString)").path
        try Data("half an entry".utf8).write(to: URL(fileURLWithPath: stale))
        try setModificationDate(Date().addingTimeInterval(-2 * FileStoreIndex.staleTemporaryAge), of: stale)

        for _ in 0...FileStoreIndex.minimumCompactionRecords { try await sut.insert(item(1), for: "k1", storedAt: referenceDate) }

        #expect(sut.ioCounts.withLock { ($0.compactions, $0.temporaryFilesSwept) } == (1, 1))
        #expect(!FileManager.default.fileExists(atPath: stale))
    }

    // MARK: Several instances

    @Test func instancesSharingADirectory_keepTheLimitAndAnIndexThatMatchesTheFiles() async throws {
        let stores = (0..<4).map { _ in makeSUT(countLimit: 8) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (number, store) in stores.enumerated() {
                group.addTask {
                    for n in 0..<150 {
                        let key = "k\((n * 7 + number * 3) % 20)"
                        switch n % 4 {
                        case 0, 1: try await store.insert(Item(id: n, name: key), for: key, storedAt: referenceDate)
                        case 2: _ = try await store.retrieve(key)
                        default: try await store.delete(key)
                        }
                    }
                }
            }
            try await group.waitForAll()
        }

        #expect(entryFiles().count <= 8)
        // The journal was compacted under the others' feet at least once, so they had to reload it.
        #expect(stores.map { $0.ioCounts.withLock { $0.compactions } }.reduce(0, +) >= 1)
        for store in stores {
            let indexed = try #require(try store.index?.synchronizedNamesByRecency())
            #expect(Set(indexed.map(\.fileName)) == entryFiles())
        }
    }

    // MARK: Unchanged without limits

    @Test func storeWithoutLimits_keepsNoIndexFiles() async throws {
        let sut = makeSUT()
        for n in 1...3 { try await sut.insert(item(n), for: "k\(n)", storedAt: referenceDate) }
        _ = try await sut.retrieve("k1")
        try await sut.delete("k2")

        #expect(sut.index == nil)
        #expect(try FileManager.default.contentsOfDirectory(atPath: url.path).sorted() == ["k1", "k3"].map(fileName).sorted())
    }

    @Test func limitedStore_readsEntriesWrittenByAnUnlimitedOne_andTheFormatIsTheSame() async throws {
        let unlimited = makeSUT()
        let limited = makeSUT(countLimit: 5)
        try await unlimited.insert(item(1), for: "k1", storedAt: referenceDate)
        try await limited.insert(item(2), for: "k2", storedAt: referenceDate)
        #expect(try await limited.retrieve("k1")?.value == item(1))
        #expect(try await unlimited.retrieve("k2")?.value == item(2))
        #expect(limited.fileURL(for: "k2").lastPathComponent == EntryName(key: "k2").fileName)
    }
}

@Suite("FileStore index journal format")
struct IndexJournalTests {
    @Test(arguments: ["", "feed", "../../etc/passwd", "ключ 🔑"])
    func entryName_matchesTheFileNameAndRoundTrips(key: String) throws {
        let name = EntryName(key: key)
        #expect(name.fileName == SHA256.hexDigest(key))
        #expect(EntryName(fileName: name.fileName) == name)
        #expect(EntryName(digest: name.bytes) == name)
    }

    @Test(arguments: ["", "abc", String(repeating: "A", count: 64), String(repeating: "g", count: 64), ".strata-index", ".tmp-123"])
    func entryName_rejectsOtherFileNames(fileName: String) {
        #expect(EntryName(fileName: fileName) == nil)
    }

    @Test func records_roundTrip_andDamageIsDetected() throws {
        let name = EntryName(key: "feed")
        for record in [IndexJournal.Record.access(name, size: 12_345), .remove(name)] {
            let bytes = IndexJournal.encode(record)
            #expect(bytes.count == IndexJournal.recordSize)
            #expect(IndexJournal.decode(bytes[...]) == record)
            for index in bytes.indices {
                var damaged = bytes
                damaged[index] ^= 0x01
                #expect(IndexJournal.decode(damaged[...]) == nil, "a flipped bit at byte \(index) is detected")
            }
            #expect(IndexJournal.decode(bytes.dropLast()) == nil)
        }
    }

    @Test("a record naming a size past 1 TiB, with a valid checksum, is damage: summed, such sizes overflowed the index and trapped")
    func aRecordWithAnImpossibleSize_isDamage() {
        let name = EntryName(key: "feed")
        #expect(IndexJournal.decode(IndexJournal.encode(.access(name, size: 1 << 40))[...]) == .access(name, size: 1 << 40))
        for size in [(1 << 40) + 1, Int.max] {
            #expect(IndexJournal.decode(IndexJournal.encode(.access(name, size: size))[...]) == nil, "size \(size)")
        }
    }

    @Test func header_roundTrips() {
        #expect(IndexJournal.liveCount(inHeader: IndexJournal.header(liveCount: 4242)) == 4242)
        #expect(IndexJournal.liveCount(inHeader: Array("STRA".utf8) + [1, 0, 0, 0] + [UInt8](repeating: 0, count: 8)) == nil)
    }
}
