import Foundation
import Testing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

@Suite("cached(_:in:key:)")
struct CachedTests {
    let clock = ManualClock()
    let store = MemoryStore<String, Int>()

    func stored(_ value: Int, age: Duration) async throws {
        try await store.insert(value, for: "k", storedAt: clock.date.addingTimeInterval(-Double(age.components.seconds)))
    }

    @Test func cacheFirstServesAFreshEntryWithoutLoading() async throws {
        try await stored(1, age: .seconds(30))
        let remote = LoaderSpy<Void, Int>(.success(2))
        let served = try await remote.cached(.cacheFirst(freshness: .maxAge(.seconds(60))), in: store, key: "k").environment(\.now, clock.wallClock).loadServed()
        #expect(served.value == 1)
        #expect(served.provenance.origin == .memory)
        #expect(served.provenance.age == .seconds(30))
        #expect(remote.loadCount == 0)
    }

    @Test func cacheFirstLoadsAndCachesWhenTheEntryIsTooOld() async throws {
        try await stored(1, age: .seconds(60))
        let remote = LoaderSpy<Void, Int>(.success(2))
        let sut = remote.originating(from: .remote).cached(.cacheFirst(freshness: .maxAge(.seconds(60))), in: store, key: "k").environment(\.now, clock.wallClock)
        let served = try await sut.loadServed()
        #expect(served.value == 2)
        #expect(served.provenance.origin == .remote)
        #expect(try await store.retrieve("k")?.value == 2)
    }

    @Test func networkFirstServesAStaleCopyWithinMaxStaleWhenTheRemoteFails() async throws {
        try await stored(1, age: .seconds(3600))
        let remote = LoaderSpy<Void, Int>(.failure(TestError("offline")))
        let sut = remote.cached(.networkFirst(freshness: .maxAge(.seconds(7200))), in: store, key: "k").environment(\.now, clock.wallClock)
        let served = try await sut.loadServed()
        #expect(served.value == 1)
        #expect(served.provenance.age == .seconds(3600))
    }

    @Test func networkFirstRethrowsTheOriginalErrorBeyondMaxStale() async throws {
        try await stored(1, age: .seconds(7200))
        let remote = LoaderSpy<Void, Int>(.failure(TestError("offline")))
        let sut = remote.cached(.networkFirst(freshness: .maxAge(.seconds(3600))), in: store, key: "k").environment(\.now, clock.wallClock)
        await #expect(throws: TestError("offline")) { try await sut.load() }
    }

    @Test func networkFirstPrefersTheRemoteAndCachesIt() async throws {
        try await stored(1, age: .seconds(1))
        let remote = LoaderSpy<Void, Int>(.success(2))
        #expect(try await remote.cached(.networkFirst(freshness: .any), in: store, key: "k").environment(\.now, clock.wallClock).load() == 2)
        #expect(try await store.retrieve("k")?.value == 2)
    }

    @Test func cacheOnlyNeverLoads() async throws {
        let remote = LoaderSpy<Void, Int>(.success(2))
        let sut = remote.cached(.cacheOnly(freshness: .any), in: store, key: "k").environment(\.now, clock.wallClock)
        await #expect(throws: CacheLoadError.self) { try await sut.load() }
        try await stored(1, age: .seconds(99_999))
        #expect(try await sut.load() == 1)
        #expect(remote.loadCount == 0)
    }

    @Test func networkOnlyAlwaysLoadsAndStillCaches() async throws {
        try await stored(1, age: .zero)
        let remote = LoaderSpy<Void, Int>(.success(2))
        #expect(try await remote.cached(.networkOnly, in: store, key: "k").environment(\.now, clock.wallClock).load() == 2)
        #expect(remote.loadCount == 1)
        #expect(try await store.retrieve("k")?.value == 2)
    }

    @Test func keyedPresetsUseTheInputsKey() async throws {
        let remote = LoaderSpy<Int, Int>(.success(7))
        let sut = remote.cached(.cacheFirst(freshness: .maxAge(.seconds(60))), in: store) { "post-\($0)" }.environment(\.now, clock.wallClock)
        _ = try await sut.load(3)
        #expect(try await store.retrieve("post-3")?.value == 7)
        _ = try await sut.load(3)
        #expect(remote.loadCount == 1)
    }

    @Test(arguments: [
        (CachePolicy.cacheFirst(freshness: .maxAge(.seconds(86_400))), "cache-first(max age 1d 0h)"),
        (.networkFirst(freshness: .any), "network-first(stale if error: any age)"),
        (.cacheOnly(freshness: .maxAge(.seconds(60))), "cache-only(max age 1m 0s)"),
        (.networkOnly, "network-only"),
    ])
    func describesItself(policy: CachePolicy, text: String) {
        #expect(policy.description == text)
    }
}

