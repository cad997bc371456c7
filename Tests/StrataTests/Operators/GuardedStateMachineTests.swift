import Testing
@testable import Strata

/// The breaker's decisions, event by event: no clock, no tasks, no lock.
@Suite("CircuitBreakerStateMachine")
struct GuardedStateMachineTests {
    typealias Machine = CircuitBreakerStateMachine
    let policy = CircuitBreakerPolicy(failureRatio: 0.5, samplingDuration: .seconds(10), minimumThroughput: 4, breakDuration: .seconds(30))
    /// A load admitted in the machine's first period (closed, before anything happened).
    let normal = Machine.Permit(isTrial: false, epoch: 0)

    /// A machine opened at 0 s by four failures.
    func opened() -> Machine {
        var machine = Machine(policy: policy)
        for _ in 0..<3 { #expect(machine.record(false, permit: normal, at: .zero) == nil) }
        #expect(machine.record(false, permit: normal, at: .zero) == .init(from: .closed, to: .open))
        return machine
    }

    @Test func closed_admitsEveryLoad_andOpensAtTheRatioOnceThroughputIsReached() {
        var machine = Machine(policy: policy)
        #expect(machine.admit(at: .zero).0 == .admit(normal))
        #expect(machine.record(true, permit: normal, at: .seconds(1)) == nil)
        #expect(machine.record(false, permit: normal, at: .seconds(1)) == nil)  // 1 of 2: below throughput
        #expect(machine.record(true, permit: normal, at: .seconds(2)) == nil)   // 1 of 3
        #expect(machine.record(false, permit: normal, at: .seconds(2)) == .init(from: .closed, to: .open))  // 2 of 4
        #expect(machine.state == .open)
        #expect(machine.openUntil == .seconds(32))
    }

    @Test func outcomesOlderThanTheWindow_doNotCount() {
        var machine = Machine(policy: policy)
        for _ in 0..<3 { _ = machine.record(false, permit: normal, at: .zero) }
        // 11 s later the three failures have rolled out of the 10 s window.
        #expect(machine.record(false, permit: normal, at: .seconds(11)) == nil)
        #expect(machine.state == .closed)
    }

    @Test func cancelledOrUncountedOutcomes_countAsNeither() {
        var machine = Machine(policy: policy)
        for _ in 0..<10 { #expect(machine.record(nil, permit: normal, at: .zero) == nil) }
        #expect(machine.state == .closed)
    }

    @Test func open_refusesWithTheWait_untilTheBreakIsOver() {
        var machine = opened()
        #expect(machine.admit(at: .seconds(10)).0 == .refuse(state: .open, retryAfter: .seconds(20)))
        #expect(machine.effectiveState(at: .seconds(29)) == .open)
        #expect(machine.effectiveState(at: .seconds(30)) == .halfOpen)
        #expect(machine.state == .open, "the recorded state moves when a load is admitted")
    }

    @Test func afterTheBreak_oneTrialPasses_othersAreRefusedWhileItRuns() {
        var machine = opened()
        let (first, change) = machine.admit(at: .seconds(30))
        #expect(first == .admit(.init(isTrial: true, epoch: machine.epoch)))
        #expect(change == .init(from: .open, to: .halfOpen))
        #expect(machine.admit(at: .seconds(31)) == (.refuse(state: .halfOpen, retryAfter: nil), nil))
    }

    @Test func aSuccessfulTrial_closes_andForgetsTheOldFailures() throws {
        var machine = opened()
        let trial = try #require(permit(&machine, at: .seconds(30)))
        #expect(machine.record(true, permit: trial, at: .seconds(31)) == .init(from: .halfOpen, to: .closed))
        // The four old failures are gone: one new failure does not reopen it.
        let load = try #require(permit(&machine, at: .seconds(31)))
        #expect(machine.record(false, permit: load, at: .seconds(31)) == nil)
        #expect(machine.state == .closed)
    }

    @Test func aFailedTrial_reopensForAnotherBreak() throws {
        var machine = opened()
        let trial = try #require(permit(&machine, at: .seconds(30)))
        #expect(machine.record(false, permit: trial, at: .seconds(31)) == .init(from: .halfOpen, to: .open))
        #expect(machine.openUntil == .seconds(61))
        #expect(machine.admit(at: .seconds(40)).0 == .refuse(state: .open, retryAfter: .seconds(21)))
    }

    @Test func aCancelledTrial_freesTheTrialSlot_andStaysHalfOpen() throws {
        var machine = opened()
        let trial = try #require(permit(&machine, at: .seconds(30)))
        #expect(machine.record(nil, permit: trial, at: .seconds(31)) == nil)
        #expect(machine.state == .halfOpen)
        #expect(machine.admit(at: .seconds(31)).0 == .admit(trial), "the next trial, in the same period")
    }

    @Test func aNormalLoadEndingWhileHalfOpen_changesNothing() {
        var machine = opened()
        _ = machine.admit(at: .seconds(30))   // the trial
        // A load admitted before the circuit opened ends now: it is not the trial.
        #expect(machine.record(false, permit: normal, at: .seconds(31)) == nil)
        #expect(machine.record(true, permit: normal, at: .seconds(31)) == nil)
        #expect(machine.state == .halfOpen)
        #expect(machine.trialInFlight)
    }

    @Test func isolate_refusesEverything_untilReset() {
        var machine = Machine(policy: policy)
        #expect(machine.isolate() == .init(from: .closed, to: .isolated))
        #expect(machine.isolate() == nil, "no change, nothing to announce")
        #expect(machine.admit(at: .seconds(1000)).0 == .refuse(state: .isolated, retryAfter: nil))
        #expect(machine.reset() == .init(from: .isolated, to: .closed))
        #expect(machine.admit(at: .seconds(1000)).0 == .admit(.init(isTrial: false, epoch: machine.epoch)))
    }

    @Test func reset_whileATrialRuns_closes_andTheTrialsEndChangesNothing() throws {
        var machine = opened()
        let trial = try #require(permit(&machine, at: .seconds(30)))
        #expect(machine.reset() == .init(from: .halfOpen, to: .closed))
        #expect(machine.record(false, permit: trial, at: .seconds(31)) == nil)
        #expect(machine.state == .closed)
    }

    /// The permit `admit` hands out at `now`, or `nil` when it refuses.
    func permit(_ machine: inout Machine, at now: Duration) -> Machine.Permit? {
        guard case .admit(let permit) = machine.admit(at: now).0 else { return nil }
        return permit
    }

    /// A trial admitted before `reset()` that ends in a later half-open period must not decide that
    /// period (reopen the circuit on failure, close it on success), nor free the trial slot while that
    /// period's own trial runs (a second trial would run beside it).
    @Test(arguments: [false, true])
    func aTrialAdmittedBeforeReset_doesNotDecideALaterHalfOpenPeriod(staleTrialSucceeds: Bool) throws {
        var machine = opened()
        let stale = try #require(permit(&machine, at: .seconds(30)))
        #expect(stale.isTrial)
        #expect(machine.reset() == .init(from: .halfOpen, to: .closed))
        // It opens again at 31 s, and after the break a new trial runs.
        for _ in 0..<4 {
            let load = try #require(permit(&machine, at: .seconds(31)))
            _ = machine.record(false, permit: load, at: .seconds(31))
        }
        #expect(machine.state == .open)
        let current = try #require(permit(&machine, at: .seconds(61)))
        #expect(current.isTrial)

        #expect(machine.record(staleTrialSucceeds, permit: stale, at: .seconds(62)) == nil, "a stale trial decides nothing")
        #expect(machine.state == .halfOpen)
        #expect(machine.trialInFlight)
        #expect(machine.admit(at: .seconds(62)).0 == .refuse(state: .halfOpen, retryAfter: nil), "one trial at a time")

        #expect(machine.record(true, permit: current, at: .seconds(63)) == .init(from: .halfOpen, to: .closed))
    }

    /// A load admitted while closed, before a `reset()`, does not count in the window after it.
    @Test func aLoadAdmittedBeforeReset_doesNotCountAfterIt() throws {
        var machine = Machine(policy: policy)
        let before = try (0..<4).map { _ in try #require(permit(&machine, at: .zero)) }
        _ = machine.reset()
        for load in before { #expect(machine.record(false, permit: load, at: .seconds(1)) == nil) }
        #expect(machine.state == .closed, "four failures from before the reset")
    }
}
