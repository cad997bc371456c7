import Foundation
import Testing
@testable import Strata
import StrataTesting

@Suite("writingThrough(in:key:)")
struct WritingThroughTests {
    let clock = ManualClock()

    func makeSUT(_ remote: LoaderSpy<Void, Item>) -> (EnvironmentLoader<WritingThroughLoader<LoaderSpy<Void, Item>, StoreSpy<MemoryStore<String, Item>>>>, StoreSpy<MemoryStore<String, Item>>) {
        let store = StoreSpy(MemoryStore<String, Item>())
        return (remote.writingThrough(in: store, key: "feed").environment(LoadEnvironment(now: clock.wallClock, logger: quietLogger)), store)
    }

    @Test func onSuccess_writesTheValueStampedWithNowAndReturnsIt() async throws {
        let (sut, store) = makeSUT(LoaderSpy(.success(itemA)))
        #expect(try await sut.load() == itemA)
        #expect(store.messages == [.insert("feed", CacheEntry(value: itemA, storedAt: clock.date))])
    }

    @Test func onFailure_passesTheErrorThroughAndWritesNothing() async throws {
        let (sut, store) = makeSUT(LoaderSpy(.failure(TestError("offline"))))
        await #expect(throws: TestError("offline")) { try await sut.load() }
        #expect(store.messages.isEmpty)
    }

    @Test func failedWrite_neverFailsTheLoadIsLoggedAndRecorded() async throws {
        let logs = LogCapture()
        let store = StoreSpy(MemoryStore<String, Item>())
        try await store.base.insert(itemB, for: "feed", storedAt: referenceDate)
        store.faults.insert = TestError("disk full")
        let sut = LoaderSpy<Void, Item>(.success(itemA)).writingThrough(in: store, key: "feed").environment(\.logger, logs.logger)

        let served = try await sut.loadServed()

        #expect(served.value == itemA)
        #expect(try await store.base.retrieve("feed")?.value == itemB, "the previous entry is kept")
        #expect(logs.entries.contains { $0.level == .warning && $0.metadata["key"] == "feed" && $0.metadata["error"] == "disk full" })
        #expect(served.events.contains { if case .cacheWriteFailed(_, "feed", _) = $0 { true } else { false } })
    }

    @Test func cancelledLoad_writesNothing() async throws {
        let remote = LoaderSpy<Void, Item>(holdsLoads: true)
        let (sut, store) = makeSUT(remote)

        let task = Task { try await sut.load() }
        try await remote.waitForLoads(count: 1)
        task.cancel()

        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(store.messages.isEmpty)
    }

    @Test func valueArrivingAfterCancellation_isNotWritten() async throws {
        // The task is cancelled while the base loads, and the base returns a value anyway.
        let base = ClosureLoader<Void, Item> {
            withUnsafeCurrentTask { $0?.cancel() }
            return itemA
        }
        let store = StoreSpy(MemoryStore<String, Item>())

        // In a task of its own: cancelling the test's own task would end the test as "cancelled".
        let load = Task { try await base.writingThrough(in: store, key: "feed").load() }
        await #expect(throws: CancellationError.self) { try await load.value }
        #expect(store.messages.isEmpty)
    }

    @Test func keyedForm_derivesTheKeyFromTheInput() async throws {
        let store = StoreSpy(MemoryStore<String, Item>())
        let sut = ClosureLoader { (id: Int) in Item(id: id, name: "post") }
            .writingThrough(in: store) { id in "post-\(id)" }.environment(\.now, clock.wallClock)

        _ = try await sut.load(7)
        #expect(store.messages == [.insert("post-7", CacheEntry(value: Item(id: 7, name: "post"), storedAt: clock.date))])
    }
}
