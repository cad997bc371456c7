import Foundation
import Testing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

@Suite("timeout(_:)")
struct TimeoutTests {
    let clock = ManualClock()

    @Test func returnsTheValueWhenTheBaseFinishesInTime() async throws {
        let base = LoaderSpy<Void, Int>(.success(7))
        #expect(try await base.timeout(.seconds(5), clock: clock).load() == 7)
        #expect(clock.sleeperCount == 0, "the deadline timer is cancelled with the load")
    }

    @Test func throwsATypedTimeoutAndCancelsTheBaseAtTheDeadline() async throws {
        let base = LoaderSpy<Void, Int>(.success(7), holdsLoads: true, name: "slow remote")
        let sut = base.timeout(.seconds(5), clock: clock)
        let task = Task { try await sut.loadServed() }
        await base.waitForLoads()
        await clock.waitForSleepers()
        clock.advance(by: .seconds(4))
        #expect(base.cancelledLoadCount == 0, "not before the deadline")
        clock.advance(by: .seconds(1))

        let error = await #expect(throws: TimeoutError.self) { try await task.value }
        #expect(error?.tier == "slow remote")
        #expect(error?.timeout == .seconds(5))
        #expect(error?.description == "slow remote: no result within 5s; the load was cancelled")
        #expect(base.cancelledLoadCount == 1)
    }

    @Test func recordsTheTimeoutAndLetsAFallbackServe() async throws {
        let base = LoaderSpy<Void, Int>(.success(7), holdsLoads: true, name: "slow remote")
        let sut = base.timeout(.seconds(1), clock: clock).fallback(to: ClosureLoader("cache") { 1 }.origin(.disk))
        let task = Task { try await sut.loadServed() }
        await clock.waitForSleepers()
        clock.advance(by: .seconds(1))

        let served = try await task.value
        #expect(served.value == 1)
        #expect(served.provenance.origin == .disk)
        #expect(served.events.map(\.kind) == ["timed_out", "tier_failed", "served"])
    }

    @Test func callerCancellationIsNotATimeout() async throws {
        let base = LoaderSpy<Void, Int>(.success(7), holdsLoads: true)
        let sut = base.timeout(.seconds(5), clock: clock)
        let task = Task { try await sut.load() }
        await base.waitForLoads()
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(base.cancelledLoadCount == 1)
    }

    @Test func aTimeoutIsTransientSoRetryTriesAgain() async throws {
        #expect(RetryPolicy.isTransient(TimeoutError(tier: "x", timeout: .seconds(1))))
        let base = LoaderSpy<Void, Int>(.success(7), holdsLoads: true)
        let sut = base.timeout(.seconds(1), clock: clock).retry(.constant(attempts: 2, delay: .seconds(3)), clock: clock)
        let task = Task { try await sut.load() }
        await base.waitForLoads(count: 1)
        await clock.waitForSleepers()
        clock.advance(by: .seconds(1))          // first attempt times out
        await clock.waitForSleepers()
        clock.advance(by: .seconds(3))          // backoff
        await base.waitForLoads(count: 2)
        #expect(base.complete(1, with: .success(9)))
        #expect(try await task.value == 9)
    }

    @Test func describesItselfInTheChain() {
        let sut = StubLoader<Void, Int>(.success(1), name: "remote").timeout(.milliseconds(1500), clock: clock)
        #expect("\(sut)" == "timeout(1s)\n└── remote")
        #expect(describeLoader(sut) == "remote")
    }
}
