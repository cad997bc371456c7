import Foundation

/// What a ``TieredStore`` decides about the copies its memory tier keeps while a ``Backplane``
/// tells it about other nodes' writes: whether an entry read from the shared tier may still be
/// kept in memory when the read ends.
///
/// A read of the shared tier that started before another node's change of the same key arrived
/// may return the value that change replaced; kept in memory, it would be served until the next
/// change. So every change received is numbered, a read remembers the number it started at, and
/// it fills the memory tier only when no change of its key (and no restart of listening) came
/// since.
///
/// Pure: no tasks, no stores. Tests drive it alone through seeded random interleavings.
struct TierCoherence<Key: Hashable & Sendable>: Sendable {
    /// How many changed keys are remembered; past it the memory is reset, and reads that started
    /// before the reset do not fill the memory tier.
    let limit: Int
    /// The number of the last change received (or restart of listening).
    private(set) var generation: UInt64 = 0
    /// The number of the last change received for each recently changed key.
    private(set) var changed: [Key: UInt64] = [:]
    /// The latest store time each recently changed key was told of (a change's time, or this
    /// node's own write's): a local write older than it changes nothing.
    private(set) var newest: [Key: Date] = [:]
    /// The store time of each recently changed key's last change, when that change was a value
    /// written (not a removal, nor a change of unknown time): a read that returns an entry at
    /// least that new holds that value or a later one, and may fill however it overlapped it.
    private(set) var lastSetAt: [Key: Date] = [:]
    /// Reads that started before this number never fill the memory tier.
    private(set) var floor: UInt64 = 0

    init(limit: Int = 10_000) {
        precondition(limit > 0, "TierCoherence: limit must be positive")
        self.limit = limit
    }

    /// A read of the shared tier starts: the number it ends with.
    var readStarted: UInt64 { generation }

    /// Whether a read of `key` that started at `started` may keep its entry in the memory tier:
    /// no change of the key came since it started, or (given the entry's `storedAt`) the key's last
    /// change was a write the entry is at least as new as.
    func mayFill(_ key: Key, readStartedAt started: UInt64, storedAt: Date? = nil) -> Bool {
        guard started >= floor else { return false }
        if (changed[key] ?? 0) <= started { return true }
        guard let storedAt, let set = lastSetAt[key] else { return false }
        return storedAt >= set
    }

    /// Whether a write of `key` stored at `storedAt` is older than a change this node was told of
    /// (or made): it must change nothing, or this node would keep an older version than the fleet.
    func isOutdated(_ key: Key, storedAt: Date) -> Bool {
        newest[key].map { storedAt < $0 } ?? false
    }

    /// Another node changed `key` (or this node wrote it), at `at` when the change says; `setAt`
    /// is the store time of the value the change wrote, when it wrote one (not a removal or an
    /// expiry).
    mutating func changeReceived(_ key: Key, at: Date? = nil, setAt: Date? = nil) {
        generation += 1
        if changed.count >= limit, changed[key] == nil {
            changed = [:]
            newest = [:]
            lastSetAt = [:]
            floor = generation
        }
        changed[key] = generation
        if let at, newest[key].map({ $0 < at }) ?? true { newest[key] = at }
        // Only a write that is the newest change known of the key: an older one arriving late
        // says nothing of what a read returns now.
        if let setAt, let newestKnown = newest[key], setAt >= newestKnown { lastSetAt[key] = setAt } else { lastSetAt[key] = nil }
    }

    /// The backplane (re)started listening: changes may have been missed, so no read that started
    /// before fills the memory tier.
    mutating func listeningStarted() {
        generation += 1
        changed = [:]
        newest = [:]
        lastSetAt = [:]
        floor = generation
    }
}
