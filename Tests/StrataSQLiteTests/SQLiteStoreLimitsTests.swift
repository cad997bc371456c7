#if SQLite
import Foundation
import GRDB
import Strata
import StrataSQLite
import StrataTesting
import Testing

@Suite("SQLiteStore limits")
struct SQLiteStoreLimitsTests {
    let directory: TemporaryDirectory
    let path: String

    init() throws {
        directory = try TemporaryDirectory(prefix: "strata-sqlite")
        path = directory.appending("cache.sqlite").path
    }

    func makeSUT(countLimit: Int? = nil) throws -> SQLiteStore<Item> {
        try SQLiteStore<Item>(path: path, limits: .init(countLimit: countLimit), logger: quietLogger)
    }

    func makeBytesSUT(byteLimit: Int) throws -> SQLiteStore<Data> {
        try SQLiteStore<Data>(path: path, codec: DataCodec(), limits: .init(byteLimit: byteLimit), logger: quietLogger)
    }

    func insert(_ keys: [String], into sut: SQLiteStore<Item>) async throws {
        for key in keys {
            try await sut.insert(Item(id: key.count, name: key), for: key, storedAt: referenceDate)
        }
    }

    @Test(arguments: [1, 2, 5, 20])
    func countLimit_keepsTheMostRecentlyWrittenEntries(_ limit: Int) async throws {
        let sut = try makeSUT(countLimit: limit)
        let keys = (0..<30).map { "key-\($0)" }

        try await insert(keys, into: sut)

        #expect(try await sut.count == limit)
        #expect(try keysByAccess(at: path) == Array(keys.suffix(limit)))
    }

    @Test func countLimit_evictsInTheSameWriteNotOnALaterRead() async throws {
        let sut = try makeSUT(countLimit: 2)
        try await insert(["a", "b"], into: sut)

        try await insert(["c"], into: sut)

        // Checked through another connection, with no read through the store in between.
        #expect(try !isStored("a", at: path))
        #expect(try isStored("b", at: path))
        #expect(try isStored("c", at: path))
    }

    @Test func retrieve_makesAnEntryRecentSoTheLeastRecentlyUsedOneGoesFirst() async throws {
        let sut = try makeSUT(countLimit: 3)
        try await insert(["a", "b", "c"], into: sut)

        _ = try await sut.retrieve("a")
        try await insert(["d"], into: sut)

        // The read of "a" is applied first in the insert's transaction, then "d" is written.
        #expect(try keysByAccess(at: path) == ["c", "a", "d"])
        #expect(try await sut.retrieve("b") == nil)
        #expect(try await sut.retrieve("a")?.value.name == "a")
    }

    @Test func overwrite_makesAnEntryRecentWithoutGrowingTheCount() async throws {
        let sut = try makeSUT(countLimit: 2)
        try await insert(["a", "b", "a", "c"], into: sut)

        #expect(try keysByAccess(at: path) == ["a", "c"])
    }

    @Test(arguments: [nil, 10] as [Int?])
    func retrieve_neverWritesAndOnlyALimitedStoreKeepsRecency(countLimit: Int?) async throws {
        let sut = try makeSUT(countLimit: countLimit)
        try await insert(["a", "b"], into: sut)
        let observer = try rawConnection(path)
        func dataVersion() throws -> Int? { try observer.read { db in try Int.fetchOne(db, sql: "PRAGMA data_version") } }
        let before = try dataVersion()

        for _ in 0..<5 { _ = try await sut.retrieve("a") }

        #expect(try dataVersion() == before, "a read commits nothing")
        try await sut.delete("missing")  // the next write applies the reads a limited store noted
        #expect(try keysByAccess(at: path) == (countLimit == nil ? ["a", "b"] : ["b", "a"]))
    }

    @Test func readsAreWrittenBackInABatchOnceEnoughArePending() async throws {
        let sut = try makeSUT(countLimit: 1_000)
        let keys = (0..<70).map { "key-\($0)" }
        try await insert(keys, into: sut)

        // 64 distinct keys read, and no write through the store: the 64th read writes them back.
        for key in keys.prefix(64) { _ = try await sut.retrieve(key) }

        #expect(try keysByAccess(at: path) == Array(keys.suffix(6)) + Array(keys.prefix(64)))
    }

    @Test func aSecondInstanceEvictsByTheRecencyTheFirstOneWroteBack() async throws {
        let first = try makeSUT(countLimit: 3)
        try await insert(["a", "b", "c"], into: first)
        _ = try await first.retrieve("a")
        try await first.delete("nothing")  // any write applies the pending reads

        let second = try makeSUT(countLimit: 3)
        try await insert(["d"], into: second)

        #expect(try await first.retrieve("b") == nil)
        #expect(try await first.retrieve("a") != nil)
    }

    @Test func aSmallerLimitOnReopenIsEnforcedOnTheNextWrite() async throws {
        try await insert((0..<10).map { "key-\($0)" }, into: try makeSUT())

        let limited = try makeSUT(countLimit: 3)
        try await insert(["new"], into: limited)

        #expect(try keysByAccess(at: path) == ["key-8", "key-9", "new"])
    }

    @Test func byteLimit_evictsLeastRecentlyUsedUntilTheTotalFits() async throws {
        let sut = try makeBytesSUT(byteLimit: 100)
        try await sut.insert(Data(count: 40), for: "a", storedAt: referenceDate)
        try await sut.insert(Data(count: 40), for: "b", storedAt: referenceDate)
        try await sut.insert(Data(count: 30), for: "c", storedAt: referenceDate)
        #expect(try keysByAccess(at: path) == ["b", "c"])
        #expect(try await sut.totalBytes == 70)

        _ = try await sut.retrieve("b")
        try await sut.insert(Data(count: 40), for: "d", storedAt: referenceDate)

        #expect(try keysByAccess(at: path) == ["b", "d"])
        #expect(try await sut.totalBytes == 80)
    }

    @Test func byteLimit_anEntryLargerThanTheWholeLimitIsNotKeptAndItsStaleValueGoes() async throws {
        let sut = try makeBytesSUT(byteLimit: 50)
        try await sut.insert(Data(count: 10), for: "big", storedAt: referenceDate)
        try await sut.insert(Data(count: 10), for: "other", storedAt: referenceDate)

        try await sut.insert(Data(count: 51), for: "big", storedAt: referenceDate)

        #expect(try await sut.retrieve("big") == nil)
        #expect(try await sut.retrieve("other")?.value.count == 10)
        #expect(try await sut.totalBytes == 10)
    }

    @Test func byteLimit_anEntryExactlyAtTheLimitIsKeptAlone() async throws {
        let sut = try makeBytesSUT(byteLimit: 50)
        try await sut.insert(Data(count: 10), for: "a", storedAt: referenceDate)

        try await sut.insert(Data(count: 50), for: "b", storedAt: referenceDate)

        #expect(try keysByAccess(at: path) == ["b"])
        #expect(try await sut.totalBytes == 50)
    }
}
#endif
