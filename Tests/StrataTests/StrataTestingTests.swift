import Foundation
import Testing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

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
        await clock.waitForSleepers(count: 2)

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
        await clock.waitForSleepers(count: 1)
        sleeper.cancel()
        await #expect(throws: CancellationError.self) { try await sleeper.value }
        #expect(clock.sleeperCount == 0)
    }

    @Test func sleepUntilAPassedDeadline_returnsAtOnce() async throws {
        let clock = ManualClock()
        clock.advance(by: .seconds(5))
        try await clock.sleep(until: clock.now.advanced(by: .seconds(-1)))
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
        await spy.waitForLoads(count: 1)
        #expect(spy.complete(0, with: .success(7)))
        #expect(try await task.value == 7)
        #expect(!spy.complete(0, with: .success(8)), "a load completes once")
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
}
