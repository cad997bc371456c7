import Foundation

/// Collects the ``LoadEvent``s of one load. Strata's operators report through their
/// ``LoadContext`` (``LoadContext/record(_:)``); a loader of your own calls
/// ``LoadRecorder/record(_:)``, which reaches the same recorders through the task's context.
///
/// Recorders nest: an observing operator (``Loader/logged(to:level:failureLevel:)``, ``Loader/metered(_:metricsFactory:)``, …)
/// installs its own for the part of the chain it wraps, and every event also reaches the recorders
/// outside it.
public struct LoadRecorder: Sendable {
    /// Everything a recorder holds, behind one lock in one allocation: the links are set once, the
    /// events appended as the load goes. The first event is kept apart, so a load that records one
    /// (a cache hit) allocates no array.
    @usableFromInline
    struct State: Sendable {
        /// The recorder of the enclosing load, which also receives every event.
        let parent: LoadRecorder?
        /// Called with each event as it happens (an observing operator logs or counts it at once),
        /// with the environment of the load that made the recorder: so an operator's callback is
        /// made once, when the operator is built, not for every load.
        let onEvent: (@Sendable (LoadEvent, LoadEnvironment) -> Void)?
        /// Called when the load sends a non-idempotent request (a coalesced flight stops being shared).
        let onWrite: (@Sendable () -> Void)?
        let environment: LoadEnvironment
        var first: LoadEvent?
        var rest: [LoadEvent] = []

        mutating func append(_ event: LoadEvent) {
            if first == nil { first = event } else { rest.append(event) }
        }
    }

    @usableFromInline let state: InlinableLocked<State>

    @usableFromInline
    init(
        parent: LoadRecorder?, environment: LoadEnvironment,
        onEvent: (@Sendable (LoadEvent, LoadEnvironment) -> Void)? = nil, onWrite: (@Sendable () -> Void)? = nil
    ) {
        state = InlinableLocked { State(parent: parent, onEvent: onEvent, onWrite: onWrite, environment: environment) }
    }

    /// The events recorded so far, in order.
    @usableFromInline
    package var events: [LoadEvent] {
        state.withLock { state in state.first.map { [$0] + state.rest } ?? [] }
    }

    /// The provenance of the value served and whether the load left its first tier, read without
    /// copying the events (see ``LoadReport/leftFirstTier``).
    @usableFromInline
    var summary: (provenance: Provenance?, leftFirstTier: Bool) {
        state.withLock { state in
            guard let first = state.first else { return (nil, false) }
            if state.rest.isEmpty {
                if case .served(let provenance) = first { return (provenance, false) }
            }
            let events = [first] + state.rest
            return (servingProvenance(in: events), events.contains { $0.leavesFirstTier })
        }
    }

    /// Appends `event` here and in every enclosing recorder.
    @usableFromInline
    func deliver(_ event: LoadEvent) {
        var next: LoadRecorder? = self
        while let recorder = next {
            let (onEvent, environment, parent) = recorder.state.withLock { state in
                state.append(event)
                return (state.onEvent, state.environment, state.parent)
            }
            onEvent?(event, environment)
            next = parent
        }
    }

    /// Calls `onWrite` of this recorder and every enclosing one.
    func noteWrite() {
        var next: LoadRecorder? = self
        while let recorder = next {
            let (onWrite, parent) = recorder.state.withLock { ($0.onWrite, $0.parent) }
            onWrite?()
            next = parent
        }
    }

    /// Whether `other` is this recorder (copies of a recorder share its state).
    @usableFromInline
    func isSame(as other: LoadRecorder?) -> Bool {
        state.buffer === other?.state.buffer
    }
}
