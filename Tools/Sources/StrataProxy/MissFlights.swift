/// Which request of this process fetches a key, and which wait for it: a pure state machine.
///
/// The first request for a key leads; later ones follow until the leader finishes, then read the
/// cache again. A follower never takes the leader's answer itself: the answer may be private, or
/// vary on fields the follower's request has other values for, and only the cache's own rules
/// (``SharedCachePolicy``) say whether the follower may have it.
struct MissFlights: Sendable {
    enum Role: Sendable, Hashable {
        /// Fetch the key, then call ``finish(_:)``.
        case lead
        /// Wait for the leader; `id` names this wait for ``finish(_:)`` and ``abandon(_:key:)``.
        case follow(id: Int)
    }

    private var waiting: [String: [Int]] = [:]
    private var nextID = 0

    /// Keys being fetched now.
    var keysInFlight: Int { waiting.count }

    /// A request for `key` arrives.
    mutating func begin(_ key: String) -> Role {
        guard waiting[key] != nil else {
            waiting[key] = []
            return .lead
        }
        nextID += 1
        waiting[key, default: []].append(nextID)
        return .follow(id: nextID)
    }

    /// The leader of `key` finished: returns the followers to wake. The next request leads again.
    mutating func finish(_ key: String) -> [Int] {
        waiting.removeValue(forKey: key) ?? []
    }

    /// Follower `id` of `key` stopped waiting (its request was cancelled). `false` when it was no
    /// longer waiting (the leader finished first).
    mutating func abandon(_ id: Int, key: String) -> Bool {
        guard let index = waiting[key]?.firstIndex(of: id) else { return false }
        waiting[key]?.remove(at: index)
        return true
    }
}
