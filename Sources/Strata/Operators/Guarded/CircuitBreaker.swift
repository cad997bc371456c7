/// Stops calling a failing tier for a while, so a ``Loader/fallingBack(to:)`` after it answers at once and
/// the tier gets time to recover.
///
/// Closed → open when, within ``CircuitBreakerPolicy/samplingDuration``, at least
/// ``CircuitBreakerPolicy/minimumThroughput`` loads finished and the failed share reached
/// ``CircuitBreakerPolicy/failureRatio``. Open → half-open after ``CircuitBreakerPolicy/breakDuration``;
/// half-open lets **one** trial through: success closes, failure reopens. Cancelled loads count as neither.
/// A load counts only in the period it was admitted in: one admitted before a ``reset()`` or a change
/// of state that ends afterwards changes nothing (a trial from before a reset cannot decide a later
/// half-open period, nor run beside its trial).
///
/// One breaker can guard several loaders (everything that calls one host). Its ``state`` can be read at
/// any time, watched with ``states()``, and forced with ``isolate()`` and ``reset()``.
///
/// Time comes from the clock given at creation, not from the chain's ``LoadEnvironment``: a breaker
/// outlives every load and may guard several chains, so its window and its break are measured on one
/// clock of its own. ``init(name:policy:)`` uses `ContinuousClock`; tests pass a `ManualClock`.
public final class CircuitBreaker<C: Clock>: Sendable where C.Duration == Duration {
    /// The name used in errors, events and chain trees.
    public let name: String
    /// When it opens and for how long.
    public let policy: CircuitBreakerPolicy
    let clock: C
    private let start: C.Instant
    /// The decisions, and the watchers of ``states()``, under one lock: a transition is decided and
    /// yielded to every watcher in the same critical section, so watchers see changes in order.
    private let storage: Locked<Storage>

    private struct Storage: Sendable {
        var machine: CircuitBreakerStateMachine
        var watchers: [Int: AsyncStream<CircuitState>.Continuation] = [:]
        var nextWatcher = 0

        /// Tells every watcher about `transition`. Yielding runs no consumer code (the streams are
        /// unbounded), but it resumes a consumer waiting in `next()`, which takes the runtime's
        /// lock of that task: so a stream's `onTermination` (which runs inside that task's
        /// cancellation, holding that lock) never takes this one synchronously.
        func announce(_ transition: CircuitBreakerStateMachine.Transition?) {
            guard let transition else { return }
            for continuation in watchers.values { continuation.yield(transition.to) }
        }
    }

    /// - Parameters:
    ///   - name: used in errors, events and chain trees.
    ///   - policy: when it opens and for how long.
    ///   - clock: measures the window and the break; a `ManualClock` in tests.
    public init(name: String = "circuit", policy: CircuitBreakerPolicy = CircuitBreakerPolicy(), clock: C) {
        self.name = name
        self.policy = policy
        self.clock = clock
        self.start = clock.now
        self.storage = Locked(Storage(machine: CircuitBreakerStateMachine(policy: policy)))
    }

    /// A breaker on the continuous clock: the one an app makes.
    ///
    /// ```swift
    /// let api = CircuitBreaker(name: "api")   // one per host, made once
    /// ```
    public convenience init(name: String = "circuit", policy: CircuitBreakerPolicy = CircuitBreakerPolicy()) where C == ContinuousClock {
        self.init(name: name, policy: policy, clock: ContinuousClock())
    }

    deinit {
        // Ends every ``states()`` stream: no change can come any more.
        let watchers = storage.withLock { storage in
            defer { storage.watchers = [:] }
            return storage.watchers
        }
        for continuation in watchers.values { continuation.finish() }
    }

    /// The current state (an open circuit whose break is over reads as half-open).
    public var state: CircuitState {
        let now = elapsed()
        return storage.withLock { $0.machine.effectiveState(at: now) }
    }

    /// A stream of states: the current one first, then every change, each once and in order, until
    /// the consumer stops iterating or the breaker is released. (An open circuit whose break is over
    /// is reported half-open when the next load is admitted.)
    public func states() -> AsyncStream<CircuitState> {
        let (stream, continuation) = AsyncStream.makeStream(of: CircuitState.self, bufferingPolicy: .unbounded)
        // Registered and given the current state under the lock every transition takes: a watcher
        // sees the state it started from, then each change once, in order.
        let id = storage.withLock { storage in
            let id = storage.nextWatcher
            storage.nextWatcher += 1
            storage.watchers[id] = continuation
            // The recorded state, not the effective one: an open circuit whose break is over
            // reports half-open when the next load is admitted, as a change.
            continuation.yield(storage.machine.state)
            return id
        }
        // Removed from a new task: this runs inside the consumer's cancellation, holding the
        // runtime's lock of its task, while a transition may be yielding to it under `storage`'s
        // lock (Swift's rule for cancellation handlers that take locks). A yield to an ended
        // stream before then is dropped.
        continuation.onTermination = { [weak self] _ in
            Task { [weak self] in _ = self?.storage.withLock { $0.watchers.removeValue(forKey: id) } }
        }
        return stream
    }

    /// Holds the circuit open until ``reset()``: every load fails fast (maintenance, a known outage).
    public func isolate() {
        let change = storage.withLock { storage in
            let change = storage.machine.isolate()
            storage.announce(change)
            return change
        }
        publish(change)
    }

    /// Closes the circuit and forgets the sampled outcomes; loads admitted before it no longer count
    /// when they end.
    public func reset() {
        let change = storage.withLock { storage in
            let change = storage.machine.reset()
            storage.announce(change)
            return change
        }
        publish(change)
    }

    // MARK: Admission and outcomes

    typealias Permit = CircuitBreakerStateMachine.Permit

    /// Admits a load, or throws ``CircuitOpenError``.
    func admit(in context: LoadContext) throws -> Permit {
        let now = elapsed()
        let (admission, change) = storage.withLock { storage in
            let (admission, change) = storage.machine.admit(at: now)
            storage.announce(change)
            return (admission, change)
        }
        publish(change, in: context)
        switch admission {
        case .admit(let permit):
            return permit
        case .refuse(let state, let retryAfter):
            throw CircuitOpenError(breaker: name, state: state, retryAfter: retryAfter)
        }
    }

    /// Records how an admitted load ended: `true` success, `false` failure, `nil` neither (cancelled,
    /// or an error the policy does not count).
    func record(_ succeeded: Bool?, permit: Permit, in context: LoadContext) {
        let now = elapsed()
        let change = storage.withLock { storage in
            let change = storage.machine.record(succeeded, permit: permit, at: now)
            storage.announce(change)
            return change
        }
        publish(change, in: context)
    }

    private func elapsed() -> Duration {
        start.duration(to: clock.now)
    }

    /// Records a change as a load event of the load that caused it, if any (the watchers were told
    /// under the lock). `isolate()` and `reset()` come from outside a load: the task's context.
    private func publish(_ change: CircuitBreakerStateMachine.Transition?, in context: LoadContext = .current) {
        guard let change else { return }
        context.record(.breakerStateChanged(breaker: name, from: change.from, to: change.to))
    }
}

extension CircuitBreaker: CustomStringConvertible {
    public var description: String { "CircuitBreaker(\(name), \(policy))" }
}
