import Foundation
import Logging
import Testing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

@Suite("environment(_:)")
struct EnvironmentTests {
    let clock = ManualClock()

    private func retryingOnce() -> RetryPolicy {
        var policy = RetryPolicy.constant(attempts: 2, delay: .seconds(30))
        policy.shouldRetry = { $0 is TestError }
        return policy
    }

    @Test func givenOnceOutside_reachesEveryOperatorInside() async throws {
        let logs = LogCapture()
        let store = StoreSpy(MemoryStore<String, Item>())
        let failingStore = StoreSpy(MemoryStore<String, Item>())
        failingStore.faults.insert = TestError("disk full")
        let remote = LoaderSpy<Void, Item>(.failure(TestError("reset")), .success(itemA))
        let sut = store.loader(key: "feed", freshness: .maxAge(.seconds(60)))
            .fallingBack(to: remote
                .retrying(retryingOnce())
                .timingOut(after: .seconds(300))
                .writingThrough(in: store, key: "feed")
                .writingThrough(in: failingStore, key: "feed"))
            .environment(clock.environment(logger: logs.logger))

        let load = Task { try await sut.load() }
        // The retry's backoff and the timeout's deadline both wait on the manual clock.
        try await clock.waitForSleepers(count: 2)
        clock.advance(by: .seconds(30))
        #expect(try await load.value == itemA)

        // The write was stamped with the environment's wall clock, and the failed write reported to its logger.
        #expect(try await store.retrieve("feed")?.storedAt == clock.date)
        #expect(logs.entries.contains { $0.level == .warning && $0.message.contains("cache write failed") })

        // The store tier ages the entry on the same wall clock.
        clock.advance(by: .seconds(59))
        #expect(try await sut.loadServed().provenance.age == .seconds(59))
    }

    @Test func innerOverride_winsForItsSubtreeOnly() async throws {
        let outer = LogCapture()
        let inner = LogCapture()
        let failing = StoreSpy(MemoryStore<String, Item>())
        failing.faults.insert = TestError("read-only")
        let quiet = LoaderSpy<Void, Item>(.success(itemA))
            .writingThrough(in: failing, key: "thumbnail")
            .environment(\.logger, inner.logger)
        let sut = quiet
            .writingThrough(in: failing, key: "feed")
            .environment(clock.environment(logger: outer.logger))

        _ = try await sut.load()

        #expect(inner.entries.map { $0.metadata["key"] } == ["thumbnail"])
        #expect(outer.entries.map { $0.metadata["key"] } == ["feed"])
    }

    @Test func fieldOverride_keepsTheOuterFields() async throws {
        let store = StoreSpy(MemoryStore<String, Item>())
        let later = clock.date.addingTimeInterval(3600)
        let sut = LoaderSpy<Void, Item>(.success(itemA))
            .writingThrough(in: store, key: "feed")
            .environment(\.now, { later })
            .retrying(retryingOnce())
            .environment(clock.environment())

        _ = try await sut.load()

        #expect(try await store.retrieve("feed")?.storedAt == later)
        // Outside the override, the outer environment is untouched.
        #expect(clock.environment().bound { LoadEnvironment.current.now() } == clock.date)
    }

    @Test func withoutAnEnvironment_operatorsUseTheLiveOne() async throws {
        let store = MemoryStore<String, Item>()
        let before = Date()
        _ = try await LoaderSpy<Void, Item>(.success(itemA)).writingThrough(in: store, key: "feed").load()
        let stamped = try #require(try await store.retrieve("feed")?.storedAt)
        #expect(stamped >= before && stamped <= Date())
        #expect(LoadEnvironment.current.logger.label == "strata")
        #expect(LoadEnvironment.current.clock is ContinuousClock)
    }

    @Test func coalescedFlight_runsInTheEnvironmentOfTheCallerThatStartedIt() async throws {
        let store = StoreSpy(MemoryStore<String, Item>())
        let remote = LoaderSpy<Void, Item>(.success(itemA), holdsLoads: true)
        let sut = remote.writingThrough(in: store, key: "feed").coalesced().environment(clock.environment())

        clock.advance(by: .seconds(42))
        let first = Task { try await sut.load() }
        try await remote.waitForLoads(count: 1)
        #expect(remote.complete(0, with: .success(itemA)))
        #expect(try await first.value == itemA)
        #expect(try await store.retrieve("feed")?.storedAt == clock.date)
    }

    @Test func staleWhileRevalidating_takesItsEnvironmentToItsStream() async throws {
        let store = StoreSpy(MemoryStore<String, Item>())
        try await store.insert(itemA, for: "feed", storedAt: clock.date)
        clock.advance(by: .seconds(90))
        let sut = LoaderSpy<Void, Item>(.success(itemB))
            .staleWhileRevalidating(in: store, key: "feed")
            .environment(clock.environment())

        var served: [Served<Item>] = []
        for try await value in sut.values() { served.append(value) }

        #expect(served.map(\.value) == [itemA, itemB])
        #expect(served.first?.provenance.age == .seconds(90))
        #expect(try await store.retrieve("feed")?.storedAt == clock.date)
    }

    @Test func environment_isNotATierInTheChainsDescription() {
        let bare = LoaderSpy<Void, Item>(.success(itemA)).named("remote").retrying(.never)
        let wrapped = bare.environment(clock.environment())
        #expect(wrapped.chainNode.tree == bare.chainNode.tree)
        #expect(wrapped.chainSummary == bare.chainSummary)
    }
}
