import Foundation

/// What a ``TieredStore`` decides about its writes to the shared tier: one write per key at a
/// time, in the order they were made; while the shared tier fails, the last write of each key
/// waits (last write wins) and is sent again when the tier answers, or when the retry is due.
///
/// Pure: no tasks, no clock, no store. The store feeds it events and carries out its actions;
/// tests drive it alone, through seeded random interleavings.
struct SharedTierWrites<Key: Hashable & Sendable, Write: Sendable>: Sendable {
    /// A write to send to the shared tier, numbered in the order the writes were made.
    struct Send: Sendable {
        var key: Key
        var write: Write
        var number: UInt64
        /// Sent again after a failure (or queued while the tier was down): the shared tier may
        /// hold a newer row written by another process since, which it must not replace.
        var isRepair: Bool
    }

    enum Action: Sendable {
        case send(Send)
        /// Try the waiting writes again after this many failures in a row (the store turns it
        /// into a delay).
        case scheduleRetry(afterFailures: Int)
    }

    /// The write each key has on its way to the shared tier.
    private(set) var sending: [Key: Send] = [:]
    /// The last write of each key that waits: behind the one sending, or for the tier to answer.
    private(set) var waiting: [Key: Send] = [:]
    /// Whether the shared tier failed last time it was used (until it answers again).
    private(set) var isDown = false
    /// Failures in a row, for the retry's backoff.
    private(set) var failures = 0
    /// Whether a retry is scheduled.
    private(set) var retryScheduled = false
    private var lastNumber: UInt64 = 0
    /// The most writes that wait (by key); past it the oldest waiting write is forgotten (its
    /// value stays in the memory tier, and a later read or write of the key fills the shared tier
    /// again). `nil`: no limit.
    var maxWaiting: Int?
    /// Waiting writes forgotten past ``maxWaiting``.
    private(set) var forgotten = 0

    enum Event: Sendable {
        /// The app wrote `write` for `key` (the memory tier has it already).
        case written(Key, Write)
        /// The send numbered `number` of `key` ended.
        case sent(Key, number: UInt64, succeeded: Bool)
        /// The shared tier answered something else (a read): it is up.
        case answered
        /// The shared tier failed something else (a read): it is down.
        case failed
        /// The scheduled retry is due.
        case retryDue
    }

    /// The writes that have not reached the shared tier yet (sending or waiting), by key.
    var unsent: Int { Set(sending.keys).union(waiting.keys).count }

    /// The last write of `key` that has not reached the shared tier yet: what a read of the key
    /// answers, since the shared tier holds an older version until it arrives.
    func unsentWrite(of key: Key) -> Write? { (waiting[key] ?? sending[key])?.write }

    /// When a read last tried the shared tier while it was down.
    private(set) var lastProbe: Date?

    /// Whether a read tries the shared tier at `now`: always while it is up; while it is down,
    /// one read per `probeInterval` (its answer brings the tier up again), and the others are
    /// misses at once instead of each paying the tier's connect timeout.
    mutating func readMayTry(now: Date, probeInterval: Duration) -> Bool {
        guard isDown else { return true }
        if let lastProbe, now >= lastProbe, now < lastProbe.addingTimeInterval(probeInterval / .seconds(1)) { return false }
        lastProbe = now
        return true
    }

    mutating func handle(_ event: Event) -> [Action] {
        switch event {
        case .written(let key, let write):
            lastNumber += 1
            let send = Send(key: key, write: write, number: lastNumber, isRepair: isDown)
            // One write per key at a time, and none while the tier is down: it waits, replacing
            // an older one that waited.
            guard sending[key] == nil, !isDown else {
                waiting[key] = send
                if let maxWaiting, waiting.count > maxWaiting,
                   let oldest = waiting.min(by: { $0.value.number < $1.value.number })?.key {
                    waiting[oldest] = nil
                    forgotten += 1
                }
                return isDown ? scheduleRetry() : []
            }
            sending[key] = send
            return [.send(send)]
        case .sent(let key, let number, let succeeded):
            guard let sent = sending[key], sent.number == number else { return [] }
            sending[key] = nil
            if succeeded {
                return cameUp()
            }
            // Failed: it waits, unless a later write of its key waits already; either is sent
            // again once the tier answers, as a repair.
            if waiting[key] == nil { waiting[key] = sent }
            waiting[key]?.isRepair = true
            isDown = true
            failures += 1
            return scheduleRetry()
        case .answered:
            return isDown ? cameUp() : []
        case .failed:
            guard !isDown else { return [] }
            isDown = true
            failures += 1
            return waiting.isEmpty ? [] : scheduleRetry()
        case .retryDue:
            retryScheduled = false
            guard !waiting.isEmpty else { return [] }
            // One try while down: the first waiting key, as a probe; the rest follow when it
            // succeeds. A failed probe schedules the next retry.
            guard isDown else { return sendWaiting() }
            guard sending.isEmpty, let key = waiting.keys.min(by: { waiting[$0]!.number < waiting[$1]!.number }) else { return [] }
            return [.send(startSending(key))]
        }
    }

    /// Forgets the waiting writes and the retry (the store was cleared: they would bring back
    /// what the clear removed). Writes on their way still land.
    mutating func forgetWaiting() {
        waiting = [:]
        retryScheduled = false
    }

    /// The number of the last write made: the writes a clear that starts now forgets.
    var lastWriteNumber: UInt64 { lastNumber }

    /// Forgets the waiting writes numbered `last` or lower: writes made before a clear, which a
    /// send that failed while the clear waited for it put back to wait. Later writes stay.
    mutating func forgetWaiting(numberedAtMost last: UInt64) {
        waiting = waiting.filter { $0.value.number > last }
    }

    /// The tier answered: every waiting write whose key has nothing on its way goes now.
    private mutating func cameUp() -> [Action] {
        isDown = false
        failures = 0
        return sendWaiting()
    }

    private mutating func sendWaiting() -> [Action] {
        let ready = waiting.values.filter { sending[$0.key] == nil }.sorted { $0.number < $1.number }
        return ready.map { .send(startSending($0.key)) }
    }

    private mutating func startSending(_ key: Key) -> Send {
        let send = waiting.removeValue(forKey: key)!
        sending[key] = send
        return send
    }

    private mutating func scheduleRetry() -> [Action] {
        guard !retryScheduled else { return [] }
        retryScheduled = true
        return [.scheduleRetry(afterFailures: max(failures, 1))]
    }
}
