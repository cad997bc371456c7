/// The state of a ``CircuitBreaker``.
public enum CircuitState: Sendable, Hashable, CustomStringConvertible {
    /// Loads pass through; outcomes are sampled.
    case closed
    /// Loads fail fast with ``CircuitOpenError`` until the break duration has passed.
    case open
    /// The break is over: one trial load passes through; its outcome closes or reopens the circuit.
    case halfOpen
    /// Held open by ``CircuitBreaker/isolate()`` until ``CircuitBreaker/reset()``.
    case isolated

    public var description: String {
        switch self {
        case .closed: "closed"
        case .open: "open"
        case .halfOpen: "half-open"
        case .isolated: "isolated"
        }
    }
}

/// A load refused by an open circuit, without calling the tier behind it.
public struct CircuitOpenError: Error, Sendable, CustomStringConvertible {
    /// The breaker's name.
    public var breaker: String
    /// Its state when it refused: ``CircuitState/open``, ``CircuitState/isolated``, or
    /// ``CircuitState/halfOpen`` while another load is the trial.
    public var state: CircuitState
    /// How long until the breaker lets a trial through, when known.
    public var retryAfter: Duration?

    public init(breaker: String, state: CircuitState, retryAfter: Duration?) {
        self.breaker = breaker
        self.state = state
        self.retryAfter = retryAfter
    }

    public var description: String {
        let wait = retryAfter.map { ", next trial in \(($0).formattedAge)" } ?? ""
        return "circuit '\(breaker)' is \(state): failing fast\(wait)"
    }
}

/// When a ``CircuitBreaker`` opens and for how long.
public struct CircuitBreakerPolicy: Sendable, CustomStringConvertible {
    /// The share of failed loads in the sampling window that opens the circuit (0…1).
    public var failureRatio: Double
    /// How far back outcomes are counted.
    public var samplingDuration: Duration
    /// The fewest loads in the window before the ratio is judged, so one early failure does not open it.
    public var minimumThroughput: Int
    /// How long the circuit stays open before a trial load is let through.
    public var breakDuration: Duration
    /// Whether an error counts as a failure of the tier. ``CircuitBreakerPolicy/countsAsFailure(_:)`` by default.
    public var isFailure: @Sendable (any Error) -> Bool

    /// - Parameters:
    ///   - failureRatio: opens at this share of failures (default 0.5).
    ///   - samplingDuration: the rolling window outcomes are counted in (default 30 s).
    ///   - minimumThroughput: loads needed in the window before it can open (default 10).
    ///   - breakDuration: how long it stays open (default 30 s).
    ///   - isFailure: which errors count (default: all but cancellation and client errors).
    public init(
        failureRatio: Double = 0.5,
        samplingDuration: Duration = .seconds(30),
        minimumThroughput: Int = 10,
        breakDuration: Duration = .seconds(30),
        isFailure: @escaping @Sendable (any Error) -> Bool = CircuitBreakerPolicy.countsAsFailure
    ) {
        precondition((0...1).contains(failureRatio), "failureRatio is a fraction from 0 to 1")
        precondition(samplingDuration > .zero && breakDuration >= .zero, "the sampling duration must be positive and the break duration not negative")
        precondition(minimumThroughput >= 1, "minimumThroughput must be at least 1")
        self.failureRatio = failureRatio
        self.samplingDuration = samplingDuration
        self.minimumThroughput = minimumThroughput
        self.breakDuration = breakDuration
        self.isFailure = isFailure
    }

    /// The default: every error counts except cancellation and an error that adopts
    /// ``FailureClassifying`` and says it is no outage (an open circuit; HTTP 4xx other than 408 and
    /// 429: the server answered, the request was wrong).
    public static func countsAsFailure(_ error: any Error) -> Bool {
        if error is CancellationError { return false }
        return (error as? any FailureClassifying)?.countsAsOutage ?? true
    }

    public var description: String {
        "\(Int((failureRatio * 100).rounded()))% of ≥\(minimumThroughput) in \(samplingDuration.formattedAge), break \(breakDuration.formattedAge)"
    }
}

/// Stops calling a failing tier for a while, so a ``Loader/fallingBack(to:)`` after it answers at once and
/// the tier gets time to recover.
///
/// Closed → open when, within ``CircuitBreakerPolicy/samplingDuration``, at least
/// ``CircuitBreakerPolicy/minimumThroughput`` loads finished and the failed share reached
/// ``CircuitBreakerPolicy/failureRatio``. Open → half-open after ``CircuitBreakerPolicy/breakDuration``;
/// half-open lets **one** trial through: success closes, failure reopens. Cancelled loads count as neither.
///
/// One breaker can guard several loaders (everything that calls one host). Its ``state`` can be read at
/// any time, watched with ``states()``, and forced with ``isolate()`` and ``reset()``.
/// Time comes from the injected clock.
public final class CircuitBreaker<C: Clock>: Sendable where C.Duration == Duration {
    /// The name used in errors, events and chain trees.
    public let name: String
    /// When it opens and for how long.
    public let policy: CircuitBreakerPolicy
    let clock: C
    private let start: C.Instant
    private let machine: Locked<Machine>

    /// Ten buckets make the window roll in tenths of the sampling duration.
    private static var bucketCount: Int { 10 }

    /// - Parameters:
    ///   - name: used in errors, events and chain trees.
    ///   - policy: when it opens and for how long.
    ///   - clock: measures the window and the break; a `ManualClock` in tests.
    public init(name: String = "circuit", policy: CircuitBreakerPolicy = CircuitBreakerPolicy(), clock: C) {
        self.name = name
        self.policy = policy
        self.clock = clock
        self.start = clock.now
        self.machine = Locked(Machine(buckets: Array(repeating: Bucket(), count: Self.bucketCount)))
    }

    deinit {
        // Ends every ``states()`` stream: no change can come any more.
        let watchers = machine.withLock { machine in
            defer { machine.watchers = [:] }
            return machine.watchers
        }
        for continuation in watchers.values { continuation.finish() }
    }

    /// The current state (an open circuit whose break is over reads as half-open).
    public var state: CircuitState {
        let now = elapsed()
        return machine.withLock { $0.effectiveState(at: now) }
    }

    /// A stream of states: the current one first, then every change, each once and in order, until
    /// the consumer stops iterating or the breaker is released. (An open circuit whose break is over is reported half-open when
    /// the next load is admitted.)
    public func states() -> AsyncStream<CircuitState> {
        let (stream, continuation) = AsyncStream.makeStream(of: CircuitState.self, bufferingPolicy: .unbounded)
        // Registered and given the current state under the lock every transition takes, and every
        // transition is yielded under it too: a watcher sees the state it started from, then each
        // change once, in order.
        let id = machine.withLock { machine in
            let id = machine.nextWatcher
            machine.nextWatcher += 1
            machine.watchers[id] = continuation
            // The recorded state, not the effective one: an open circuit whose break is over
            // reports half-open when the next load is admitted, as a change.
            continuation.yield(machine.state)
            return id
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.machine.withLock { $0.watchers.removeValue(forKey: id) }
        }
        return stream
    }

    /// Holds the circuit open until ``reset()``: every load fails fast (maintenance, a known outage).
    public func isolate() {
        let change = machine.withLock { $0.transition(to: .isolated) }
        publish(change)
    }

    /// Closes the circuit and forgets the sampled outcomes.
    public func reset() {
        let change = machine.withLock { machine -> (CircuitState, CircuitState)? in
            machine.buckets = Array(repeating: Bucket(), count: Self.bucketCount)
            machine.trialInFlight = false
            return machine.transition(to: .closed)
        }
        publish(change)
    }

    // MARK: Admission and outcomes

    /// Whether a load that was admitted is the half-open trial.
    struct Permit: Sendable {
        var isTrial: Bool
    }

    /// Admits a load, or throws ``CircuitOpenError``.
    func admit() throws -> Permit {
        let now = elapsed()
        let (result, change) = machine.withLock { machine -> (Result<Permit, CircuitOpenError>, (CircuitState, CircuitState)?) in
            var change: (CircuitState, CircuitState)?
            if machine.state == .open, let until = machine.openUntil, now >= until {
                change = machine.transition(to: .halfOpen)
            }
            switch machine.state {
            case .closed:
                return (.success(Permit(isTrial: false)), change)
            case .halfOpen where !machine.trialInFlight:
                machine.trialInFlight = true
                return (.success(Permit(isTrial: true)), change)
            case .halfOpen:
                return (.failure(CircuitOpenError(breaker: name, state: .halfOpen, retryAfter: nil)), change)
            case .open:
                let wait = machine.openUntil.map { $0 - now }
                return (.failure(CircuitOpenError(breaker: name, state: .open, retryAfter: wait)), change)
            case .isolated:
                return (.failure(CircuitOpenError(breaker: name, state: .isolated, retryAfter: nil)), change)
            }
        }
        publish(change)
        return try result.get()
    }

    /// Records how an admitted load ended: `true` success, `false` failure, `nil` neither (cancelled,
    /// or an error the policy does not count).
    func record(_ succeeded: Bool?, permit: Permit) {
        let now = elapsed()
        let change = machine.withLock { machine -> (CircuitState, CircuitState)? in
            if permit.isTrial {
                machine.trialInFlight = false
                guard machine.state == .halfOpen, let succeeded else { return nil }
                if succeeded {
                    machine.buckets = Array(repeating: Bucket(), count: Self.bucketCount)
                    return machine.transition(to: .closed)
                }
                machine.openUntil = now + policy.breakDuration
                return machine.transition(to: .open)
            }
            guard let succeeded, machine.state == .closed else { return nil }
            let index = bucketIndex(at: now)
            let slot = Int(index % Int64(Self.bucketCount))
            if machine.buckets[slot].index != index { machine.buckets[slot] = Bucket(index: index) }
            if succeeded { machine.buckets[slot].successes += 1 } else { machine.buckets[slot].failures += 1 }
            guard !succeeded else { return nil }
            let live = machine.buckets.filter { $0.index > index - Int64(Self.bucketCount) }
            let failures = live.reduce(0) { $0 + $1.failures }
            let total = live.reduce(0) { $0 + $1.successes + $1.failures }
            guard total >= policy.minimumThroughput,
                  Double(failures) >= policy.failureRatio * Double(total) else { return nil }
            machine.openUntil = now + policy.breakDuration
            return machine.transition(to: .open)
        }
        publish(change)
    }

    private func elapsed() -> Duration {
        start.duration(to: clock.now)
    }

    private func bucketIndex(at elapsed: Duration) -> Int64 {
        let width = policy.samplingDuration / Self.bucketCount
        return Int64((elapsed / width).rounded(.down))
    }

    /// Records a change as a load event (the watchers were told under the lock, in `transition`).
    private func publish(_ change: (CircuitState, CircuitState)?) {
        guard let (from, to) = change else { return }
        LoadRecorder.record(.breakerStateChanged(breaker: name, from: from, to: to))
    }

    private struct Bucket: Sendable {
        var index: Int64 = .min
        var successes = 0
        var failures = 0
    }

    private struct Machine: Sendable {
        var state: CircuitState = .closed
        var openUntil: Duration?
        var trialInFlight = false
        var buckets: [Bucket]
        var watchers: [Int: AsyncStream<CircuitState>.Continuation] = [:]
        var nextWatcher = 0

        func effectiveState(at now: Duration) -> CircuitState {
            if state == .open, let openUntil, now >= openUntil { return .halfOpen }
            return state
        }

        mutating func transition(to next: CircuitState) -> (CircuitState, CircuitState)? {
            guard next != state else { return nil }
            defer { state = next }
            if next != .open { openUntil = nil }
            // Yielding only buffers the value (the stream is unbounded); no consumer code runs here.
            for continuation in watchers.values { continuation.yield(next) }
            return (state, next)
        }
    }
}

extension CircuitBreaker: CustomStringConvertible {
    public var description: String { "CircuitBreaker(\(name), \(policy))" }
}

/// Guards its base loader with a ``CircuitBreaker``; built by ``Loader/guarded(by:)``.
///
/// While the circuit is open, loads throw ``CircuitOpenError`` at once without calling the base, so a
/// ``Loader/fallingBack(to:)`` after it serves the next tier immediately.
public struct CircuitBreakerLoader<Base: Loader, C: Clock>: Loader where C.Duration == Duration {
    public typealias Input = Base.Input
    public typealias Output = Base.Output

    public let base: Base
    /// The breaker guarding `base` (read its ``CircuitBreaker/state``, or ``CircuitBreaker/isolate()`` it).
    public let breaker: CircuitBreaker<C>

    public func load(_ input: Input) async throws -> Output {
        let permit: CircuitBreaker<C>.Permit
        do {
            permit = try breaker.admit()
        } catch {
            LoadRecorder.record(.breakerRejected(breaker: breaker.name))
            throw error
        }
        do {
            let value = try await base.load(input)
            breaker.record(true, permit: permit)
            return value
        } catch {
            let counts = !(error is CancellationError) && !Task.isCancelled && breaker.policy.isFailure(error)
            breaker.record(counts ? false : nil, permit: permit)
            throw error
        }
    }
}

extension CircuitBreakerLoader: LoaderDescribing {
    public var loaderNode: LoaderNode {
        LoaderNode(label: "guarded(by: \(breaker.name), \(breaker.policy))", children: [base.chainNode])
    }
}

extension Loader {
    /// Guards this loader with `breaker`, which may be shared with other loaders.
    ///
    /// ```swift
    /// let breaker = CircuitBreaker(name: "api", policy: .init(failureRatio: 0.5, breakDuration: .seconds(30)),
    ///                              clock: ContinuousClock())
    /// let feed = remote.guarded(by: breaker).fallingBack(to: staleLocal)
    /// ```
    public func guarded<C: Clock>(by breaker: CircuitBreaker<C>) -> CircuitBreakerLoader<Self, C> {
        CircuitBreakerLoader(base: self, breaker: breaker)
    }

    /// Guards this loader with a new breaker of its own, on the continuous clock.
    public func guarded(
        by policy: CircuitBreakerPolicy = CircuitBreakerPolicy(), name: String = "circuit"
    ) -> CircuitBreakerLoader<Self, ContinuousClock> {
        CircuitBreakerLoader(base: self, breaker: CircuitBreaker(name: name, policy: policy, clock: ContinuousClock()))
    }
}
