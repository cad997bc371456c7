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
        case .served, .coalesced: false
        case .tierFailed, .cacheWritten, .cacheWriteFailed, .retrying, .timedOut, .breakerStateChanged,
             .breakerRejected, .revalidated: true
        }
    }
}
