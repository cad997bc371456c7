/// How one load ended, as seen by an observing operator (``Loader/logged(to:level:failureLevel:)``,
/// ``Loader/metered(_:metricsFactory:)``, ``Loader/traced(_:tracer:)``, ``Loader/tracked(by:)``).
public struct LoadReport: Sendable, CustomStringConvertible {
    /// How a load ended.
    public enum Outcome: Sendable {
        /// A value was served; where it came from and how old it was.
        case served(Provenance)
        /// The load failed with this error.
        case failed(any Error)
        /// The caller's task was cancelled.
        case cancelled
    }

    /// The observed loader, as named in the chain (its ``LoaderNode/summary``).
    public var loader: String
    /// How it ended.
    public var outcome: Outcome
    /// How long it took, on the operator's clock.
    public var duration: Duration
    /// Everything recorded inside the observed loader while it ran, in order.
    public var events: [LoadEvent]

    public init(loader: String, outcome: Outcome, duration: Duration, events: [LoadEvent]) {
        self.loader = loader
        self.outcome = outcome
        self.duration = duration
        self.events = events
    }

    /// The provenance when a value was served.
    public var provenance: Provenance? {
        if case .served(let provenance) = outcome { return provenance }
        return nil
    }

    /// Whether a cache (memory, disk, a shared cache) served the value.
    public var isCacheHit: Bool {
        switch provenance?.origin {
        case .memory, .disk, .sharedCache: true
        default: false
        }
    }

    /// Whether the load went past its first tier: a tier failed and the chain moved on, a retry, a
    /// timeout, an open circuit failing fast, a revalidation, a cache write, a circuit changing
    /// state. A load served by its first tier with nothing else recorded (a cache hit) did not;
    /// ``Loader/logged(to:level:failureLevel:)`` logs such a load at `debug` and the others at its level.
    public var leftFirstTier: Bool {
        events.contains { $0.leavesFirstTier }
    }

    /// How many retries happened inside the observed loader.
    public var retryCount: Int {
        events.reduce(0) { count, event in
            if case .retrying = event { return count + 1 }
            return count
        }
    }

    /// The outcome as one word: `served`, `failed` or `cancelled` (a metric dimension, a log field).
    public var outcomeName: String {
        switch outcome {
        case .served: "served"
        case .failed: "failed"
        case .cancelled: "cancelled"
        }
    }

    /// One line for logs and analytics, secrets redacted (``Redaction``).
    public var description: String {
        let line = switch outcome {
        case .served(let provenance): "\(loader): served from \(provenance) in \(duration.formattedAge)"
        case .failed(let error): "\(loader): failed after \(duration.formattedAge): \(error)"
        case .cancelled: "\(loader): cancelled after \(duration.formattedAge)"
        }
        return Redaction.redactingSecrets(in: line)
    }

    /// This report with every string it carries (the loader, tier, store and key names) passed through
    /// ``Redaction/redactingSecrets(in:)``. Errors stay the original values, so a tracker can still
    /// classify them by type; describe one with `Redaction.redactingSecrets(in: "\(error)")`.
    func redactingStrings() -> LoadReport {
        let outcome: Outcome = switch self.outcome {
        case .served(let provenance): .served(provenance.redactingTier())
        case .failed, .cancelled: self.outcome
        }
        return LoadReport(
            loader: Redaction.redactingSecrets(in: loader), outcome: outcome, duration: duration,
            events: events.map { $0.redactingStrings() })
    }
}

extension Provenance {
    func redactingTier() -> Provenance {
        var copy = self
        copy.tier = Redaction.redactingSecrets(in: tier)
        return copy
    }
}

extension LoadEvent {
    /// The event with its names (tiers, stores, keys, breakers) redacted; errors kept as they are.
    func redactingStrings() -> LoadEvent {
        func redact(_ text: String) -> String { Redaction.redactingSecrets(in: text) }
        return switch self {
        case .served(let provenance): .served(provenance.redactingTier())
        case .tierFailed(let tier, let error): .tierFailed(tier: redact(tier), error: error)
        case .cacheWritten(let store, let key): .cacheWritten(store: redact(store), key: redact(key))
        case .cacheWriteFailed(let store, let key, let error): .cacheWriteFailed(store: redact(store), key: redact(key), error: error)
        case .retrying(let tier, let attempt, let delay, let error): .retrying(tier: redact(tier), attempt: attempt, delay: delay, error: error)
        case .timedOut(let tier, let after): .timedOut(tier: redact(tier), after: after)
        case .breakerStateChanged(let breaker, let from, let to): .breakerStateChanged(breaker: redact(breaker), from: from, to: to)
        case .breakerRejected(let breaker): .breakerRejected(breaker: redact(breaker))
        case .coalesced(let tier): .coalesced(tier: redact(tier))
        case .revalidated(let store, let key): .revalidated(store: redact(store), key: redact(key))
        case .refreshStarted(let tier, let key): .refreshStarted(tier: redact(tier), key: redact(key))
        case .servedStale(let tier, let reason): .servedStale(tier: redact(tier), reason: reason)
        case .waitedForFleetLock(let key, let waited, let outcome): .waitedForFleetLock(key: redact(key), waited: waited, outcome: outcome)
        }
    }
}

/// Runs one load of `base` under a recorder of its own, timing it on `clock`; `onEvent` sees each
/// event as it happens. The shared core of the observing operators.
@inlinable
func observeLoad<Base: Loader, C: Clock>(
    _ base: Base, _ input: Base.Input, in context: LoadContext, loader: String, clock: C,
    onEvent: (@Sendable (LoadEvent, LoadEnvironment) -> Void)? = nil
) async -> (result: Result<Base.Output, any Error>, report: LoadReport) where C.Duration == Duration {
    let start = clock.now
    let recorder = context.recorder(onEvent: onEvent)
    // In this frame, not a helper's: an async call of its own costs a frame on every observed load.
    let result: Result<Base.Output, any Error>
    do {
        result = .success(try await base.load(input, in: context.recording(into: recorder)))
    } catch {
        result = .failure(error)
    }
    return (result, LoadReport(loader: loader, result: result, duration: start.duration(to: clock.now), events: recorder.events))
}

/// The immediate answer of `base` (``Loader/loadImmediately(_:in:)``) observed like a load: its
/// events are held back until it answers, then reach the context's recorders; `nil` when it does
/// not answer, with nothing reported. The caller reports the load through
/// ``LoadContext/afterImmediateAnswer(_:)``. The synchronous twin of `observeLoad`.
@inlinable
func observeImmediately<Base: Loader>(
    _ base: Base, _ input: Base.Input, in context: LoadContext, loader: String
) -> (value: Base.Output, report: LoadReport)? {
    let clock = ContinuousClock()
    let start = clock.now
    let held = LoadRecorder(parent: nil, environment: context.environment)
    guard let value = base.loadImmediately(input, in: context.recording(into: held)) else { return nil }
    let events = held.events
    context.replay(events)
    let result: Result<Base.Output, any Error> = .success(value)
    return (value, LoadReport(loader: loader, result: result, duration: start.duration(to: clock.now), events: events))
}

extension LoadReport {
    /// The report of a load of `loader` that ended with `result` after `duration`, having recorded
    /// `events`.
    @usableFromInline
    init<Output>(loader: String, result: Result<Output, any Error>, duration: Duration, events: [LoadEvent]) {
        let outcome: LoadReport.Outcome
        switch result {
        case .success:
            outcome = .served(servingProvenance(in: events) ?? Provenance(origin: .unknown, tier: loader))
        case .failure(let error) where error is CancellationError || Task.isCancelled:
            outcome = .cancelled
        case .failure(let error):
            outcome = .failed(error)
        }
        self.init(loader: loader, outcome: outcome, duration: duration, events: events)
    }
}
