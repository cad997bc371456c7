import Testing
@testable import Strata

/// The coalescer's decisions, event by event, with plain tokens for waiters: no tasks, no
/// continuations, no lock. Each test is one interleaving, including the racy ones. The leader runs
/// the load in its own task, so it is never a waiter: it leads, then finishes.
@Suite("CoalescedStateMachine")
struct CoalescedStateMachineTests {
    /// Waiters are named tokens.
    typealias Machine = CoalescedStateMachine<String, String>

    /// A machine with a load for "k" led as flight 0.
    func leading() -> Machine {
        var machine = Machine()
        #expect(machine.arrive("k") == .lead(flight: 0))
        return machine
    }

    func isRegistered(_ registration: Machine.Registration) -> Bool {
        if case .registered = registration { return true }
        return false
    }

    func finished(_ machine: inout Machine, key: String = "k", flight: UInt64) -> [String] {
        machine.finish(key: key, flight: flight).map { $0.map(\.waiter).sorted() } ?? []
    }

    @Test func theFirstCallerLeads_othersJoin_andAllGetTheOneOutcome() {
        var machine = leading()
        #expect(machine.arrive("k") == .join(waiter: 0))
        #expect(machine.arrive("k") == .join(waiter: 1))
        #expect(isRegistered(machine.join("a", id: 0, key: "k", isCancelled: false)))
        #expect(isRegistered(machine.join("b", id: 1, key: "k", isCancelled: false)))
        #expect(machine.registrations == 3, "the leader and two joiners")

        #expect(machine.finish(key: "k", flight: 0)?.map(\.waiter) == ["a", "b"], "in the order they joined")
        #expect(machine.inFlightCount == 0)
        #expect(machine.arrive("k") == .lead(flight: 1), "nothing is remembered after a load")
    }

    @Test func aLoadNobodyJoined_answersNobody_andLeavesNothingBehind() {
        var machine = leading()
        #expect(machine.finish(key: "k", flight: 0) == nil)
        #expect(machine.inFlightCount == 0)
    }

    @Test func differentKeys_doNotShare() {
        var machine = Machine()
        #expect(machine.arrive("a") == .lead(flight: 0))
        #expect(machine.arrive("b") == .lead(flight: 1))
        #expect(machine.inFlightCount == 2)
    }

    @Test func aJoinerCancelledBeforeItRegisters_isAnsweredWithCancellationWhenItDoes() {
        var machine = leading()
        #expect(machine.arrive("k") == .join(waiter: 0))
        // Its handler ran before it joined, and found nothing to release.
        #expect(machine.cancel(0, key: "k") == nil)
        guard case .cancelled("late") = machine.join("late", id: 0, key: "k", isCancelled: true) else {
            Issue.record("a cancelled joiner must not wait")
            return
        }
        #expect(finished(&machine, flight: 0).isEmpty)
    }

    @Test func aJoinerWhoseLoadEndedBeforeItRegistered_startsOver() {
        var machine = leading()
        #expect(machine.arrive("k") == .join(waiter: 0))
        #expect(machine.finish(key: "k", flight: 0) == nil)
        guard case .startOver("late") = machine.join("late", id: 0, key: "k", isCancelled: false) else {
            Issue.record("expected to start over")
            return
        }
    }

    @Test func cancellingOneJoiner_releasesIt_andKeepsTheLoadForTheOthers() {
        var machine = leading()
        _ = machine.arrive("k")
        _ = machine.arrive("k")
        _ = machine.join("a", id: 0, key: "k", isCancelled: false)
        _ = machine.join("b", id: 1, key: "k", isCancelled: false)
        #expect(machine.cancel(0, key: "k") == "a")
        #expect(machine.inFlightCount == 1, "the load is its leader's: it goes on")
        #expect(finished(&machine, flight: 0) == ["b"])
    }

    @Test func cancelArrivingAsTheLoadFinishes_answersNobodyTwice() {
        var machine = leading()
        _ = machine.arrive("k")
        _ = machine.join("a", id: 0, key: "k", isCancelled: false)
        #expect(finished(&machine, flight: 0) == ["a"])
        #expect(machine.cancel(0, key: "k") == nil)
    }

    @Test func aWrite_ejectsTheJoiners_andIsNeverJoinedAgain() {
        var machine = leading()
        _ = machine.arrive("k")
        _ = machine.join("a", id: 0, key: "k", isCancelled: false)
        #expect(machine.markWrite(key: "k", flight: 0) == ["a"])
        #expect(machine.markWrite(key: "k", flight: 0).isEmpty, "marked once")
        #expect(machine.arrive("k") == .alone)
        #expect(finished(&machine, flight: 0).isEmpty, "the ejected joiner was answered once, by markWrite")
        #expect(machine.arrive("k") == .lead(flight: 1), "the write is forgotten once it ends")
    }

    @Test func aJoinerRegisteringAfterTheLoadTurnedOutToWrite_startsOver() {
        var machine = leading()
        #expect(machine.arrive("k") == .join(waiter: 0))
        _ = machine.markWrite(key: "k", flight: 0)
        guard case .startOver("late") = machine.join("late", id: 0, key: "k", isCancelled: false) else {
            Issue.record("a write is never joined")
            return
        }
    }

    @Test func aStaleFlightsEnd_doesNotTouchTheNextFlightForTheSameKey() {
        var machine = leading()
        #expect(machine.finish(key: "k", flight: 0) == nil)
        #expect(machine.arrive("k") == .lead(flight: 1))
        _ = machine.arrive("k")
        _ = machine.join("a", id: 0, key: "k", isCancelled: false)
        #expect(machine.finish(key: "k", flight: 0) == nil, "flight 0 already ended")
        #expect(machine.markWrite(key: "k", flight: 0).isEmpty)
        #expect(machine.inFlightCount == 1)
        #expect(finished(&machine, flight: 1) == ["a"])
    }

    /// `LoadsInFlight` resumes `UnsafeContinuation`s: a waiter answered twice would be undefined
    /// behaviour, and one never answered would hang its caller. So, over many random interleavings of
    /// every event (arrivals, joins, finishes, cancellations, writes, on two keys): no waiter is ever
    /// handed out twice, and once every load has finished, every waiter that was stored has been
    /// answered.
    @Test(arguments: 0..<4)
    func randomInterleavings_answerEveryWaiterExactlyOnce(seedBlock: Int) async {
        for run in 0..<250 {
            await Task.yield()  // between seeds: a long synchronous search would hold a cooperative thread
            var random = SplitMix64(seed: UInt64(seedBlock * 1_000 + run))
            var machine = Machine()
            enum Caller { case new, joining(Int, cancelled: Bool), leading(UInt64), waiting(Int), done }
            var callers: [(key: String, state: Caller)] = (0..<6).map { _ in (random.next() % 2 == 0 ? "a" : "b", .new) }
            var answered: [String: Int] = [:]
            var stored: Set<String> = []
            var flights: [(key: String, flight: UInt64)] = []
            func answer(_ waiter: String) { answered[waiter, default: 0] += 1 }
            func finish(_ key: String, _ flight: UInt64) {
                for (_, waiter) in machine.finish(key: key, flight: flight) ?? [] { answer(waiter) }
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
                        case .join(let id): callers[index].state = .joining(id, cancelled: false)
                        case .lead(let flight):
                            flights.append((key, flight))
                            callers[index].state = .leading(flight)
                        }
                    case .joining(let id, let cancelled):
                        let token = "w\(id)"
                        switch machine.join(token, id: id, key: key, isCancelled: cancelled) {
                        case .registered:
                            stored.insert(token)
                            callers[index].state = .waiting(id)
                        case .cancelled(let waiter), .startOver(let waiter):
                            answer(waiter)
                            callers[index].state = .done
                        }
                    case .leading(let flight):
                        // The leader's load ends (its leader finishes it exactly once).
                        finish(key, flight)
                        callers[index].state = .done
                    case .waiting, .done:
                        break
                    }
                case 1:
                    // A stale report of a load's end (a flight that may have ended) answers nobody twice.
                    if let (key, flight) = flights.randomElement(using: &random), flight < machine.nextFlight - 1 {
                        finish(key, flight)
                    }
                case 2:
                    // The caller is cancelled, wherever it is (a cancelled leader still finishes its load).
                    switch callers[index].state {
                    case .joining(let id, _):
                        // The task is marked cancelled first, then its handler runs.
                        callers[index].state = .joining(id, cancelled: true)
                        if let released = machine.cancel(id, key: key) { answer(released) }
                    case .waiting(let id):
                        if let released = machine.cancel(id, key: key) { answer(released) }
                    case .new, .leading, .done: break
                    }
                default:
                    // A load in flight turns out to write.
                    if let (key, flight) = flights.randomElement(using: &random) {
                        for waiter in machine.markWrite(key: key, flight: flight) { answer(waiter) }
                    }
                }
                #expect(answered.values.allSatisfy { $0 == 1 }, "run \(run): a waiter was answered twice: \(answered)")
            }
            // Every leader finishes its load.
            for caller in callers { if case .leading(let flight) = caller.state { finish(caller.key, flight) } }
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
