import Foundation
import Testing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

@Suite("fallingBack(to:)")
struct FallingBackTests {
    @Test func deliversPrimaryValueWithoutTouchingTheFallback() async throws {
        let primary = LoaderSpy<Void, Int>(.success(1))
        let fallback = LoaderSpy<Void, Int>(.success(2))

        #expect(try await primary.fallingBack(to: fallback).load() == 1)
        #expect(fallback.loadCount == 0)
    }

    @Test func deliversFallbackValueOnPrimaryFailure() async throws {
        let primary = LoaderSpy<String, Int>(.failure(TestError("primary")))
        let fallback = LoaderSpy<String, Int>(.success(2))

        #expect(try await primary.fallingBack(to: fallback).load("key") == 2)
        #expect(fallback.inputs == ["key"])
    }

    @Test func whenEveryTierFails_theErrorNamesEachTierPrimaryFirst() async throws {
        let sut = StubLoader<Void, Int>(.failure(TestError("offline")), name: "remote")
            .fallingBack(to: StubLoader(.failure(TestError("empty")), name: "cache"))
            .fallingBack(to: StubLoader(.failure(TestError("missing")), name: "bundled"))

        await #expect {
            try await sut.load()
        } throws: { error in
            guard let error = error as? FallbackError else { return false }
            return error.failures.map(\.tier) == ["remote", "cache", "bundled"]
                && error.failures.map { "\($0.error)" } == ["offline", "empty", "missing"]
                && (error.primaryError as? TestError) == TestError("offline")
        }
    }

    @Test func nestedOnTheFallbackSide_isFlattenedInOrder() async throws {
        let inner = StubLoader<Void, Int>(.failure(TestError("b")), name: "b")
            .fallingBack(to: StubLoader(.failure(TestError("c")), name: "c"))
        let sut = StubLoader<Void, Int>(.failure(TestError("a")), name: "a").fallingBack(to: inner)

        let error = try await #require(throws: FallbackError.self) { try await sut.load() }
        #expect(error.failures.map(\.tier) == ["a", "b", "c"])
        #expect(error.description == "all 3 tiers failed: a: a; b: b; c: c")
    }

    @Test func cancellationOfThePrimary_doesNotTryTheFallback() async throws {
        let primary = LoaderSpy<Void, Int>(holdsLoads: true)
        let fallback = LoaderSpy<Void, Int>(.success(2))
        let sut = primary.fallingBack(to: fallback)

        let task = Task { try await sut.load() }
        try await primary.waitForLoads(count: 1)
        task.cancel()

        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(fallback.loadCount == 0)
        #expect(primary.cancelledLoadCount == 1)
    }

    @Test func primaryFailingAfterCancellation_reportsCancellationNotTheFailure() async throws {
        // The primary's task is cancelled while it runs, and it ends with an ordinary error anyway.
        let primary = ClosureLoader<Void, Int> {
            withUnsafeCurrentTask { $0?.cancel() }
            throw TestError("late")
        }
        let fallback = LoaderSpy<Void, Int>(.success(2))

        // In a task of its own: cancelling the test's own task would end the test as "cancelled".
        let load = Task { try await primary.fallingBack(to: fallback).load() }
        await #expect(throws: CancellationError.self) { try await load.value }
        #expect(fallback.loadCount == 0)
    }

    @Test func recordsEachFailedTierOnceForProvenance() async throws {
        let sut = StubLoader<Void, Int>(.failure(TestError("a")), name: "a")
            .fallingBack(to: StubLoader(.failure(TestError("b")), name: "b"))
            .fallingBack(to: ClosureLoader("c") { 3 }.originating(from: .custom("c")))

        let served = try await sut.loadServed()
        let failed = served.events.compactMap { event -> String? in
            if case .tierFailed(let tier, _) = event { return tier }
            return nil
        }
        #expect(failed == ["a", "b"])
        #expect(served.value == 3)
        #expect(served.provenance.origin == .custom("c"))
    }

    @Test func describesTheChainInOrder() {
        let sut = StubLoader<Void, Int>(.success(1), name: "fresh")
            .fallingBack(to: StubLoader(.success(1), name: "remote"))
            .fallingBack(to: StubLoader(.success(1), name: "stale"))
        #expect(sut.chainSummary == "fresh → remote → stale")
        #expect("\(sut)" == """
            fallingBack
            ├── fresh
            ├── remote
            └── stale
            """)
    }
}

@Suite("fallingBack(to:) through wrapped and nested chains")
struct FallingBackWrappedChainTests {
    @Test func wrappedNestedChains_areFlattenedAndRecordedOnce() async throws {
        let inner = StubLoader<Void, Int>(.failure(TestError("b")), name: "b")
            .fallingBack(to: StubLoader(.failure(TestError("c")), name: "c"))
            .named("inner").map { $0 }.eraseToAnyLoader()
        let sut = StubLoader<Void, Int>(.failure(TestError("a")), name: "a").fallingBack(to: inner)

        let error = try await #require(throws: FallbackError.self) { try await sut.loadServed() }
        #expect(error.failures.map(\.tier) == ["a", "b", "c"])
    }

    @Test func failedTiersAreRecordedOnceEvenWhenWrapped() async throws {
        let inner = StubLoader<Void, Int>(.failure(TestError("b")), name: "b")
            .fallingBack(to: StubLoader(.failure(TestError("c")), name: "c"))
            .named("inner")
        let sut = StubLoader<Void, Int>(.failure(TestError("a")), name: "a")
            .fallingBack(to: inner)
            .fallingBack(to: ClosureLoader { 4 }.originating(from: .bundled))

        let served = try await sut.loadServed()
        let failed = served.events.compactMap { event -> String? in
            if case .tierFailed(let tier, _) = event { return tier }
            return nil
        }
        #expect(failed == ["a", "b", "c"])
    }

    @Test func aTierThatServedAndThenFailed_isNotTheProvenance() async throws {
        // Reports `served`, then fails (like an HTTP response whose body does not decode).
        let servedThenFailed = ClosureLoader<Void, Data> { Data("not json".utf8) }.originating(from: .remote)
            .decoding(Int.self).named("remote")
        let sut = servedThenFailed.fallingBack(to: ClosureLoader { 7 })

        let served = try await sut.loadServed()

        #expect(served.value == 7)
        #expect(served.provenance.origin == .unknown)
    }
}
