import Foundation
import Testing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

@Suite("guarded(by:)")
struct GuardedTests {
    let clock = ManualClock()
    let url = URL(string: "https://api.example.com/feed")!

    func breaker(ratio: Double = 0.5, minimum: Int = 4, window: Duration = .seconds(10), pause: Duration = .seconds(30)) -> CircuitBreaker<ManualClock> {
        CircuitBreaker(
            name: "api",
            policy: CircuitBreakerPolicy(failureRatio: ratio, samplingDuration: window, minimumThroughput: minimum, breakDuration: pause),
            clock: clock)
    }

    /// Loads once through `sut`, ignoring the outcome.
    func attempt<L: Loader>(_ sut: L) async where L.Input == Void {
        _ = try? await sut.load()
    }

    @Test func staysClosedBelowTheMinimumThroughput() async {
        let breaker = breaker(minimum: 4)
        let sut = StubLoader<Void, Int>(.failure(TestError())).guarded(by: breaker)
        for _ in 0..<3 { await attempt(sut) }
        #expect(breaker.state == .closed)
    }

    @Test func opensAtTheFailureRatioAndThenFailsFastWithoutCallingTheTier() async throws {
        let breaker = breaker(ratio: 0.5, minimum: 4)
        let base = LoaderSpy<Void, Int>(.success(1), .failure(TestError()), .success(1), .failure(TestError()), .success(1))
        let sut = base.guarded(by: breaker)
        for _ in 0..<4 { await attempt(sut) }
        #expect(breaker.state == .open)

        let error = await #expect(throws: CircuitOpenError.self) { try await sut.load() }
        #expect(base.loadCount == 4, "an open circuit never calls its tier")
        #expect(error?.state == .open)
        #expect(error?.retryAfter == .seconds(30))
        #expect(error?.description == "circuit 'api' is open: failing fast, next trial in 30s")
    }

    @Test func belowTheRatioItStaysClosed() async {
        let breaker = breaker(ratio: 0.5, minimum: 4)
        let base = LoaderSpy<Void, Int>(.success(1), .success(1), .success(1), .failure(TestError()))
        let sut = base.guarded(by: breaker)
        for _ in 0..<4 { await attempt(sut) }
        #expect(breaker.state == .closed)
    }

    @Test func aFallbackAfterAnOpenCircuitServesAtOnce() async throws {
        let breaker = breaker(minimum: 1)
        let remote = LoaderSpy<Void, Int>(.failure(TestError("down")))
        let sut = remote.guarded(by: breaker).fallingBack(to: ClosureLoader("cache") { 5 }.originating(from: .disk))
        _ = try await sut.load()
        #expect(breaker.state == .open)

        let served = try await sut.loadServed()
        #expect(served.value == 5)
        #expect(remote.loadCount == 1)
        #expect(served.events.map(\.kind) == ["breaker_rejected", "tier_failed", "served"])
    }

    @Test func afterTheBreakOneTrialPassesAndSuccessCloses() async throws {
        let breaker = breaker(minimum: 1, pause: .seconds(30))
        let base = LoaderSpy<Void, Int>(.failure(TestError()), .success(2))
        let sut = base.guarded(by: breaker)
        await attempt(sut)
        clock.advance(by: .seconds(29))
        #expect(breaker.state == .open)
        clock.advance(by: .seconds(1))
        #expect(breaker.state == .halfOpen)

        let served = try await sut.loadServed()
        #expect(served.value == 2)
        #expect(breaker.state == .closed)
        let changes = served.events.compactMap { event -> String? in
            guard case .breakerStateChanged(_, let from, let to) = event else { return nil }
            return "\(from)→\(to)"
        }
        #expect(changes == ["open→half-open", "half-open→closed"])
    }

    @Test func aFailedTrialReopensForAnotherBreak() async {
        let breaker = breaker(minimum: 1, pause: .seconds(30))
        let sut = StubLoader<Void, Int>(.failure(TestError())).guarded(by: breaker)
        await attempt(sut)
        clock.advance(by: .seconds(30))
        await attempt(sut)
        #expect(breaker.state == .open)
        let error = await #expect(throws: CircuitOpenError.self) { try await sut.load() }
        #expect(error?.retryAfter == .seconds(30))
    }

    @Test func halfOpenAdmitsOneTrialAtATime() async throws {
        let breaker = breaker(minimum: 1, pause: .seconds(1))
        let base = LoaderSpy<Void, Int>(.failure(TestError()), .success(3), holdsLoads: false)
        await attempt(base.guarded(by: breaker))
        clock.advance(by: .seconds(1))

        let held = LoaderSpy<Void, Int>(.success(3), holdsLoads: true)
        let sut = held.guarded(by: breaker)
        let trial = Task { try await sut.load() }
        try await held.waitForLoads()
        let error = await #expect(throws: CircuitOpenError.self) { try await sut.load() }
        #expect(error?.state == .halfOpen)
        held.complete(with: .success(3))
        #expect(try await trial.value == 3)
        #expect(breaker.state == .closed)
    }

    /// A trial admitted before `reset()` that ends in a later half-open period must not decide it
    /// (here: close the circuit), nor let a second load through beside that period's trial.
    @Test func aTrialAdmittedBeforeReset_neitherDecidesALaterHalfOpenPeriodNorRunsBesideItsTrial() async throws {
        let breaker = breaker(minimum: 1, pause: .seconds(30))
        let failing = StubLoader<Void, Int>(.failure(TestError())).guarded(by: breaker)
        let held = LoaderSpy<Void, Int>(holdsLoads: true)
        let trials = held.guarded(by: breaker)
        await attempt(failing)
        clock.advance(by: .seconds(30))
        let staleTrial = Task { try await trials.load() }
        try await held.waitForLoads(count: 1)

        breaker.reset()
        await attempt(failing)
        #expect(breaker.state == .open)
        clock.advance(by: .seconds(30))
        let trial = Task { try await trials.load() }
        try await held.waitForLoads(count: 2)

        #expect(held.complete(0, with: .success(1)))
        #expect(try await staleTrial.value == 1)
        #expect(breaker.state == .halfOpen, "the stale trial's success does not close this period")
        let refused = await #expect(throws: CircuitOpenError.self) {
            try await StubLoader<Void, Int>(.success(0)).guarded(by: breaker).load()
        }
        #expect(refused?.state == .halfOpen, "one trial at a time")

        #expect(held.complete(1, with: .success(2)))
        #expect(try await trial.value == 2)
        #expect(breaker.state == .closed)
    }

    @Test func outcomesOlderThanTheSamplingWindowAreForgotten() async {
        let breaker = breaker(ratio: 0.5, minimum: 4, window: .seconds(10))
        let failing = StubLoader<Void, Int>(.failure(TestError())).guarded(by: breaker)
        let working = StubLoader<Void, Int>(.success(1)).guarded(by: breaker)
        for _ in 0..<3 { await attempt(failing) }
        clock.advance(by: .seconds(11))
        await attempt(failing)
        for _ in 0..<3 { await attempt(working) }
        #expect(breaker.state == .closed, "1 failure in 4 inside the window, the 3 old ones expired")
    }

    @Test(arguments: [
        (HTTPError.status(code: 404, url: URL(string: "https://x")!, headerFields: [:], body: Data()) as any Error, false),
        (HTTPError.status(code: 429, url: URL(string: "https://x")!, headerFields: [:], body: Data()) as any Error, true),
        (HTTPError.status(code: 503, url: URL(string: "https://x")!, headerFields: [:], body: Data()) as any Error, true),
        (HTTPError.transport(url: URL(string: "https://x")!, reason: "refused", underlying: nil) as any Error, true),
        (CancellationError() as any Error, false),
        (TimeoutError(tier: "x", timeout: .seconds(1)) as any Error, true),
        (TestError() as any Error, true),
    ])
    func whichErrorsCountAsFailures(error: any Error, counts: Bool) {
        #expect(CircuitBreakerPolicy.countsAsFailure(error) == counts)
    }

    @Test func clientErrorsAndCancellationNeverOpenIt() async throws {
        let breaker = breaker(minimum: 1)
        let notFound = HTTPError.status(code: 404, url: url, headerFields: [:], body: Data())
        await attempt(StubLoader<Void, Int>(.failure(notFound)).guarded(by: breaker))
        let held = LoaderSpy<Void, Int>(.success(1), holdsLoads: true)
        let task = Task { try await held.guarded(by: breaker).load() }
        try await held.waitForLoads()
        task.cancel()
        _ = try? await task.value
        #expect(breaker.state == .closed)
    }

    @Test func isolateHoldsItOpenUntilReset() async throws {
        let breaker = breaker()
        let base = LoaderSpy<Void, Int>(.success(1))
        let sut = base.guarded(by: breaker)
        breaker.isolate()
        clock.advance(by: .seconds(3600))
        let error = await #expect(throws: CircuitOpenError.self) { try await sut.load() }
        #expect(error?.state == .isolated)
        #expect(base.loadCount == 0)
        breaker.reset()
        #expect(try await sut.load() == 1)
    }

    @Test("a watcher of states() cancelled while a transition is yielded to it: neither waits for the other, 1,000 times")
    func aWatcherCancelledWhileATransitionIsYielded_neverDeadlocks() async throws {
        let breaker = breaker()
        let rounds = 1_000
        let finished = Locked(0)
        try await withWaitTimeout(.seconds(50), {
            for _ in 0..<rounds {
                let states = breaker.states()
                let watcher = Task { for await _ in states {} }
                await raceOnThreads({ for step in 0..<8 { if step % 2 == 0 { breaker.isolate() } else { breaker.reset() } } }, { watcher.cancel() })
                // Out of time (the bound cancelled this): the threads may be stuck, do not wait for them.
                try Task.checkCancellation()
                await watcher.value
                finished.withLock { $0 += 1 }
            }
        }, timedOut: { timeout in
            WaitTimeoutError(awaited: "\(rounds) rounds of transitions while a watcher is cancelled", observed: "\(finished.withLock { $0 }) finished", timeout: timeout)
        })
        #expect(finished.withLock { $0 } == rounds)
        #expect(breaker.state == .closed)
    }

    @Test func statesStreamTheCurrentStateThenEveryChange() async throws {
        let breaker = breaker(minimum: 1, pause: .seconds(5))
        let stream = breaker.states()
        await attempt(StubLoader<Void, Int>(.failure(TestError())).guarded(by: breaker))
        clock.advance(by: .seconds(5))
        await attempt(StubLoader<Void, Int>(.success(1)).guarded(by: breaker))
        breaker.isolate()
        breaker.reset()
        var seen: [CircuitState] = []
        for await state in stream {
            seen.append(state)
            if seen.count == 6 { break }
        }
        #expect(seen == [.closed, .open, .halfOpen, .closed, .isolated, .closed])
    }

    @Test func oneBreakerGuardsSeveralLoaders() async {
        let breaker = breaker(minimum: 2)
        let feed = StubLoader<Void, Int>(.failure(TestError())).guarded(by: breaker)
        let posts = LoaderSpy<Void, Int>(.success(1))
        await attempt(feed)
        await attempt(feed)
        await attempt(posts.guarded(by: breaker))
        #expect(posts.loadCount == 0, "the host is down for every loader behind the breaker")
    }

    @Test func describesItselfInTheChain() {
        let sut = StubLoader<Void, Int>(.success(1), name: "remote").guarded(by: breaker())
        #expect("\(sut)" == "guarded(by: api, 50% of ≥4 in 10s, break 30s)\n└── remote")
    }

    @Test func aWatcherSeesTheCurrentStateThenEveryTransitionInOrderUnderConcurrency() async throws {
        // Many tasks force the state back and forth while watchers subscribe: each watcher must see
        // the state it started from, then only changes (never one state twice in a row), ending at
        // the breaker's last state.
        for _ in 0..<20 {
            let (streams, final) = await race()
            // The breaker is gone, so each stream ends after what it buffered.
            for stream in streams {
                var seen: [CircuitState] = []
                for await state in stream { seen.append(state) }
                #expect(!seen.isEmpty)
                #expect(seen.last == final, "\(seen)")
                #expect(zip(seen, seen.dropFirst()).allSatisfy { $0 != $1 }, "\(seen)")
            }
        }
    }

    /// Isolates and resets one breaker from 8 tasks at once, each subscribing half-way.
    private func race() async -> ([AsyncStream<CircuitState>], CircuitState) {
        let breaker = breaker(minimum: 1)
        let streams = Locked<[AsyncStream<CircuitState>]>([])
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    for step in 0..<50 {
                        if step == 25 { streams.withLock { $0.append(breaker.states()) } }
                        if (worker + step) % 2 == 0 { breaker.isolate() } else { breaker.reset() }
                    }
                }
            }
        }
        return (streams.withLock { $0 }, breaker.state)
    }
}
