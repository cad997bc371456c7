import Foundation
@_spi(StrataInternals) import Strata
import StrataOutbox

/// The decisions of one ``Mutation``, without tasks: which call's outcome the state shows. Calls may
/// overlap (a button tapped twice); the state follows the latest call, and a reset forgets every
/// call made before it. The tests drive it directly.
///
/// Invariants (checked after every step by the seeded interleaving tests):
/// - the state shows the latest call not reset, or idle;
/// - `pending` exactly while that call has not ended;
/// - an outcome of an older call, or of a call made before a reset, never changes the state.
package struct MutationStateMachine<Variables: Sendable, Output: Sendable>: Sendable {
    package enum Event: Sendable {
        case started(call: UInt64, Variables, at: Date)
        case succeeded(call: UInt64, Output)
        case failed(call: UInt64, QueryError)
        case queued(call: UInt64, OutboxEntry)
        case reset
    }

    /// The call the state shows, if any.
    package private(set) var shownCall: UInt64?
    /// Failed calls in a row (0 after a success or a reset).
    private var failures = 0
    /// Last: the only stored property whose layout depends on the generic types, so the others sit
    /// at offsets known to unspecialised code.
    package private(set) var snapshot = MutationSnapshot<Variables, Output>()

    package init() {}

    /// Applies `event`; returns whether the snapshot changed.
    @discardableResult
    package mutating func handle(_ event: Event) -> Bool {
        switch event {
        case .started(let call, let variables, let at):
            // Numbers rise: a call started is always the latest.
            guard shownCall.map({ call > $0 }) ?? true else { return false }
            shownCall = call
            snapshot = MutationSnapshot(
                status: .pending, error: nil, queued: nil, submittedAt: at, failureCount: failures, variables: variables, data: nil)
            return true
        case .succeeded(let call, let output):
            guard end(call, failed: false) else { return false }
            snapshot.status = .succeeded
            snapshot.data = output
            return true
        case .failed(let call, let error):
            guard end(call, failed: true) else { return false }
            snapshot.status = .failed
            snapshot.error = error
            return true
        case .queued(let call, let entry):
            guard end(call, failed: false) else { return false }
            snapshot.status = .queued
            snapshot.queued = entry
            return true
        case .reset:
            // Calls not ended go on; their outcomes are not shown (a call is numbered and started
            // in one step, so no call made before now can start after it).
            let changed = snapshot.status != .idle
            failures = 0
            snapshot = MutationSnapshot()
            shownCall = nil
            return changed
        }
    }

    /// Whether `call`'s outcome is shown (it is the latest call, still pending); if so, counts the
    /// failures in a row.
    private mutating func end(_ call: UInt64, failed: Bool) -> Bool {
        guard call == shownCall, snapshot.status == .pending else { return false }
        failures = failed ? failures + 1 : 0
        snapshot.failureCount = failures
        return true
    }
}

/// What a ``Mutation`` shows: the latest call's variables, whether it runs, and how it ended.
public struct MutationSnapshot<Variables: Sendable, Output: Sendable>: Sendable {
    /// Where the latest call is.
    public enum Status: String, Sendable, Hashable {
        /// No call yet, or reset since.
        case idle
        /// The call runs (its optimistic values are shown).
        case pending
        /// The server answered: ``MutationSnapshot/data`` holds its answer.
        case succeeded
        /// It failed: ``MutationSnapshot/error`` says why; its optimistic values were rolled back.
        case failed
        /// Offline, it was handed to the outbox (``MutationSnapshot/queued``), which delivers it
        /// when the network returns.
        case queued
    }

    public var status: Status = .idle
    /// Why the latest call failed.
    public var error: QueryError?
    /// The outbox entry the latest call was handed to, when it was queued offline.
    public var queued: OutboxEntry?
    /// When the latest call started.
    public var submittedAt: Date?
    /// Calls that failed in a row.
    public var failureCount = 0
    /// What the latest call was made with. (The generic fields last: the others sit at offsets
    /// known to unspecialised code.)
    public var variables: Variables?
    /// The server's answer to the latest call, once it succeeded.
    public var data: Output?

    /// Whether the latest call runs.
    public var isPending: Bool { status == .pending }
}
