/// The decisions of a ``CircuitBreaker``, as a value: no lock, no clock, no tasks.
///
/// Each event (a load asks to be admitted, an admitted load ends, someone isolates or resets the
/// breaker) is a `mutating` method that takes the time (the breaker's elapsed time) and returns what
/// to do: admit or refuse, and the state change to announce, if any. ``CircuitBreaker`` holds one under
/// its lock, calls it there, and carries out the returned action (yields the change to its watchers,
/// records it as a load event, throws the refusal). The machine is tested on its own, event by event.
///
/// Time is cut into periods: each change of state, and each ``reset()``, starts a new one (its
/// ``epoch``). A permit carries the epoch it was admitted in, and its outcome counts only in that
/// period: a trial admitted before a reset, or a load admitted before the circuit opened, that ends
/// later neither decides the period it ends in nor frees its trial slot.
struct CircuitBreakerStateMachine: Sendable {
    /// A change of state to announce.
    struct Transition: Sendable, Equatable {
        var from: CircuitState
        var to: CircuitState
    }

    /// An admitted load: whether it is the half-open trial, and the period it was admitted in.
    struct Permit: Sendable, Equatable {
        var isTrial: Bool
        /// The ``CircuitBreakerStateMachine/epoch`` it was admitted in; its outcome is ignored once
        /// the machine has moved on to another.
        var epoch: UInt64
    }

    /// What to do with a load that asks to pass.
    enum Admission: Sendable, Equatable {
        /// Let it through (as the trial when half-open).
        case admit(Permit)
        /// Refuse it with ``CircuitOpenError`` in this state, with the wait until the next trial.
        case refuse(state: CircuitState, retryAfter: Duration?)
    }

    /// Outcomes in one tenth of the sampling duration.
    private struct Bucket: Sendable {
        var index: Int64 = .min
        var successes = 0
        var failures = 0
    }

    /// Ten buckets make the window roll in tenths of the sampling duration.
    static var bucketCount: Int { 10 }

    let failureRatio: Double
    let samplingDuration: Duration
    let minimumThroughput: Int
    let breakDuration: Duration

    /// The recorded state (an open circuit whose break is over stays `open` until a load is admitted).
    private(set) var state: CircuitState = .closed
    /// When an open circuit lets a trial through, in elapsed time.
    private(set) var openUntil: Duration?
    /// Whether the half-open trial is running.
    private(set) var trialInFlight = false
    /// The current period: advanced by every change of state and every ``reset()``.
    private(set) var epoch: UInt64 = 0
    private var buckets = Array(repeating: Bucket(), count: bucketCount)

    init(policy: CircuitBreakerPolicy) {
        failureRatio = policy.failureRatio
        samplingDuration = policy.samplingDuration
        minimumThroughput = policy.minimumThroughput
        breakDuration = policy.breakDuration
    }

    /// The state as callers see it at `now`: an open circuit whose break is over reads half-open.
    func effectiveState(at now: Duration) -> CircuitState {
        if state == .open, let openUntil, now >= openUntil { return .halfOpen }
        return state
    }

    /// A load asks to pass at `now`.
    mutating func admit(at now: Duration) -> (Admission, Transition?) {
        var transition: Transition?
        if state == .open, let until = openUntil, now >= until {
            transition = move(to: .halfOpen)
        }
        switch state {
        case .closed:
            return (.admit(Permit(isTrial: false, epoch: epoch)), transition)
        case .halfOpen where !trialInFlight:
            trialInFlight = true
            return (.admit(Permit(isTrial: true, epoch: epoch)), transition)
        case .halfOpen:
            return (.refuse(state: .halfOpen, retryAfter: nil), transition)
        case .open:
            return (.refuse(state: .open, retryAfter: openUntil.map { $0 - now }), transition)
        case .isolated:
            return (.refuse(state: .isolated, retryAfter: nil), transition)
        }
    }

    /// An admitted load ended at `now`: `true` succeeded, `false` failed, `nil` neither (cancelled, or
    /// an error the policy does not count). A permit from an earlier period changes nothing.
    mutating func record(_ succeeded: Bool?, permit: Permit, at now: Duration) -> Transition? {
        // Admitted before a reset or a change of state: it says nothing about this period, and the
        // trial slot it held (if any) was freed when its period ended.
        guard permit.epoch == epoch else { return nil }
        if permit.isTrial {
            trialInFlight = false
            guard state == .halfOpen, let succeeded else { return nil }
            if succeeded {
                clearOutcomes()
                return move(to: .closed)
            }
            openUntil = now + breakDuration
            return move(to: .open)
        }
        guard let succeeded, state == .closed else { return nil }
        let index = bucketIndex(at: now)
        let slot = Int(index % Int64(Self.bucketCount))
        if buckets[slot].index != index { buckets[slot] = Bucket(index: index) }
        if succeeded { buckets[slot].successes += 1 } else { buckets[slot].failures += 1 }
        guard !succeeded else { return nil }
        let live = buckets.filter { $0.index > index - Int64(Self.bucketCount) }
        let failures = live.reduce(0) { $0 + $1.failures }
        let total = live.reduce(0) { $0 + $1.successes + $1.failures }
        guard total >= minimumThroughput, Double(failures) >= failureRatio * Double(total) else { return nil }
        openUntil = now + breakDuration
        return move(to: .open)
    }

    /// Holds the circuit open until ``reset()``.
    mutating func isolate() -> Transition? {
        move(to: .isolated)
    }

    /// Closes the circuit, forgets the sampled outcomes, and starts a new period (even when closed
    /// already), so no load admitted before counts.
    mutating func reset() -> Transition? {
        clearOutcomes()
        let change = move(to: .closed)
        if change == nil { epoch += 1 }  // closed already: a new period all the same
        return change
    }

    private mutating func clearOutcomes() {
        buckets = Array(repeating: Bucket(), count: Self.bucketCount)
    }

    private func bucketIndex(at elapsed: Duration) -> Int64 {
        Int64((elapsed / (samplingDuration / Self.bucketCount)).rounded(.down))
    }

    /// Moves to `next`, starting a new period (no trial runs in it yet), and returns the change.
    private mutating func move(to next: CircuitState) -> Transition? {
        guard next != state else { return nil }
        defer { state = next }
        if next != .open { openUntil = nil }
        trialInFlight = false
        epoch += 1
        return Transition(from: state, to: next)
    }
}
