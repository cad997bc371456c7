import Foundation
import Testing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

@Suite("timingOut(after:)")
struct TimingOutTests {
    let clock = ManualClock()

    @Test func returnsTheValueWhenTheBaseFinishesInTime() async throws {
        let base = LoaderSpy<Void, Int>(.success(7))
        #expect(try await base.timingOut(after: .seconds(5)).environment(\.clock, clock).load() == 7)
        #expect(clock.sleeperCount == 0, "the deadline timer is cancelled with the load")
    }

    @Test func throwsATypedTimeoutAndCancelsTheBaseAtTheDeadline() async throws {
        let base = LoaderSpy<Void, Int>(.success(7), holdsLoads: true, name: "slow remote")
        let sut = base.timingOut(after: .seconds(5)).environment(\.clock, clock)
        let task = Task { try await sut.loadServed() }
        try await base.waitForLoads()
        try await clock.waitForSleepers()
        clock.advance(by: .seconds(4))
        // The deadline timer still sleeps: `advance` wakes a due sleeper before it returns, so this
        // fails at once if the deadline were 4 s or less.
        #expect(clock.sleeperCount == 1, "not before the deadline")
        clock.advance(by: .seconds(1))

        let error = await #expect(throws: TimeoutError.self) { try await task.value }
        #expect(error?.tier == "slow remote")
        #expect(error?.timeout == .seconds(5))
        #expect(error?.description == "slow remote: no result within 5s; the load was cancelled")
        #expect(base.cancelledLoadCount == 1)
    }

    @Test func recordsTheTimeoutAndLetsAFallbackServe() async throws {
        let base = LoaderSpy<Void, Int>(.success(7), holdsLoads: true, name: "slow remote")
        let sut = base.timingOut(after: .seconds(1)).environment(\.clock, clock).fallingBack(to: ClosureLoader("cache") { 1 }.originating(from: .disk))
        let task = Task { try await sut.loadServed() }
        try await clock.waitForSleepers()
        clock.advance(by: .seconds(1))

        let served = try await task.value
        #expect(served.value == 1)
        #expect(served.provenance.origin == .disk)
        #expect(served.events.map(\.kind) == ["timed_out", "tier_failed", "served"])
    }

    @Test func callerCancellationIsNotATimeout() async throws {
        let base = LoaderSpy<Void, Int>(.success(7), holdsLoads: true)
        let sut = base.timingOut(after: .seconds(5)).environment(\.clock, clock)
        let task = Task { try await sut.load() }
        try await base.waitForLoads()
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(base.cancelledLoadCount == 1)
    }

    @Test func aTimeoutIsTransientSoRetryTriesAgain() async throws {
        #expect(RetryPolicy.isTransient(TimeoutError(tier: "x", timeout: .seconds(1))))
        let base = LoaderSpy<Void, Int>(.success(7), holdsLoads: true)
        let sut = base.timingOut(after: .seconds(1)).environment(\.clock, clock).retrying(.constant(attempts: 2, delay: .seconds(3))).environment(\.clock, clock)
        let task = Task { try await sut.load() }
        try await base.waitForLoads(count: 1)
        try await clock.waitForSleepers()
        clock.advance(by: .seconds(1))          // first attempt times out
        try await clock.waitForSleepers()
        clock.advance(by: .seconds(3))          // backoff
        try await base.waitForLoads(count: 2)
        #expect(base.complete(1, with: .success(9)))
        #expect(try await task.value == 9)
    }

    @Test func abandonsWorkThatIgnoresCancellationAndThrowsOnTime() async throws {
        // A load that ignores cancellation (as a read blocked in `flock` would) until released.
        let gate = Gate()
        let finished = Locked(false)
        let base = ClosureLoader<Void, Int>("stuck file") {
            await gate.wait()
            finished.withLock { $0 = true }
            return 7
        }
        let sut = base.timingOut(after: .seconds(5)).environment(\.clock, clock)
        let task = Task { try await sut.load() }
        await gate.waitForWaiters()
        try await clock.waitForSleepers()
        clock.advance(by: .seconds(5))

        let error = await #expect(throws: TimeoutError.self) { try await task.value }
        #expect(error?.timeout == .seconds(5))
        #expect(!finished.withLock { $0 }, "the error came while the work was still blocked")
        gate.open()    // the abandoned work ends in the background; its result is discarded
    }

    @Test func describesItselfInTheChain() {
        let sut = StubLoader<Void, Int>(.success(1), name: "remote").timingOut(after: .milliseconds(1500)).environment(\.clock, clock)
        #expect("\(sut)" == "timingOut(after: 1s)\n└── remote")
        #expect(sut.chainSummary == "remote")
    }
}

/// Blocks its waiters, ignoring cancellation, until opened.
final class Gate: Sendable {
    private struct State: Sendable {
        var isOpen = false
        var waiters: [CheckedContinuation<Void, Never>] = []
        var arrivals = CountWaiters()
    }

    private let state = Locked(State())

    func wait() async {
        await withCheckedContinuation { continuation in
            let open = state.withLock { state -> Bool in
                if state.isOpen { return true }
                state.waiters.append(continuation)
                state.arrivals.resumeReached(state.waiters.count)
                return false
            }
            if open { continuation.resume() }
        }
    }

    /// Suspends until `count` tasks wait at the gate.
    func waitForWaiters(count: Int = 1) async {
        await withCheckedContinuation { continuation in
            state.withLock { $0.arrivals.wait(for: count, current: $0.waiters.count, continuation: continuation) }
        }
    }

    func open() {
        let waiters = state.withLock { state in
            state.isOpen = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }
}
