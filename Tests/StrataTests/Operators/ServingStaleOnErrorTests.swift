import Foundation
import Testing
@testable import Strata
import StrataTesting

/// S0's `CachingFeedRepository`, as `staleIfError(in:key:)`.
@Suite("servingStaleOnError(in:key:maxStale:)")
struct ServingStaleOnErrorTests {
    let clock = ManualClock()
    let store = StoreSpy(MemoryStore<String, Item>())

    func makeSUT(_ remote: LoaderSpy<Void, Item>, maxStale: Duration? = nil) -> EnvironmentLoader<ServingStaleOnErrorLoader<LoaderSpy<Void, Item>, StoreSpy<MemoryStore<String, Item>>>> {
        remote.servingStaleOnError(in: store, key: "feed", maxStale: maxStale).environment(LoadEnvironment(now: clock.wallClock, logger: quietLogger))
    }

    @Test func savesFreshValuesOnSuccess() async throws {
        _ = try await makeSUT(LoaderSpy(.success(itemA))).load()
        #expect(store.messages == [.insert("feed", CacheEntry(value: itemA, storedAt: clock.date))])
    }

    @Test func returnsFreshValuesOnSuccess() async throws {
        try await store.base.insert(itemB, for: "feed", storedAt: clock.date)
        #expect(try await makeSUT(LoaderSpy(.success(itemA))).load() == itemA)
    }

    @Test func returnsCachedValueOnFailure() async throws {
        try await store.base.insert(itemB, for: "feed", storedAt: clock.date)
        clock.advance(by: .seconds(3600))

        let served = try await makeSUT(LoaderSpy(.failure(TestError("offline")))).loadServed()

        #expect(served.value == itemB)
        #expect(served.provenance.origin == .memory)
        #expect(served.provenance.age == .seconds(3600))
    }

    @Test func throwsTheOriginalErrorWhenTheCacheIsEmpty() async throws {
        await #expect(throws: TestError("offline")) {
            try await makeSUT(LoaderSpy(.failure(TestError("offline")))).load()
        }
    }

    @Test func throwsTheOriginalErrorWhenTheCacheIsUnreadable() async throws {
        store.faults.retrieve = TestError("disk broken")
        await #expect(throws: TestError("offline")) {
            try await makeSUT(LoaderSpy(.failure(TestError("offline")))).load()
        }
    }

    @Test func aFailedSaveDoesNotFailTheLoad() async throws {
        store.faults.insert = TestError("disk full")
        #expect(try await makeSUT(LoaderSpy(.success(itemA))).load() == itemA)
    }

    @Test func copiesOlderThanMaxStale_areNotServed() async throws {
        try await store.base.insert(itemB, for: "feed", storedAt: clock.date)
        clock.advance(by: .seconds(7 * 86_400))

        await #expect(throws: TestError("offline")) {
            try await makeSUT(LoaderSpy(.failure(TestError("offline"))), maxStale: .days(7)).load()
        }
    }

    @Test func cancellation_isNotAnsweredFromTheCache() async throws {
        try await store.base.insert(itemB, for: "feed", storedAt: clock.date)
        let remote = LoaderSpy<Void, Item>(holdsLoads: true)
        let sut = makeSUT(remote)

        let task = Task { try await sut.load() }
        try await remote.waitForLoads(count: 1)
        task.cancel()

        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(store.messages.isEmpty)
    }
}

@Suite("servingStaleOnError(in:key:maxStale:) and cancellation")
struct ServingStaleOnErrorCancellationTests {
    @Test func cancellationDuringTheCacheRead_isReportedAsCancellation() async throws {
        let store = CancellingStore()
        let sut = StubLoader<Void, Item>(.failure(TestError("offline"))).servingStaleOnError(in: store, key: "feed")
        // In a task of its own: cancelling the test's own task would end the test as "cancelled".
        let load = Task { try await sut.load() }
        await #expect(throws: CancellationError.self) { try await load.value }
    }
}

/// A store whose read is cancelled (it cancels its own task, as a caller would mid-read).
final class CancellingStore: Store, Sendable {
    func retrieve(_ key: String) async throws -> CacheEntry<Item>? {
        withUnsafeCurrentTask { $0?.cancel() }
        throw CancellationError()
    }
    func insert(_ entry: CacheEntry<Item>, for key: String) async throws {}
    func delete(_ key: String) async throws {}
}

extension CancellingStore {
    func removeAll() async throws {}
}
