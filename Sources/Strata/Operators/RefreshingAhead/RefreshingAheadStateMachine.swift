import Foundation

/// What ``RefreshingAheadLoader`` decides for a key's cached copy: serve it, serve it and refresh
/// it in the background, or load anew. One background refresh per key at a time; after one fails,
/// none for that key until its fail-safe quiet period ends.
///
/// Pure: no tasks, no clock, no store. Tested alone through seeded random interleavings.
struct RefreshingAheadStateMachine<Key: Hashable & Sendable>: Sendable {
    enum Decision: Equatable, Sendable {
        /// Fresh and young enough: serve it.
        case serve
        /// Fresh but in the last part of its life: serve it, and refresh it in the background.
        case serveAndRefresh
        /// Expired (or nothing cached): load anew.
        case load
    }

    /// The keys with a background refresh running.
    private(set) var refreshing: Set<Key> = []
    /// The keys whose last background refresh failed, and until when none is started for them.
    private(set) var quietUntil: [Key: Date] = [:]

    /// The decision for a copy of `key` that is `age` old, at `now`: expired from `maxAge`, due for
    /// a refresh from `refreshAfter` (< `maxAge`).
    mutating func copyRead(_ key: Key, age: Duration, refreshAfter: Duration, maxAge: Duration, now: Date) -> Decision {
        guard age < maxAge else { return .load }
        guard age >= refreshAfter, !refreshing.contains(key) else { return .serve }
        if let quiet = quietUntil[key] {
            guard now >= quiet else { return .serve }
            quietUntil[key] = nil
        }
        refreshing.insert(key)
        return .serveAndRefresh
    }

    /// The background refresh of `key` ended at `now`; a failure keeps the key quiet for `failSafe`.
    mutating func refreshEnded(_ key: Key, succeeded: Bool, now: Date, failSafe: Duration) {
        guard refreshing.remove(key) != nil else { return }
        quietUntil[key] = succeeded ? nil : now.addingTimeInterval(failSafe.seconds)
    }
}
