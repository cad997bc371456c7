import Testing
@testable import Strata

/// The coalescer's decisions, event by event, with plain tokens for waiters and work: no tasks, no
/// continuations, no lock. Each test is one interleaving, including the racy ones.
@Suite("CoalescerStateMachine")
struct CoalescerStateMachineTests {
    /// Waiters are named tokens, work is a name, outcomes are numbers.
    typealias Machine = CoalescerStateMachine<String, Int, String, String>

    /// A machine with a load for "k" led by waiter 0 (flight 0), its work handed over.
    func leading() -> Machine {
        var machine = Machine()
        #expect(machine.arrive("k") == .lead(waiter: 0, flight: 0))
        guard case .wait(nil) = machine.handOver("work", key: "k", flight: 0) else {
            Issue.record("expected to wait")
            return machine
        }
        return machine
    }

    func isRegistered(_ registration: Machine.Registration, escalating work: String?) -> Bool {
        if case .registered(let escalate) = registration { return escalate == work }
        return false
    }

    @Test func theFirstCallerLeads_othersJoin_andAllGetTheOneOutcome() {
        var machine = leading()
        #expect(isRegistered(machine.leaderWaits("leader", id: 0, key: "k", flight: 0), escalating: nil))
        #expect(machine.arrive("k") == .join(waiter: 1))
        #expect(machine.arrive("k") == .join(waiter: 2))
        #expect(isRegistered(machine.join("a", id: 1, key: "k", priority: .medium), escalating: "work"))
        #expect(isRegistered(machine.join("b", id: 2, key: "k", priority: .medium), escalating: "work"))
        #expect(machine.registrations == 3)

        let answered = machine.finish(key: "k", flight: 0, with: 42)
        #expect(Dictionary(uniqueKeysWithValues: answered.map { ($0.waiter, $0.joined) }) == ["leader": false, "a": true, "b": true])
        #expect(machine.inFlightCount == 0)
        #expect(machine.arrive("k") == .lead(waiter: 3, flight: 1), "nothing is remembered after a load")
    }

    @Test func differentKeys_doNotShare() {
        var machine = Machine()
        #expect(machine.arrive("a") == .lead(waiter: 0, flight: 0))
        #expect(machine.arrive("b") == .lead(waiter: 1, flight: 1))
        #expect(machine.inFlightCount == 2)
    }

    @Test func aLoadThatFinishesBeforeItsLeaderWaits_isTakenAtHandover() {
        var machine = Machine()
        _ = machine.arrive("k")
        // The work ran to its end inside `Task.immediate`, before the leader handed it over.
        #expect(machine.finish(key: "k", flight: 0, with: 7).isEmpty)
        guard case .finished(7) = machine.handOver("work", key: "k", flight: 0) else {
            Issue.record("the leader should take the early outcome")
            return
        }
        #expect(machine.finishedEarly.isEmpty)
    }

    @Test func joinersBeforeTheHandover_raiseThePriorityTheWorkIsEscalatedTo() {
        var machine = Machine()
        _ = machine.arrive("k")
        _ = machine.arrive("k")
        #expect(isRegistered(machine.join("ui", id: 1, key: "k", priority: .high), escalating: nil))
        guard case .wait(let priority) = machine.handOver("work", key: "k", flight: 0) else {
            Issue.record("expected to wait")
            return
        }
        #expect(priority == .high)
    }

    @Test func aJoinerCancelledBeforeItRegisters_isAnsweredWithCancellationWhenItDoes() {
        var machine = leading()
        #expect(machine.arrive("k") == .join(waiter: 1))
        let cancelled = machine.cancel(1, key: "k")
        #expect(cancelled.released == nil && cancelled.abandoned == nil)
        guard case .cancelled("late") = machine.join("late", id: 1, key: "k", priority: .medium) else {
            Issue.record("a cancelled joiner must not wait")
            return
        }
        #expect(machine.unregistered.isEmpty)
    }

    @Test func aJoinerWhoseLoadEndedBeforeItRegistered_startsOver() {
        var machine = leading()
        #expect(machine.arrive("k") == .join(waiter: 1))
        _ = machine.finish(key: "k", flight: 0, with: 1)
        guard case .startOver("late") = machine.join("late", id: 1, key: "k", priority: .medium) else {
            Issue.record("expected to start over")
            return
        }
    }

    @Test func cancellingOneWaiter_releasesIt_andKeepsTheLoadForTheOthers() {
        var machine = leading()
        _ = machine.leaderWaits("leader", id: 0, key: "k", flight: 0)
        _ = machine.arrive("k")
        _ = machine.join("a", id: 1, key: "k", priority: .medium)
        let cancelled = machine.cancel(1, key: "k")
        #expect(cancelled.released?.waiter == "a" && cancelled.released?.joined == true)
        #expect(cancelled.abandoned == nil)
        #expect(machine.finish(key: "k", flight: 0, with: 5).map(\.waiter) == ["leader"])
    }

    @Test func cancellingTheLastWaiter_cancelsTheWork() {
        var machine = leading()
        _ = machine.leaderWaits("leader", id: 0, key: "k", flight: 0)
        _ = machine.arrive("k")
        _ = machine.join("a", id: 1, key: "k", priority: .medium)
        #expect(machine.cancel(0, key: "k").abandoned == nil)
        let last = machine.cancel(1, key: "k")
        #expect(last.released?.waiter == "a")
        #expect(last.abandoned == "work")
        #expect(machine.inFlightCount == 0)
        #expect(machine.finish(key: "k", flight: 0, with: 5).isEmpty, "the abandoned load's end answers nobody")
    }

    @Test func theLeaderCancelledBeforeItWaits_isToldSoWhenItWaits() {
        var machine = leading()
        _ = machine.arrive("k")
        _ = machine.join("a", id: 1, key: "k", priority: .medium)
        #expect(machine.cancel(0, key: "k").released == nil, "the leader was not waiting yet")
        guard case .cancelled("leader") = machine.leaderWaits("leader", id: 0, key: "k", flight: 0) else {
            Issue.record("the leader must not wait after its cancellation")
            return
        }
        #expect(machine.inFlightCount == 1, "the joiner still waits for the load")
    }

    @Test func cancelArrivingAsTheLoadFinishes_answersNobodyTwice() {
        var machine = leading()
        _ = machine.leaderWaits("leader", id: 0, key: "k", flight: 0)
        #expect(machine.finish(key: "k", flight: 0, with: 9).map(\.waiter) == ["leader"])
        let late = machine.cancel(0, key: "k")
        #expect(late.released == nil && late.abandoned == nil)
    }

    @Test func aWrite_ejectsTheJoiners_keepsItsLeader_andIsNeverJoinedAgain() {
        var machine = leading()
        _ = machine.leaderWaits("leader", id: 0, key: "k", flight: 0)
        _ = machine.arrive("k")
        _ = machine.join("a", id: 1, key: "k", priority: .medium)
        #expect(machine.markWrite(key: "k", flight: 0) == ["a"])
        #expect(machine.markWrite(key: "k", flight: 0).isEmpty, "marked once")
        #expect(machine.arrive("k") == .alone)
        #expect(machine.finish(key: "k", flight: 0, with: 1).map(\.waiter) == ["leader"])
    }

    @Test func aStaleFlightsEnd_doesNotTouchTheNextFlightForTheSameKey() {
        var machine = leading()
        _ = machine.leaderWaits("leader", id: 0, key: "k", flight: 0)
        _ = machine.cancel(0, key: "k")                   // abandoned: flight 0 is gone
        #expect(machine.arrive("k") == .lead(waiter: 1, flight: 1))
        #expect(machine.finish(key: "k", flight: 0, with: 1).isEmpty)
        #expect(machine.markWrite(key: "k", flight: 0).isEmpty)
        #expect(machine.inFlightCount == 1)
    }
    /// `Coalescer` resumes `UnsafeContinuation`s: a waiter answered twice would be undefined
    /// behaviour, and one never answered would hang its caller. So, over many random interleavings of
    /// every event (arrivals, handovers, waits, joins, finishes, cancellations, writes, on two keys):
    /// no waiter is ever handed out twice, and once every load has finished, every waiter that was
    /// stored has been answered.
    @Test(arguments: 0..<4)
    func randomInterleavings_answerEveryWaiterExactlyOnce(seedBlock: Int) {
        for run in 0..<250 {
            var random = SplitMix64(seed: UInt64(seedBlock * 1_000 + run))
            var machine = Machine()
            enum Caller { case new, joining(Int), leading(Int, UInt64), leaderReady(Int, UInt64), waiting(Int), done }
            var callers: [(key: String, state: Caller)] = (0..<6).map { _ in (random.next() % 2 == 0 ? "a" : "b", .new) }
            var answered: [String: Int] = [:]
            var stored: Set<String> = []
            var flights: [(key: String, flight: UInt64)] = []
            func answer(_ waiter: String) { answered[waiter, default: 0] += 1 }
            func handle(_ registration: Machine.Registration, token: String, caller: Int) {
                switch registration {
                case .registered:
                    stored.insert(token)
                    callers[caller].state = .waiting(Int(token.dropFirst())!)
                case .resume(let waiter, _), .cancelled(let waiter), .startOver(let waiter):
                    answer(waiter)
                    callers[caller].state = .done
                }
            }
            func cancel(_ id: Int, key: String) {
                let (released, _) = machine.cancel(id, key: key)
                if let released { answer(released.waiter) }
            }
            for _ in 0..<40 {
                let index = Int(random.next() % UInt64(callers.count))
                let key = callers[index].key
                switch random.next() % 4 {
                case 0:
                    // The caller takes its next step.
                    switch callers[index].state {
                    case .new:
                        switch machine.arrive(key) {
                        case .alone: callers[index].state = .done
                        case .join(let id): callers[index].state = .joining(id)
                        case .lead(let id, let flight):
                            flights.append((key, flight))
                            callers[index].state = .leading(id, flight)
                        }
                    case .joining(let id):
                        handle(machine.join("w\(id)", id: id, key: key, priority: .medium), token: "w\(id)", caller: index)
                    case .leading(let id, let flight):
                        switch machine.handOver("work", key: key, flight: flight) {
                        case .finished: callers[index].state = .done
                        case .wait: callers[index].state = .leaderReady(id, flight)
                        }
                    case .leaderReady(let id, let flight):
                        handle(machine.leaderWaits("w\(id)", id: id, key: key, flight: flight), token: "w\(id)", caller: index)
                    case .waiting, .done:
                        break
                    }
                case 1:
                    // A load in flight finishes.
                    if let (key, flight) = flights.randomElement(using: &random) {
                        for (waiter, _) in machine.finish(key: key, flight: flight, with: 1) { answer(waiter) }
                    }
                case 2:
                    // The caller is cancelled, wherever it is.
                    switch callers[index].state {
                    case .joining(let id), .leading(let id, _), .leaderReady(let id, _), .waiting(let id): cancel(id, key: key)
                    case .new, .done: break
                    }
                default:
                    // A load in flight turns out to write.
                    if let (key, flight) = flights.randomElement(using: &random) {
                        for waiter in machine.markWrite(key: key, flight: flight) { answer(waiter) }
                    }
                }
                #expect(answered.values.allSatisfy { $0 == 1 }, "run \(run): a waiter was answered twice: \(answered)")
            }
            // Every load ends.
            for (key, flight) in flights {
                for (waiter, _) in machine.finish(key: key, flight: flight, with: 1) { answer(waiter) }
            }
            #expect(answered.values.allSatisfy { $0 == 1 }, "run \(run): a waiter was answered twice: \(answered)")
            #expect(stored.isSubset(of: Set(answered.keys)), "run \(run): waiters left unanswered: \(stored.subtracting(answered.keys))")
            #expect(machine.inFlightCount == 0)
        }
    }
}

/// A small seeded generator (SplitMix64), so every interleaving can be replayed from its seed.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
