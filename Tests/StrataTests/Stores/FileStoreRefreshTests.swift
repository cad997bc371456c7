import Foundation
import Testing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

/// `FileStore.refresh` rewrites the header only: the payload is copied, never decoded or encoded.
@Suite("FileStore refresh")
struct FileStoreRefreshTests {
    let directory: TemporaryDirectory
    let codec = CountingCodec()

    init() throws {
        directory = try TemporaryDirectory()
    }

    func makeSUT(countLimit: Int? = nil) -> FileStore<Item> {
        FileStore(directory: directory.appending("cache"), codec: codec, countLimit: countLimit, logger: quietLogger)
    }

    let revalidated = CacheValidators(etag: "\"v2\"", lastModified: "Thu, 22 Oct 2015 08:00:00 GMT", maxAge: .seconds(300))
    let later = referenceDate.addingTimeInterval(3_600.5)

    /// An insert that lands between refresh's read and its write must survive. The hook runs inside
    /// refresh after the read; it starts an insert and waits until that insert has either finished
    /// (a refresh without the write lock) or is waiting for the write lock, so the interleaving is
    /// certain rather than left to timing.
    @Test(arguments: [nil, 10] as [Int?])
    func insertDuringRefresh_isNotOverwrittenWithTheValueRefreshRead(countLimit: Int?) async throws {
        let sut = makeSUT(countLimit: countLimit)
        try await sut.insert(itemA, for: "feed", storedAt: referenceDate)
        let newer = CacheEntry(value: itemB, storedAt: later.addingTimeInterval(60), validators: CacheValidators(etag: "\"v3\""))
        let insertArrived = DispatchSemaphore(value: 0)
        let insert = Locked<Task<Void, any Error>?>(nil)
        sut.hooks.withLock { hooks in
            hooks.waitingForWriteLock = { insertArrived.signal() }
            hooks.afterRefreshRead = { [sut] in
                sut.hooks.withLock { $0.afterRefreshRead = nil }
                let task = Task.detached {
                    defer { insertArrived.signal() }
                    try await sut.insert(newer, for: "feed")
                }
                insert.withLock { $0 = task }
                insertArrived.wait()
            }
        }

        #expect(try await sut.refresh("feed", storedAt: later, validators: revalidated))
        let task = try #require(insert.withLock { $0 }, "the refresh hook did not run")
        try await task.value

        #expect(try await sut.retrieve("feed") == newer, "the insert that landed during the refresh was overwritten")
    }

    @Test func refresh_neverCallsTheCodec_andCopiesThePayloadBytes() async throws {
        let sut = makeSUT()
        try await sut.insert(itemA, for: "feed", storedAt: referenceDate, validators: CacheValidators(etag: "\"v1\""))
        let before = try #require(EntryEnvelope.decode(try Data(contentsOf: sut.fileURL(for: "feed"))))
        #expect(codec.counts == .init(encodes: 1, decodes: 0))

        #expect(try await sut.refresh("feed", storedAt: later, validators: revalidated))

        #expect(codec.counts == .init(encodes: 1, decodes: 0), "a refresh must not decode or encode the value")
        let after = try #require(EntryEnvelope.decode(try Data(contentsOf: sut.fileURL(for: "feed"))))
        #expect(after.payload == before.payload)
        #expect(after.header == .init(key: "feed", storedAt: later, validators: revalidated))
        #expect(try await sut.retrieve("feed") == CacheEntry(value: itemA, storedAt: later, validators: revalidated))
        #expect(codec.counts == .init(encodes: 1, decodes: 1))
    }

    @Test func refresh_keepsAPayloadTheCodecCannotRead_untouched() async throws {
        // Written by a store of another value type: this store's codec could not decode it, and a
        // refresh does not try; the entry stays exactly as unreadable as it was (retrieve removes it).
        let other = FileStore<String>(directory: directory.appending("cache"), logger: quietLogger)
        try await other.insert("not an item", for: "feed", storedAt: referenceDate)
        let sut = makeSUT()

        #expect(try await sut.refresh("feed", storedAt: later, validators: revalidated))
        #expect(codec.counts == .init(encodes: 0, decodes: 0))
        #expect(try await other.retrieve("feed") == CacheEntry(value: "not an item", storedAt: later, validators: revalidated))
    }

    @Test func refresh_writesThroughATemporaryFile_leavingNoneBehind_withMode0600() async throws {
        let sut = makeSUT()
        try await sut.insert(itemA, for: "feed", storedAt: referenceDate)
        let inodeBefore = try inode(of: sut.fileURL(for: "feed"))

        #expect(try await sut.refresh("feed", storedAt: later, validators: revalidated))

        // A new file was renamed into place (a new inode), not the old one patched.
        #expect(try inode(of: sut.fileURL(for: "feed")) != inodeBefore)
        let names = try FileManager.default.contentsOfDirectory(atPath: sut.directory.path)
        #expect(names == [sut.fileURL(for: "feed").lastPathComponent])
        let attributes = try FileManager.default.attributesOfItem(atPath: sut.fileURL(for: "feed").path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
    }

    @Test(arguments: [Data(), Data("garbage".utf8), Data("STRA".utf8) + Data([9])])
    func refresh_ofACorruptEntry_isFalse_andRemovesIt(_ bytes: Data) async throws {
        let sut = makeSUT()
        try await sut.insert(itemA, for: "feed", storedAt: referenceDate)
        try bytes.write(to: sut.fileURL(for: "feed"))

        #expect(try await sut.refresh("feed", storedAt: later, validators: revalidated) == false)
        #expect(!FileManager.default.fileExists(atPath: sut.fileURL(for: "feed").path))
    }

    @Test func refresh_ofAnotherKeysEntryUnderOurFileName_isFalse_andLeavesItAlone() async throws {
        let sut = makeSUT()
        try await sut.insert(itemA, for: "other", storedAt: referenceDate)
        try FileManager.default.copyItem(at: sut.fileURL(for: "other"), to: sut.fileURL(for: "feed"))
        let copied = try Data(contentsOf: sut.fileURL(for: "feed"))

        #expect(try await sut.refresh("feed", storedAt: later, validators: revalidated) == false)
        #expect(try Data(contentsOf: sut.fileURL(for: "feed")) == copied)
    }

    @Test func failedRefresh_throwsAStoreErrorNamingTheOperation_andKeepsTheEntry() async throws {
        let sut = makeSUT()
        try await sut.insert(itemA, for: "feed", storedAt: referenceDate)

        try await UnusableDirectory.while(sut.directory) {
            await #expect {
                _ = try await sut.refresh("feed", storedAt: later, validators: revalidated)
            } throws: { error in
                guard let error = error as? StoreError else { return false }
                return error.operation == .refresh && error.key == "feed" && error.store == sut.description
            }
        }
        #expect(try await sut.retrieve("feed") == CacheEntry(value: itemA, storedAt: referenceDate))
    }

    @Test func refresh_countsAsAUse_forEviction() async throws {
        let sut = makeSUT(countLimit: 2)
        try await sut.insert(itemA, for: "k1", storedAt: referenceDate)
        try await sut.insert(itemB, for: "k2", storedAt: referenceDate)
        #expect(try await sut.refresh("k1", storedAt: later, validators: revalidated))

        try await sut.insert(itemA, for: "k3", storedAt: referenceDate)

        #expect(try await sut.retrieve("k2") == nil, "k2 was the least recently used once k1 was refreshed")
        #expect(try await sut.retrieve("k1") == CacheEntry(value: itemA, storedAt: later, validators: revalidated))
        #expect(try await sut.retrieve("k3")?.value == itemA)
    }

    @Test func refresh_ofAMissingEntry_createsNothing() async throws {
        let sut = makeSUT(countLimit: 2)
        #expect(try await sut.refresh("feed", storedAt: later, validators: revalidated) == false)
        #expect(!FileManager.default.fileExists(atPath: sut.fileURL(for: "feed").path))
    }

    private func inode(of url: URL) throws -> UInt64 {
        let attributes = try FileManager.default.attributesOfItem(atPath: url.path)
        return try #require((attributes[.systemFileNumber] as? NSNumber)?.uint64Value)
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
        return try JSONCodec<Item>().encode(value)
    }

    func decode(_ data: Data) throws -> Item {
        state.withLock { $0.decodes += 1 }
        return try JSONCodec<Item>().decode(data)
    }
}

/// `UserDefaultsStore.refresh` rewrites the envelope header around the same payload, like `FileStore`.
@Suite("UserDefaultsStore refresh")
struct UserDefaultsStoreRefreshTests {
    @Test func refresh_neverCallsTheCodec_andKeepsThePayloadBytes() async throws {
        try await UserDefaultsSuite.withScope {
            let suite = UserDefaultsSuite.scoped()
            let codec = CountingCodec()
            let sut = UserDefaultsStore<Item>(suiteName: suite, codec: codec)
            let validators = CacheValidators(etag: "\"v2\"", lastModified: nil, maxAge: .seconds(90))
            let later = referenceDate.addingTimeInterval(60)
            try await sut.insert(itemA, for: "feed", storedAt: referenceDate)
            let stored = { UserDefaults(suiteName: suite)?.data(forKey: sut.keyPrefix + "feed").flatMap(EntryEnvelope.decode) }
            let before = try #require(stored())

            #expect(try await sut.refresh("feed", storedAt: later, validators: validators))

            #expect(codec.counts == .init(encodes: 1, decodes: 0))
            let after = try #require(stored())
            #expect(after.payload == before.payload)
            #expect(after.header == .init(key: "feed", storedAt: later, validators: validators))
            #expect(try await sut.refresh("missing", storedAt: later, validators: validators) == false)
        }
    }

    @Test func refresh_ofACorruptEntry_isFalse_andRemovesIt() async throws {
        try await UserDefaultsSuite.withScope { () async throws in
            let suite = UserDefaultsSuite.scoped()
            let sut = UserDefaultsStore<Item>(suiteName: suite)
            UserDefaults(suiteName: suite)?.set(Data([0, 1, 2]), forKey: sut.keyPrefix + "feed")

            #expect(try await sut.refresh("feed", storedAt: referenceDate, validators: .none) == false)
            #expect(UserDefaults(suiteName: suite)?.object(forKey: sut.keyPrefix + "feed") == nil)
        }
    }
}
