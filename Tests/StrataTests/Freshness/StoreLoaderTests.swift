import Foundation
import Synchronization
import Testing
@testable import Strata
import StrataTesting

@Suite("store.loader(key:freshness:)")
struct StoreLoaderTests {
    let clock = ManualClock()
    let store = StoreSpy(MemoryStore<String, Item>())

    @Test func emptyStore_throwsEmptyNamingStoreAndKey() async throws {
        let sut = store.loader(key: "feed", freshness: .any).environment(\.now, clock.wallClock)
        await #expect {
            try await sut.load()
        } throws: { error in
            guard case CacheLoadError.empty(let storeName, let key) = error else { return false }
            return storeName == "MemoryStore" && key == "feed"
        }
    }

    @Test func freshEntry_isServedWithItsAgeAndOrigin() async throws {
        try await store.insert(itemA, for: "feed", storedAt: clock.date)
        clock.advance(by: .seconds(90))

        let served = try await store.loader(key: "feed", freshness: .maxAge(.hours(24))).environment(\.now, clock.wallClock).loadServed()

        #expect(served.value == itemA)
        #expect(served.provenance.origin == .memory)
        #expect(served.provenance.age == .seconds(90))
        #expect(served.provenance.storedAt == clock.startDate)
    }

    @Test func expiredEntry_throwsExpiredWithAgeAndPolicy() async throws {
        try await store.insert(itemA, for: "feed", storedAt: clock.date)
        clock.advance(by: .seconds(24 * 3600))

        await #expect {
            try await store.loader(key: "feed", freshness: .maxAge(.hours(24))).environment(\.now, clock.wallClock).load()
        } throws: { error in
            guard case CacheLoadError.expired(_, "feed", _, let age, let policy) = error else { return false }
            return age == .seconds(24 * 3600) && policy == "max age 1d 0h"
        }
    }

    @Test func failingStore_throwsUnreadableWithTheStoreError() async throws {
        store.faults.retrieve = TestError("EIO")
        await #expect {
            try await store.loader(key: "feed").environment(\.now, clock.wallClock).load()
        } throws: { error in
            guard case CacheLoadError.unreadable(_, "feed", let underlying) = error else { return false }
            return (underlying as? TestError) == TestError("EIO")
        }
    }

    @Test func readingHasNoSideEffects() async throws {
        try await store.insert(itemA, for: "feed", storedAt: clock.date)
        clock.advance(by: .seconds(48 * 3600))
        _ = try? await store.loader(key: "feed", freshness: .maxAge(.hours(24))).environment(\.now, clock.wallClock).load()
        #expect(store.messages == [.insert("feed", CacheEntry(value: itemA, storedAt: clock.startDate)), .retrieve("feed")])
    }

    @Test func keyedLoader_readsTheInputsKey() async throws {
        try await store.insert(itemB, for: "post-2", storedAt: clock.date)
        let sut = store.loader(freshness: .any).environment(\.now, clock.wallClock).mapInput { (id: Int) in "post-\(id)" }
        #expect(try await sut.load(2) == itemB)
    }
}

@Suite("store.loader(freshness: .any) and the clock")
struct AnyAgeStoreLoaderTests {
    @Test func aHitWithAnyAge_readsTheClockOnlyWhenAReportWantsTheAge() async throws {
        let store = MemoryStore<String, Item>()
        try await store.insert(itemA, for: "feed", storedAt: referenceDate)
        let reads = ClockReads()
        let sut = store.loader(key: "feed", freshness: .any)
            .environment(\.now, { reads.count(); return referenceDate + 90 })

        #expect(try await sut.load() == itemA)
        #expect(reads.total == 0)

        let served = try await sut.loadServed()
        #expect(served.provenance.age == .seconds(90))
        #expect(reads.total == 1)

        _ = try await store.loader(key: "feed", freshness: .maxAge(.hours(1)))
            .environment(\.now, { reads.count(); return referenceDate + 90 }).load()
        #expect(reads.total == 2)
    }
}

@Suite("store.value(for:freshness:)")
struct StoreValueTests {
    let clock = ManualClock()
    let store = StoreSpy(MemoryStore<String, Item>())

    @Test func missingOrExpiredValues_areNil() async throws {
        try await clock.environment().bound {
            #expect(try await store.value(for: "feed") == nil)
            try await store.insert(itemA, for: "feed", storedAt: clock.date)
            clock.advance(by: .seconds(3600))
            #expect(try await store.value(for: "feed", freshness: .maxAge(.minutes(30))) == nil)
            #expect(try await store.value(for: "feed", freshness: .maxAge(.hours(2))) == itemA)
        }
    }

    @Test func acceptedValue_isServedWithProvenance() async throws {
        try await store.insert(itemA, for: "feed", storedAt: clock.date)
        clock.advance(by: .seconds(60))
        let served = try await ClosureLoader { try await store.value(for: "feed") }
            .environment(clock.environment()).loadServed()
        #expect(served.value == itemA)
        #expect(served.provenance.origin == .memory)
        #expect(served.provenance.age == .seconds(60))
    }

    @Test func failingStore_throwsTheStoresOwnError() async throws {
        store.faults.retrieve = TestError("EIO")
        await #expect(throws: TestError("EIO")) { try await store.value(for: "feed") }
    }
}

private final class ClockReads: Sendable {
    private let state = Mutex(0)
    func count() { state.withLock { $0 += 1 } }
    var total: Int { state.withLock { $0 } }
}
