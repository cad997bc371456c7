import Foundation
import Logging
import Testing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

@Suite("coalesced()")
struct CoalescedTests {
    @Test func oneThousandConcurrentIdenticalLoadsMakeOneCall() async throws {
        let base = LoaderSpy<Int, String>(.success("post 7"), holdsLoads: true)
        let sut = base.coalesced()
        let values = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<1000 { group.addTask { try await sut.load(7) } }
            try await sut.waitForWaiters(count: 1000)
            try await base.waitForLoads(count: 1)
            #expect(base.complete(with: .success("post 7")))
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(values.count == 1000)
        #expect(Set(values) == ["post 7"])
        #expect(base.loadCount == 1)
        #expect(sut.inFlightCount == 0)
    }

    @Test func everyWaiterGetsTheSameError() async throws {
        let base = LoaderSpy<Void, Int>(.success(1), holdsLoads: true)
        let sut = base.coalesced()
        let errors = try await withThrowingTaskGroup(of: (any Error)?.self) { group in
            for _ in 0..<10 {
                group.addTask {
                    do { _ = try await sut.load(); return nil } catch { return error }
                }
            }
            try await sut.waitForWaiters(count: 10)
            try await base.waitForLoads(count: 1)
            #expect(base.complete(with: .failure(TestError("down"))))
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(errors.count == 10)
        #expect(errors.allSatisfy { ($0 as? TestError) == TestError("down") })
        #expect(base.loadCount == 1)
    }

    @Test func differentInputsLoadSeparately() async throws {
        let base = LoaderSpy<Int, Int>(.success(1))
        let sut = base.coalesced()
        async let a = sut.load(1)
        async let b = sut.load(2)
        _ = try await (a, b)
        #expect(Set(base.inputs) == [1, 2])
    }

    @Test func aLaterCallAfterCompletionStartsANewLoad() async throws {
        let base = LoaderSpy<Void, Int>(.success(1), .success(2))
        let sut = base.coalesced()
        #expect(try await sut.load() == 1)
        #expect(try await sut.load() == 2)
        #expect(base.loadCount == 2)
    }

    @Test func aJoinerCancellingLeavesTheSharedLoadRunningForTheOthers() async throws {
        let base = LoaderSpy<Void, Int>(.success(1), holdsLoads: true)
        let sut = base.coalesced()
        let leader = Task { try await sut.load() }
        try await base.waitForLoads(count: 1)
        let leaving = Task { try await sut.load() }
        let staying = Task { try await sut.load() }
        try await sut.waitForWaiters(count: 3)

        leaving.cancel()
        await #expect(throws: CancellationError.self) { try await leaving.value }
        #expect(base.cancelledLoadCount == 0)

        #expect(base.complete(with: .success(4)))
        #expect(try await staying.value == 4)
        #expect(try await leader.value == 4)
        #expect(base.loadCount == 1)
    }

    @Test func cancellingTheLeaderCancelsItsLoad_andTheJoinersStartOverWithANewOne() async throws {
        let base = LoaderSpy<Void, Int>(.success(1), holdsLoads: true)
        let sut = base.coalesced()
        let leader = Task { try await sut.load() }
        try await base.waitForLoads(count: 1)
        let joiner = Task { try await sut.load() }
        try await sut.waitForWaiters(count: 2)

        leader.cancel()
        await #expect(throws: CancellationError.self) { try await leader.value }
        #expect(base.cancelledLoadCount == 1, "the leader's load runs in the leader's task")

        // The joiner was not handed the leader's cancellation: it leads a load of its own.
        try await base.waitForLoads(count: 2)
        #expect(base.complete(1, with: .success(9)))
        #expect(try await joiner.value == 9)
        #expect(sut.inFlightCount == 0)
    }

    @Test func aCancelledLeaderWhoseLoadSucceededAnyway_answersItsJoiners() async throws {
        let gate = Gate()
        let calls = Locked(0)
        let base = ClosureLoader<Void, Int>("remote") {
            await gate.wait()   // does not observe cancellation
            return calls.withLock { $0 += 1; return $0 }
        }
        let sut = base.coalesced()
        let leader = Task { try await sut.load() }
        await gate.waitForWaiters()
        let joiner = Task { try await sut.load() }
        try await sut.waitForWaiters(count: 2)
        leader.cancel()
        gate.open()
        #expect(try await leader.value == 1)
        #expect(try await joiner.value == 1)
        #expect(calls.withLock { $0 } == 1)
    }

    @Test func aCallerCancelledBeforeItJoinsNeverStartsALoad() async throws {
        let base = LoaderSpy<Void, Int>(.success(1))
        let sut = base.coalesced()
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await sut.load()
        }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(base.loadCount == 0)
    }

    @Test func everyWaiterSeesTheSameProvenanceAndJoinersAreMarked() async throws {
        let base = LoaderSpy<Void, Int>(.success(1), holdsLoads: true, name: "remote")
        let sut = base.originating(from: .remote).coalesced()
        let first = Task { try await sut.loadServed() }
        try await base.waitForLoads(count: 1)
        let second = Task { try await sut.loadServed() }
        try await sut.waitForWaiters(count: 2)
        #expect(base.complete(with: .success(3)))

        let (a, b) = try await (first.value, second.value)
        #expect(a.provenance == b.provenance)
        #expect(a.provenance.origin == .remote)
        #expect(a.events.map(\.kind) == ["served"])
        #expect(b.events.map(\.kind) == ["coalesced", "served"])
    }

    @Test(arguments: [false, true])
    func aLoadThatNeverSuspendsIsAnsweredAtOnceAndLeavesNothingBehind(observed: Bool) async throws {
        let base = LoaderSpy<Void, Int>(.success(1), .success(2), name: "memory")
        let sut = base.originating(from: .memory).coalesced()
        if observed {
            let served = try await sut.loadServed()
            #expect(served.value == 1)
            #expect(served.events.map(\.kind) == ["served"])
        } else {
            #expect(try await sut.load() == 1)
        }
        #expect(try await sut.load() == 2)
        #expect(base.loadCount == 2)
        #expect(sut.inFlightCount == 0)
    }

    @Test func anObservingCallerJoiningAnUnobservedLoadGetsTheValueAndTheSharedLoadsEvents() async throws {
        let base = LoaderSpy<Void, Int>(.success(1), holdsLoads: true, name: "remote")
        let sut = base.originating(from: .remote).coalesced()
        let plain = Task { try await sut.load() }
        try await base.waitForLoads(count: 1)
        let observing = Task { try await sut.loadServed() }
        try await sut.waitForWaiters(count: 2)
        #expect(base.complete(with: .success(5)))
        #expect(try await plain.value == 5)
        let served = try await observing.value
        #expect(served.value == 5)
        #expect(served.events.map(\.kind) == ["coalesced", "served"])
        #expect(base.loadCount == 1)
    }

    @Test func describesItselfInTheChain() {
        let sut = StubLoader<Void, Int>(.success(1), name: "remote").coalesced()
        #expect("\(sut)" == "coalesced\n└── remote")
    }

    // MARK: Shared state and priority

    @Test func chainsBuiltWithOneCoalescerShareTheirLoads() async throws {
        let base = LoaderSpy<Int, String>(.success("post"), holdsLoads: true)
        let flights = LoadsInFlight<String>()
        // A chain built anew for each use, as in a computed property or a SwiftUI body.
        func chain() -> CoalescedLoader<LoaderSpy<Int, String>, Int> { base.coalesced(in: flights) }
        let first = Task { try await chain().load(7) }
        try await base.waitForLoads(count: 1)
        let second = Task { try await chain().load(7) }
        try await chain().waitForWaiters(count: 2)
        #expect(base.complete(with: .success("post 7")))
        #expect(try await [first.value, second.value] == ["post 7", "post 7"])
        #expect(base.loadCount == 1)
        #expect(flights.inFlightCount == 0)
    }

    @Test func aSingleResourcesChainsShareOneCoalescer_typedByTheValueAlone() async throws {
        let base = LoaderSpy<Void, String>(.success("feed"), holdsLoads: true)
        let flights = LoadsInFlight<String>()
        // Two chains over the same feed, each built with the shared coalescer, and a keyed chain
        // whose loads are never the feed's.
        let keyed = LoaderSpy<Int, String>(.success("post"))
        let first = Task { try await base.coalesced(in: flights).load() }
        try await base.waitForLoads(count: 1)
        let second = Task { try await base.coalesced(in: flights).load() }
        try await base.coalesced(in: flights).waitForWaiters(count: 2)
        #expect(try await keyed.coalesced(in: flights).load(1) == "post")
        #expect(base.complete(with: .success("feed v2")))
        #expect(try await [first.value, second.value] == ["feed v2", "feed v2"])
        #expect(base.loadCount == 1)
        #expect(keyed.loadCount == 1)
        #expect(flights.inFlightCount == 0)
    }

    @Test func chainsBuiltWithCoalescedEachTimeShareNothing() async throws {
        let base = LoaderSpy<Int, String>(.success("post"))
        async let a = base.coalesced().load(7)
        async let b = base.coalesced().load(7)
        _ = try await (a, b)
        #expect(base.loadCount == 2, "documented: each coalesced() call makes a new coalescer")
    }

    @Test func theSharedLoadRunsInItsLeadersTask_withTheLeadersTaskLocals() async throws {
        let gate = Gate()
        let seen = Locked<[String?]>([])
        let base = ClosureLoader<Void, Int>("remote") {
            await gate.wait()
            seen.withLock { $0.append(LoadEnvironment.current.logger.label) }
            return 1
        }
        let sut = base.coalesced()
        var leaderLogger = Logger(label: "leader")
        leaderLogger.logLevel = .critical
        let leader = Task { try await sut.environment(\.logger, leaderLogger).load() }
        await gate.waitForWaiters()
        let joiner = Task { try await sut.environment(\.logger, Logger(label: "joiner")).load() }
        try await sut.waitForWaiters(count: 2)
        gate.open()
        _ = try await (leader.value, joiner.value)
        #expect(seen.withLock { $0 } == ["leader"], "one load, in the leader's task")
    }

    /// The test kit's wait for callers to register honours its task's cancellation. Cancelled once
    /// waiting (`Task.immediate`) or before it started, it must throw `CancellationError`; a load then
    /// registers, so a wait that ignored cancellation would return normally and fail the test instead
    /// of hanging it.
    @Test(arguments: [true, false])
    func waitForWaiters_cancelled_throwsCancellationError(whileWaiting: Bool) async throws {
        let sut = LoaderSpy<Void, Int>(.success(1)).coalesced()
        let waiting = whileWaiting
            ? Task.immediate { try await sut.waitForWaiters(count: 1) }
            : Task { try await sut.waitForWaiters(count: 1) }
        waiting.cancel()
        _ = try await sut.load()

        let result = await waiting.result

        #expect(throws: CancellationError.self) { try result.get() }
    }

    @Test func waitForWaiters_timingOut_namesWhatItWaitedForAndWhatItSaw() async throws {
        let base = LoaderSpy<Void, Int>(holdsLoads: true)
        let sut = base.coalesced()
        let leader = Task { try await sut.load() }
        try await sut.waitForWaiters(count: 1, timeout: .seconds(600))

        let error = await #expect(throws: WaitTimeoutError.self) {
            try await sut.waitForWaiters(count: 3, timeout: .milliseconds(10))
        }

        #expect(error?.description == "waited 0.01 seconds for 3 callers to register with a coalesced load, "
            + "saw 1 (1 load(s) in flight, 0 caller(s) waiting for them)")
        try await base.waitForLoads(count: 1)
        #expect(base.complete(with: .success(2)))
        #expect(try await leader.value == 2)
    }
}
