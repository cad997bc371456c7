import Foundation

/// Something that happened during one load, as recorded by Strata's loaders.
public enum LoadEvent: Sendable, CustomStringConvertible {
    /// A tier produced the value.
    case served(Provenance)
    /// A tier failed and the chain moved on (or gave up).
    case tierFailed(tier: String, error: any Error)
    /// A value was written to a cache.
    case cacheWritten(store: String, key: String)
    /// Writing to a cache failed; the load itself still succeeded.
    case cacheWriteFailed(store: String, key: String, error: any Error)
    /// A tier failed transiently and is tried again (`attempt` counts from 1) after `delay`.
    case retrying(tier: String, attempt: Int, delay: Duration, error: any Error)
    /// A tier did not finish within its deadline; its work was cancelled.
    case timedOut(tier: String, after: Duration)
    /// A circuit breaker moved from one state to another.
    case breakerStateChanged(breaker: String, from: CircuitState, to: CircuitState)
    /// A circuit breaker refused a load without calling its tier (it is open).
    case breakerRejected(breaker: String)
    /// This load joined an identical load already in flight instead of starting its own.
    case coalesced(tier: String)
    /// The server confirmed a cached entry (HTTP 304 Not Modified) and the entry was re-stamped in
    /// the store without rewriting its value.
    case revalidated(store: String, key: String)
    /// A hit past its refresh point answered at once and started one background refresh of `key`
    /// (``Loader/refreshingAhead(_:in:key:)-(_,_,S.Key)``).
    case refreshStarted(tier: String, key: String)
    /// A stale copy answered the load, and why (``StaleReason``).
    case servedStale(tier: String, reason: StaleReason)
    /// A miss waited for another process holding the key's fleet lock
    /// (``Loader/coalescedAcrossProcesses(in:key:freshness:lock:timeout:pollInterval:)-(_,S.Key,_,_,_,_)``), for
    /// `waited`, and how the wait ended.
    case waitedForFleetLock(key: String, waited: Duration, outcome: FleetLockWait)

    public var description: String {
        switch self {
        case .served(let provenance): "served: \(provenance)"
        case .tierFailed(let tier, let error): "failed: \(tier): \(error)"
        case .cacheWritten(let store, let key): "cached: \(key) in \(store)"
        case .cacheWriteFailed(let store, let key, let error): "cache write failed: \(key) in \(store): \(error)"
        case .retrying(let tier, let attempt, let delay, let error): "retrying: \(tier), attempt \(attempt) in \(delay.formattedAge), after: \(error)"
        case .timedOut(let tier, let after): "timed out: \(tier) after \(after.formattedAge)"
        case .breakerStateChanged(let breaker, let from, let to): "circuit \(breaker): \(from) → \(to)"
        case .breakerRejected(let breaker): "circuit \(breaker) refused the load: failed fast"
        case .coalesced(let tier): "coalesced: joined the load in flight for \(tier)"
        case .revalidated(let store, let key): "revalidated: \(key) in \(store) (304 Not Modified)"
        case .refreshStarted(let tier, let key): "refresh ahead: \(key) from \(tier), in the background"
        case .servedStale(let tier, let reason): "served stale from \(tier): \(reason.explanation)"
        case .waitedForFleetLock(let key, let waited, let outcome):
            "waited \(waited.formattedAge) for the fleet lock of \(key): \(outcome.explanation)"
        }
    }
}

/// Why a stale copy answered a load (``LoadEvent/servedStale(tier:reason:)``).
public enum StaleReason: String, Sendable, Hashable, CaseIterable {
    /// The load did not answer within the soft timeout; it goes on in the background.
    case softTimeout = "soft_timeout"
    /// The load failed.
    case loadFailed = "load_failed"

    var explanation: String {
        switch self {
        case .softTimeout: "the load did not answer within the soft timeout (it goes on)"
        case .loadFailed: "the load failed"
        }
    }
}

/// How a wait for another process's fleet lock ended (``LoadEvent/waitedForFleetLock(key:waited:outcome:)``).
public enum FleetLockWait: String, Sendable, Hashable, CaseIterable {
    /// The holder stored the value: this process read it.
    case filledByHolder = "filled_by_holder"
    /// The holder let go without storing a usable value: this process took the lock and loaded.
    case acquired
    /// The wait reached its timeout: this process loaded anyway.
    case timedOut = "timed_out"

    var explanation: String {
        switch self {
        case .filledByHolder: "the holder stored the value"
        case .acquired: "the holder let go; this process loaded"
        case .timedOut: "timed out; this process loaded anyway"
        }
    }
}

extension LoadEvent {
    /// Whether a load that recorded this event went past its first tier: a tier failed, a retry, a
    /// timeout, a breaker's say, a cache write or a revalidation. A value served and a joined
    /// flight do not (``LoadReport/leftFirstTier``).
    @usableFromInline
    var leavesFirstTier: Bool {
        switch self {
        case .served, .coalesced, .refreshStarted: false
        case .tierFailed, .cacheWritten, .cacheWriteFailed, .retrying, .timedOut, .breakerStateChanged,
             .breakerRejected, .revalidated, .servedStale, .waitedForFleetLock: true
        }
    }
}
