import Foundation
import Testing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

@Suite("staleWhileRevalidating(in:key:freshness:)")
struct StaleWhileRevalidatingTests {
    let clock = ManualClock()
    let store = MemoryStore<String, Int>()

    func collect(_ stream: AsyncThrowingStream<Served<Int>, any Error>) async -> (values: [Served<Int>], error: (any Error)?) {
        var values: [Served<Int>] = []
        do {
            for try await served in stream { values.append(served) }
            return (values, nil)
        } catch {
            return (values, error)
        }
    }

    @Test func yieldsTheCachedValueThenTheFreshOneEachWithOriginAndAge() async throws {
        try await store.insert(1, for: "k", storedAt: clock.date.addingTimeInterval(-7200))
        let remote = LoaderSpy<Void, Int>(.success(2))
        let sut = remote.originating(from: .remote).staleWhileRevalidating(in: store, key: "k").environment(LoadEnvironment(now: clock.wallClock))
        let (values, error) = await collect(sut.values())
        #expect(error == nil)
        #expect(values.map(\.value) == [1, 2])
        #expect(values.map(\.provenance.origin) == [.memory, .remote])
        #expect(values.map(\.provenance.age) == [.seconds(7200), .zero])
        #expect(try await store.retrieve("k")?.value == 2)
    }

    @Test func withNothingCachedOnlyTheFreshValueComes() async throws {
        let remote = LoaderSpy<Void, Int>(.success(2))
        let (values, _) = await collect(remote.staleWhileRevalidating(in: store, key: "k").environment(LoadEnvironment(now: clock.wallClock)).values())
        #expect(values.map(\.value) == [2])
    }

    @Test func aCopyOlderThanMaxStaleIsNotShown() async throws {
        try await store.insert(1, for: "k", storedAt: clock.date.addingTimeInterval(-7200))
        let remote = LoaderSpy<Void, Int>(.success(2))
        let (values, _) = await collect(remote.staleWhileRevalidating(in: store, key: "k", freshness: .maxAge(.seconds(3600))).environment(LoadEnvironment(now: clock.wallClock)).values())
        #expect(values.map(\.value) == [2])
    }

    @Test func aFailedRefreshEndsTheSequenceWithTheErrorAfterTheCachedValue() async throws {
        try await store.insert(1, for: "k", storedAt: clock.date)
        let remote = LoaderSpy<Void, Int>(.failure(TestError("offline")))
        let (values, error) = await collect(remote.staleWhileRevalidating(in: store, key: "k").environment(LoadEnvironment(now: clock.wallClock)).values())
        #expect(values.map(\.value) == [1])
        #expect(error as? TestError == TestError("offline"))
        #expect(try await store.retrieve("k")?.value == 1, "the cached copy is untouched")
    }

    @Test func stoppingTheIterationCancelsTheRefresh() async throws {
        try await store.insert(1, for: "k", storedAt: clock.date)
        let remote = LoaderSpy<Void, Int>(.success(2), holdsLoads: true)
        let sut = remote.staleWhileRevalidating(in: store, key: "k").environment(LoadEnvironment(now: clock.wallClock))
        func firstThenStop() async throws -> Int? {
            var iterator = sut.values().makeAsyncIterator()
            let first = try await iterator.next()
            try await remote.waitForLoads()
            #expect(remote.cancelledLoadCount == 0)
            return first?.value
        }
        // Leaving the function drops the iterator, which terminates the stream and cancels the held refresh.
        #expect(try await firstThenStop() == 1)
        #expect(remote.cancelledLoadCount == 1)
        #expect(try await store.retrieve("k")?.value == 1)
    }
}
