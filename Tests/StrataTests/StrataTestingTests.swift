import Foundation
import Testing
@testable @_spi(StrataInternals) import Strata
@testable import StrataTesting

@Suite("ManualClock")
struct ManualClockTests {
    @Test func wallClockMovesWithAdvance() {
        let clock = ManualClock(startDate: referenceDate)
        #expect(clock.wallClock() == referenceDate)
        clock.advance(by: .seconds(90))
        #expect(clock.date == referenceDate.addingTimeInterval(90))
        #expect(clock.now.offset == .seconds(90))
    }

    @Test func sleepers_wakeOnlyWhenTheirDeadlinePasses() async throws {
        let clock = ManualClock()
        let woke = Locked<[Int]>([])
        let first = Task { try await clock.sleep(for: .seconds(10)); woke.withLock { $0.append(10) } }
        let second = Task { try await clock.sleep(for: .seconds(20)); woke.withLock { $0.append(20) } }
        try await clock.waitForSleepers(count: 2)

        clock.advance(by: .seconds(10))
        try await first.value
        #expect(woke.withLock { $0 } == [10])
        #expect(clock.sleeperCount == 1)

        clock.advance(by: .seconds(10))
        try await second.value
        #expect(woke.withLock { $0 } == [10, 20])
    }

    @Test func cancelledSleeper_throwsCancellationError() async throws {
        let clock = ManualClock()
        let sleeper = Task { try await clock.sleep(for: .seconds(60)) }
        try await clock.waitForSleepers(count: 1)
        sleeper.cancel()
        await #expect(throws: CancellationError.self) { try await sleeper.value }
        #expect(clock.sleeperCount == 0)
    }

    /// A cancellation landing after `sleep`'s cancellation check but before the sleeper registers
    /// must not be lost (the sleeper would sleep forever). The seam cancels the sleeping task exactly
    /// in that window; right after the registration step it advances the clock, so a sleeper that
    /// registered anyway wakes normally and the test fails instead of hanging.
    @Test func sleepCancelledBetweenItsCheckAndItsRegistration_throwsCancellation() async throws {
        let clock = ManualClock()
        clock.registrationHooks.withLock { hooks in
            hooks.before = { withUnsafeCurrentTask { $0?.cancel() } }
            hooks.after = { [weak clock] in clock?.advance(by: .seconds(60)) }
        }
        let sleeper = Task { try await clock.sleep(for: .seconds(60)) }

        let result = await sleeper.result

        #expect(throws: CancellationError.self) { try result.get() }
        #expect(clock.sleeperCount == 0)
    }

    @Test func sleepUntilAPassedDeadline_returnsAtOnce() async throws {
        let clock = ManualClock()
        clock.advance(by: .seconds(5))
        try await clock.sleep(until: clock.now.advanced(by: .seconds(-1)))
    }

    /// `waitForSleepers` honours its task's cancellation instead of waiting until the sleepers come
    /// (forever if they never do). Cancelled once waiting (`Task.immediate` registers the wait before
    /// it returns) or before it started, it must throw `CancellationError`; a sleeper then comes, so a
    /// wait that ignored cancellation would return normally and fail the test instead of hanging it.
    @Test(arguments: [true, false])
    func waitForSleepers_cancelled_throwsCancellationError(whileWaiting: Bool) async throws {
        let clock = ManualClock()
        let waiting = whileWaiting
            ? Task.immediate { try await clock.waitForSleepers(count: 1) }
            : Task { try await clock.waitForSleepers(count: 1) }
        waiting.cancel()
        let sleeper = Task { try await clock.sleep(for: .seconds(1)) }

        let result = await waiting.result

        #expect(throws: CancellationError.self) { try result.get() }
        sleeper.cancel()
        _ = await sleeper.result
    }

    /// The ordering the test above leaves to the scheduler, fixed: the sleeper is there before the
    /// cancelled wait starts, so a wait that read the sleepers before its cancellation returned.
    @Test func waitForSleepers_cancelledBeforeItStarts_throwsEvenWhenTheSleepersAreThere() async throws {
        let clock = ManualClock()
        let sleeper = Task { try await clock.sleep(for: .seconds(1)) }
        try await clock.waitForSleepers(count: 1)
        let waiting = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await clock.waitForSleepers(count: 1)
        }
        await #expect(throws: CancellationError.self) { try await waiting.value }
        sleeper.cancel()
        _ = await sleeper.result
    }

    @Test func waitForSleepers_cancelledWhileWaitingWithATimeout_throwsCancellationErrorAtOnce() async throws {
        let clock = ManualClock()
        let waiting = Task.immediate { try await clock.waitForSleepers(count: 1, timeout: .seconds(3600)) }
        waiting.cancel()
        await #expect(throws: CancellationError.self) { try await waiting.value }
    }

    @Test func waitForSleepers_timingOut_namesWhatItWaitedForAndWhatItSaw() async throws {
        let clock = ManualClock()
        let sleeper = Task { try await clock.sleep(for: .seconds(30)) }
        try await clock.waitForSleepers(count: 1, timeout: .seconds(600))

        let error = await #expect(throws: WaitTimeoutError.self) {
            try await clock.waitForSleepers(count: 2, timeout: .milliseconds(10))
        }

        #expect(error?.description
            == "waited 0.01 seconds for 2 sleepers on ManualClock, saw 1 (now 0.0 seconds; sleeping until: 30.0 seconds)")
        #expect(clock.sleeperCount == 1, "the sleeper is untouched")
        sleeper.cancel()
        _ = await sleeper.result
    }

    @Test func waitForSleepers_withATimeout_returnsWhenTheSleepersCome() async throws {
        let clock = ManualClock()
        let waiting = Task { try await clock.waitForSleepers(count: 2, timeout: .seconds(600)) }
        let sleepers = (0..<2).map { _ in Task { try await clock.sleep(for: .seconds(5)) } }
        try await waiting.value
        clock.advance(by: .seconds(5))
        for sleeper in sleepers { try await sleeper.value }
    }

    /// A wait for one component's sleeper is not ended by another component's timer on the same clock
    /// (an outbox's backoff): it names which sleepers it means, by label or deadline.
    @Test func waitForSleepers_matching_ignoresOtherSleepersOnTheClock() async throws {
        let clock = ManualClock()
        let otherTimer = Task { try await ManualClock.$sleeperLabel.withValue("outbox") { try await clock.sleep(for: .seconds(300)) } }
        try await clock.waitForSleepers(count: 1)

        let error = await #expect(throws: WaitTimeoutError.self) {
            try await clock.waitForSleepers(timeout: .milliseconds(10)) { $0.label == "retry" }
        }

        #expect(error?.awaited == "1 sleeper matching the predicate on ManualClock")
        #expect(error?.observed == #"0 (now 0.0 seconds; sleeping until: 300.0 seconds "outbox" (not matching))"#)

        let waiting = Task { try await clock.waitForSleepers { $0.label == "retry" && $0.deadline.offset == .seconds(2) } }
        let retry = Task { try await ManualClock.$sleeperLabel.withValue("retry") { try await clock.sleep(for: .seconds(2)) } }
        try await waiting.value
        #expect(clock.sleepers == [
            .init(deadline: .init(offset: .seconds(2)), since: .init(offset: .zero), label: "retry"),
            .init(deadline: .init(offset: .seconds(300)), since: .init(offset: .zero), label: "outbox"),
        ])
        try await clock.waitForSleepers(count: 1, timeout: .seconds(600)) { $0.deadline == clock.now.advanced(by: .seconds(300)) }

        clock.advance(by: .seconds(2))
        try await retry.value
        otherTimer.cancel()
        _ = await otherTimer.result
    }
}

@Suite("LoaderSpy and LeakTracker")
struct TestKitTests {
    @Test func loaderSpy_usesResultsInOrderAndRepeatsTheLast() async throws {
        let spy = LoaderSpy<Void, Int>(.success(1), .success(2))
        #expect(try await spy.load() == 1)
        #expect(try await spy.load() == 2)
        #expect(try await spy.load() == 2)
        #expect(spy.loadCount == 3)
    }

    @Test func loaderSpy_withoutStubThrowsUnstubbed() async throws {
        await #expect(throws: LoaderSpy<Void, Int>.Unstubbed.self) { try await LoaderSpy<Void, Int>().load() }
    }

    @Test func loaderSpy_heldLoadsCompleteWhenTheTestSays() async throws {
        let spy = LoaderSpy<Void, Int>(holdsLoads: true)
        let task = Task { try await spy.load() }
        try await spy.waitForLoads(count: 1)
        #expect(spy.complete(0, with: .success(7)))
        #expect(try await task.value == 7)
        #expect(!spy.complete(0, with: .success(8)), "a load completes once")
    }

    /// `waitForLoads` must not return once the load has started but before it is held: a `complete`
    /// right after it would find nothing, and the load (and the test) would hang. Many rounds make
    /// that race likely to show at least once; a load left held is cancelled so nothing hangs.
    @Test func loaderSpy_aLoadWaitedForIsAlwaysHeld_soCompleteFindsIt() async throws {
        var missed = 0
        for round in 0..<2_000 {
            let spy = LoaderSpy<Void, Int>(holdsLoads: true)
            let task = Task { try await spy.load() }
            try await spy.waitForLoads(count: 1)
            if spy.complete(0, with: .success(round)) {
                #expect(try await task.value == round)
            } else {
                missed += 1
                task.cancel()
                _ = await task.result
            }
        }
        #expect(missed == 0, "waitForLoads returned before the load was held")
    }

    /// A held load whose task is cancelled before the load is held ends with `CancellationError`
    /// instead of being held forever.
    @Test func loaderSpy_heldLoadCancelledAsItStarts_endsWithCancellation() async throws {
        for _ in 0..<500 {
            let spy = LoaderSpy<Void, Int>(holdsLoads: true)
            let task = Task { try await spy.load() }
            task.cancel()
            try await spy.waitForLoads(count: 1)
            // Bounded: if the load is held despite the cancellation, complete it so the test ends.
            if spy.complete(0, with: .success(1)) {
                Issue.record("a cancelled load was held")
            }
            await #expect(throws: CancellationError.self) { try await task.value }
            #expect(spy.cancelledLoadCount == 1)
        }
    }

    /// `waitForLoads` honours its task's cancellation (see the same test of `ManualClock`).
    @Test(arguments: [true, false])
    func loaderSpy_waitForLoadsCancelled_throwsCancellationError(whileWaiting: Bool) async throws {
        let spy = LoaderSpy<Void, Int>(.success(1))
        let waiting = whileWaiting
            ? Task.immediate { try await spy.waitForLoads(count: 1) }
            : Task { try await spy.waitForLoads(count: 1) }
        waiting.cancel()
        _ = try await spy.load()

        let result = await waiting.result

        #expect(throws: CancellationError.self) { try result.get() }
    }

    @Test func loaderSpy_waitForLoadsTimingOut_namesWhatItWaitedForAndWhatItSaw() async throws {
        let spy = LoaderSpy<Void, Int>(holdsLoads: true, name: "remote")
        let load = Task { try await spy.load() }
        try await spy.waitForLoads(count: 1, timeout: .seconds(600))

        let error = await #expect(throws: WaitTimeoutError.self) {
            try await spy.waitForLoads(count: 2, timeout: .milliseconds(10))
        }

        #expect(error?.description == #"waited 0.01 seconds for 2 loads on LoaderSpy "remote", saw 1 (1 started, 1 held)"#)
        #expect(spy.complete(0, with: .success(3)), "the held load is untouched")
        #expect(try await load.value == 3)
    }

    @Test func leakTracker_reportsObjectsThatOutliveTheTest() throws {
        final class Node { var next: Node? }
        let tracker = LeakTracker()
        do {
            let cycle = Node()
            cycle.next = cycle
            tracker.track(cycle)
            let released = Node()
            tracker.track(released)
        }
        #expect(tracker.leaks.count == 1)
        #expect(throws: LeakError.self) { try tracker.verifyNoLeaks() }
    }

    @Test func withLeakTracking_passesWhenEverythingIsReleased() async throws {
        final class Box {}
        try await withLeakTracking { leaks in
            _ = leaks.track(Box())
        }
    }

    /// An object an unstructured task releases just after the body returns is not a leak. The task
    /// runs on the main actor, like the test, so it cannot run before the check suspends: a check that
    /// never suspended would always report it.
    @MainActor
    @Test func withLeakTracking_doesNotReportAnObjectATaskReleasesJustAfterTheBody() async throws {
        final class Box {}
        try await withLeakTracking { leaks in
            let box = leaks.track(Box())
            Task { @MainActor in withExtendedLifetime(box) {} }
        }
    }

    @Test func withLeakTracking_stillReportsAnObjectNothingReleases() async throws {
        final class Node { var next: Node? }
        let error = await #expect(throws: LeakError.self) {
            try await withLeakTracking(releaseTimeout: .milliseconds(20)) { leaks in
                let cycle = leaks.track(Node())
                cycle.next = cycle
            }
        }
        #expect(error?.leaks.count == 1)
    }

    @Test func withLeakTracking_cancelledWhileWaitingForARelease_throwsCancellationError() async throws {
        final class Node { var next: Node? }
        let tracking = Task {
            try await withLeakTracking(releaseTimeout: .seconds(3600)) { leaks in
                let cycle = leaks.track(Node())
                cycle.next = cycle
            }
        }
        tracking.cancel()
        await #expect(throws: CancellationError.self) { try await tracking.value }
    }
}

@Suite("ConditionWaiters")
struct ConditionWaitersTests {
    struct Counter: Sendable {
        var value = 0
        var waiters = ConditionWaiters<Int>()
    }

    @Test("a waiter cancelled just as its condition comes true: neither side waits for the other, 1,000 times; each wait ends once")
    func aWaiterCancelledAsItIsResumed_neverDeadlocks() async throws {
        // The resume under the owner's lock against the waiter's cancellation handler, which takes
        // that lock while the runtime holds the waiting task's: on threads (`raceOnThreads`).
        let counter = Locked(Counter())
        let rounds = 1_000
        let ended = Locked((satisfied: 0, cancelled: 0))
        try await withWaitTimeout(.seconds(50), {
            for round in 0..<rounds {
                let waiter = Task { try await counter.wait(in: \.waiters, current: { $0.value }, until: { $0 > round }) }
                await raceOnThreads({ counter.withLock { $0.value += 1; $0.waiters.resumeSatisfied(by: $0.value) } }, { waiter.cancel() })
                // Out of time (the bound cancelled this): the threads may be stuck, do not wait for them.
                try Task.checkCancellation()
                switch await waiter.result {
                case .success: ended.withLock { $0.satisfied += 1 }
                case .failure(let error):
                    #expect(error is CancellationError)
                    ended.withLock { $0.cancelled += 1 }
                }
            }
        }, timedOut: { timeout in
            WaitTimeoutError(awaited: "\(rounds) rounds of resuming while a waiter is cancelled", observed: "\(ended.withLock { $0 })", timeout: timeout)
        })
        let counts = ended.withLock { $0 }
        #expect(counts.satisfied + counts.cancelled == rounds)
        #expect(counter.withLock { $0.waiters.isEmpty })
    }
}
