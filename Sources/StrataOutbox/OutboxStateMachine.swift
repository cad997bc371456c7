import Foundation
@_spi(StrataInternals) import Strata

/// Every decision of an ``Outbox``: which writes exist and in which phase, which scope is free,
/// what is due, what a failed attempt means, when to wake. A value with no lock, no task and no I/O:
/// each method takes an event (a call, a storage or handler outcome) and returns what to do next,
/// and ``Outbox`` only runs those actions. Tested without tasks, including seeded random
/// interleavings that check the invariants after every step (`OutboxStateMachineTests`).
///
/// The invariants it keeps:
/// - A scope's queue holds its unparked writes by increasing sequence; only the head is ever
///   delivered, and only once it is saved (a write whose save is in flight or unresolved holds
///   its scope), so delivery order per scope is sequence order.
/// - Every write is in exactly one phase.
/// - A write leaves only through `delivered(_:)`/`removed(_:)` (after its acknowledgement, or a
///   conflict the server won) or `discardFinished(_:removed:)`; a discarded id never comes back.
struct OutboxStateMachine: Sendable {
    /// Where a write is.
    enum Phase: Sendable, Hashable {
        /// Queued by `enqueue`, its first save in flight: it holds its scope, not yet deliverable.
        case saving
        /// Its first save failed in a way that may have stored it all the same, and reading it back
        /// failed too: it holds its scope until a read-back says whether it is stored.
        case unresolved
        /// Saved, waiting for its turn or its backoff.
        case pending
        /// Its handler runs (its scope is busy).
        case delivering
        /// A dead letter.
        case parked
        /// A dead letter going back to the queue (`retry`, or its kind got a handler), save in flight.
        case requeueing
        /// A dead letter being removed for good, remove in flight.
        case discarding

        /// Whether ``OutboxStatus`` counts it as pending (`true`), parked (`false`) or not at all (`nil`:
        /// its first save is open). A dead letter is parked until its requeue is saved or it is removed.
        var countsAsPending: Bool? {
            switch self {
            case .pending, .delivering: true
            case .parked, .requeueing, .discarding: false
            case .saving, .unresolved: nil
            }
        }

        /// Whether it sits in its scope's queue.
        var isQueued: Bool {
            switch self {
            case .saving, .unresolved, .pending, .delivering, .requeueing: true
            case .parked, .discarding: false
            }
        }
    }

    struct Record: Sendable, Hashable {
        var entry: OutboxEntry
        var phase: Phase
        /// The parked entry a requeue started from, to go back to if its save fails.
        var parkedEntry: OutboxEntry?
    }

    /// What the outbox is configured with (the parts decisions need).
    struct Configuration: Sendable {
        var maxConcurrentScopes: Int
        var retention: OutboxRetention
    }

    let configuration: Configuration
    private(set) var records: [UUID: Record] = [:]
    /// The queued writes' ids per scope, by sequence.
    private(set) var queues: [String: [UUID]] = [:]
    /// The status counts, kept with every insert, remove and replace (a status never scans the records).
    private(set) var pendingCounts: [String: Int] = [:]
    private(set) var parkedCount = 0
    private(set) var nextSequence: UInt64 = 1
    private(set) var busyScopes: Set<String> = []
    /// Busy scopes to read back from the shared storage before their next write (`needsReread(_:)`).
    private var scopesToReadBack: Set<String> = []
    private(set) var registeredKinds: Set<String> = []
    /// Ids discarded in this process: nothing brings them back.
    private(set) var discarded: Set<UUID> = []
    private(set) var isLoaded = false
    private(set) var isOnline = true
    var drains = 0
    var lastFailure: OutboxFailure?

    init(configuration: Configuration) {
        self.configuration = configuration
    }

    // MARK: Loading

    /// The storage's entries were read: mirrors them; returns the parked writes whose kind has a
    /// handler (to revive). Ignored after the first time.
    mutating func loaded(_ entries: [OutboxEntry]) -> [OutboxEntry] {
        guard !isLoaded else { return [] }
        isLoaded = true
        for entry in entries where records[entry.id] == nil && !discarded.contains(entry.id) {
            insert(Record(entry: entry, phase: entry.isPending ? .pending : .parked))
        }
        nextSequence = max(nextSequence, (records.values.map(\.entry.sequence).max() ?? 0) + 1)
        return revivable(kinds: registeredKinds)
    }

    // MARK: Shared by processes

    /// Entries read from a storage that other processes share: those this outbox does not know yet
    /// (queued by another process) join, unless their scope is being drained here (a drain reads its
    /// scope back after claiming it, and a read that started before one of its deliveries must not
    /// bring the delivered write back). Returns the writes that joined.
    mutating func discovered(_ entries: [OutboxEntry]) -> [OutboxEntry] {
        guard isLoaded else { return [] }
        var joined: [OutboxEntry] = []
        for entry in entries
        where records[entry.id] == nil && !discarded.contains(entry.id) && !recentlyDelivered.contains(entry.id)
            && !busyScopes.contains(entry.scope) {
            insert(Record(entry: entry, phase: entry.isPending ? .pending : .parked))
            joined.append(entry)
        }
        nextSequence = max(nextSequence, (joined.map(\.sequence).max() ?? 0) &+ 1)
        return joined
    }

    /// Every entry of a shared storage, read because another process said it changed something
    /// (``Outbox/storageChangedElsewhere()``): for each scope not being drained here, what
    /// `reconcile(scope:stored:)` does for a claimed one (writes gone from the storage leave,
    /// versions changed elsewhere are taken, writes queued elsewhere join). Writes in flight here are
    /// left alone, and a write delivered here does not come back. Returns the writes that left and
    /// those that joined.
    mutating func refreshed(_ stored: [OutboxEntry]) -> (left: [OutboxEntry], joined: [OutboxEntry]) {
        guard isLoaded else { return ([], []) }
        var byID: [UUID: OutboxEntry] = [:]
        for entry in stored { byID[entry.id] = entry }
        var left: [OutboxEntry] = []
        for (id, record) in records where !busyScopes.contains(record.entry.scope) && (record.phase == .pending || record.phase == .parked) {
            if let current = byID[id] {
                guard Self.changedElsewhere(stored: current, known: record.entry) else { continue }
                remove(id)
                insert(Record(entry: current, phase: current.isPending ? .pending : .parked))
            } else {
                remove(id)
                left.append(record.entry)
            }
        }
        let joined = discovered(stored)
        return (left.sorted(by: Outbox.deliveryOrder), joined)
    }

    /// The storage's entries of `scope`, read right after this outbox claimed the scope (it is busy
    /// here): a pending or parked write the storage no longer holds left it elsewhere (delivered or
    /// discarded by another process) and leaves here; one the storage holds in another version (an
    /// attempt counted, parked, retried elsewhere: `changedElsewhere(stored:known:)`) takes that
    /// version; one this outbox does not know
    /// joins. Writes in flight here (saving, delivering, requeueing, discarding) are left alone.
    /// Returns the writes that left and those that joined.
    mutating func reconcile(scope: String, stored: [OutboxEntry]) -> (left: [OutboxEntry], joined: [OutboxEntry]) {
        guard isLoaded, busyScopes.contains(scope) else { return ([], []) }
        scopesToReadBack.remove(scope)
        var byID: [UUID: OutboxEntry] = [:]
        for entry in stored where entry.scope == scope { byID[entry.id] = entry }
        var left: [OutboxEntry] = []
        for id in queues[scope, default: []] + records.values.filter({ $0.entry.scope == scope && !$0.phase.isQueued }).map(\.entry.id) {
            guard let record = records[id], record.phase == .pending || record.phase == .parked else { continue }
            if let current = byID[id] {
                guard Self.changedElsewhere(stored: current, known: record.entry) else { continue }
                if current.sequence == record.entry.sequence {
                    replace(id, entry: current, phase: current.isPending ? .pending : .parked)
                } else {  // requeued elsewhere, at the end of the queue
                    remove(id)
                    insert(Record(entry: current, phase: current.isPending ? .pending : .parked))
                }
            } else {
                remove(id)
                left.append(record.entry)
            }
        }
        var joined: [OutboxEntry] = []
        for entry in byID.values.sorted(by: Outbox.deliveryOrder)
        where records[entry.id] == nil && !discarded.contains(entry.id) && !recentlyDelivered.contains(entry.id) {
            insert(Record(entry: entry, phase: entry.isPending ? .pending : .parked))
            joined.append(entry)
        }
        nextSequence = max(nextSequence, (stored.map(\.sequence).max() ?? 0) &+ 1)
        return (left, joined)
    }

    /// Whether the stored version of a write was changed by another process since this one knew it:
    /// requeued or parked there, or attempted more times (its backoff and failure come along), or its
    /// payload or precondition rewritten. What only this process knows stays: a write made due by
    /// connectivity or a host's answer (never saved), or an attempt whose save failed here.
    static func changedElsewhere(stored: OutboxEntry, known: OutboxEntry) -> Bool {
        if stored.sequence != known.sequence || stored.isPending != known.isPending { return true }
        if stored.attempts != known.attempts { return stored.attempts > known.attempts }
        return stored.payload != known.payload || stored.keyRevision != known.keyRevision || stored.baseVersion != known.baseVersion
    }

    /// Whether the busy `scope` must be read back from the shared storage before its next write (this
    /// process queued into it while it was drained; see `enqueue(id:kind:scope:payload:host:baseVersion:invalidates:now:sequence:)`).
    func needsReread(_ scope: String) -> Bool {
        busyScopes.contains(scope) && scopesToReadBack.contains(scope)
    }

    /// Another process drains `scope` until `until`: its head is not due here before then.
    mutating func heldElsewhere(_ scope: String, until: Date) {
        guard let id = queues[scope]?.first, var record = records[id], record.phase == .pending else { return }
        record.entry.nextAttemptAt = max(record.entry.nextAttemptAt, until)
        replace(id, entry: record.entry, phase: .pending)
    }

    // MARK: Queueing

    enum EnqueueDecision: Sendable, Hashable {
        /// A new write: save it, then report with `saveFinished(_:_:)`.
        case save(OutboxEntry)
        /// The id is already in the outbox: the same entry as before.
        case existing(OutboxEntry)
        /// The id's first save is in flight in another call: wait for its outcome.
        case wait
        /// The id's earlier save has an unknown outcome: read it back, then `saveFinished(_:_:)`.
        case resolve(OutboxEntry)
        /// The id was discarded in this process.
        case discarded
    }

    /// `enqueue` with the write's id (the app's, or a new UUIDv7). `sequence` is the storage's, when
    /// it is shared by processes (``OutboxStorage/nextSequence(after:)``); the write takes exactly
    /// that one, even when another call of this process took a later one first: a number the storage
    /// did not issue may be issued to another process next, which would then share it, or order its
    /// write, acknowledged first, after this one.
    mutating func enqueue(
        id: UUID, kind: String, scope: String, payload: Data, host: String?, baseVersion: String?,
        invalidates: [String] = [], now: Date, sequence: UInt64? = nil
    ) -> EnqueueDecision {
        if discarded.contains(id) { return .discarded }
        if let record = records[id] {
            switch record.phase {
            case .saving: return .wait
            case .unresolved:
                records[id]?.phase = .saving
                return .resolve(record.entry)
            default: return .existing(record.entry)
            }
        }
        let entry = OutboxEntry(
            id: id, sequence: sequence.map { takeIssued($0) } ?? takeSequence(), scope: scope, kind: kind, payload: payload, host: host?.lowercased(),
            baseVersion: baseVersion, createdAt: now, invalidates: invalidates)
        insert(Record(entry: entry, phase: .saving))
        // Shared by processes, and its scope is being drained here: another process may have queued
        // a write into it since it was read back (acknowledged there before this call, so due before
        // this write, but numbered before this drain's read and saved after it). Read it back before
        // its next write.
        if sequence != nil, busyScopes.contains(scope) { scopesToReadBack.insert(scope) }
        return .save(entry)
    }

    /// What saving (or reading back) a queued write found.
    enum SaveOutcome: Sendable, Hashable {
        /// It is stored (this version).
        case stored(OutboxEntry)
        /// Nothing is stored under its id.
        case absent
        /// Unknown: the save failed and the read-back failed too.
        case unknown
    }

    /// A write's first save, or its read-back, finished. Returns the entry when it is queued now.
    @discardableResult
    mutating func saveFinished(_ id: UUID, _ outcome: SaveOutcome) -> OutboxEntry? {
        guard let record = records[id], record.phase == .saving else { return nil }
        switch outcome {
        case .stored(let stored):
            var entry = stored
            // The stored copy is this process's own write: keep the sequence it holds in the queue.
            entry.sequence = record.entry.sequence
            replace(id, entry: entry, phase: .pending)
            return entry
        case .absent:
            remove(id)
            return nil
        case .unknown:
            records[id]?.phase = .unresolved
            return nil
        }
    }

    // MARK: Draining

    /// Claims up to the free slots among scopes whose head is due (oldest head first), skipping
    /// `excluded`; they stay busy until `releaseScope(_:)`.
    mutating func claimDueScopes(now: Date, excluding excluded: Set<String>) -> [String] {
        guard isOnline else { return [] }
        let room = configuration.maxConcurrentScopes - busyScopes.count
        guard room > 0 else { return [] }
        let due = queues.compactMap { scope, queue -> OutboxEntry? in
            guard !busyScopes.contains(scope), !excluded.contains(scope), let head = records[queue[0]],
                head.phase == .pending || head.phase == .unresolved, head.entry.nextAttemptAt <= now
            else { return nil }
            return head.entry
        }
        .sorted { ($0.sequence, $0.scope) < ($1.sequence, $1.scope) }
        .prefix(room)
        .map(\.scope)
        busyScopes.formUnion(due)
        return due
    }

    /// The next step in a claimed scope.
    enum ScopeStep: Sendable, Hashable {
        /// Send this write (its attempt count already raised: save it first).
        case deliver(OutboxEntry)
        /// Park this write without sending it.
        case park(OutboxEntry, DeadLetter)
        /// Read this write back: its first save has an unknown outcome.
        case resolve(OutboxEntry)
        /// Nothing due: release the scope.
        case release
    }

    /// What to do next in the busy `scope`.
    mutating func nextStep(in scope: String, now: Date) -> ScopeStep {
        guard isOnline, busyScopes.contains(scope), let id = queues[scope]?.first, let record = records[id],
            record.entry.nextAttemptAt <= now
        else { return .release }
        switch record.phase {
        case .pending:
            if let reason = Self.retentionExceeded(record.entry, retention: configuration.retention, now: now) {
                records[id]?.phase = .delivering
                return .park(record.entry, DeadLetter(reason: .retentionExceeded, detail: reason, parkedAt: now))
            }
            guard registeredKinds.contains(record.entry.kind) else {
                records[id]?.phase = .delivering
                return .park(record.entry, DeadLetter(
                    reason: .unknownKind, detail: "no handler is registered for kind '\(record.entry.kind)'", parkedAt: now))
            }
            var entry = record.entry
            entry.attempts += 1
            replace(id, entry: entry, phase: .delivering)
            return .deliver(entry)
        case .unresolved:
            records[id]?.phase = .saving
            return .resolve(record.entry)
        case .saving, .requeueing, .delivering, .parked, .discarding:
            return .release
        }
    }

    /// The write being delivered changed (an attempt counted, a merged payload): mirror it.
    mutating func updateDelivering(_ entry: OutboxEntry) {
        guard records[entry.id]?.phase == .delivering else { return }
        replace(entry.id, entry: entry, phase: .delivering)
    }

    /// The saved writes queued behind `id` in its scope (for a receipt's rewrite).
    func queued(after id: UUID) -> [OutboxEntry] {
        guard let scope = records[id]?.entry.scope else { return [] }
        return queues[scope, default: []].compactMap { other in
            guard other != id, let record = records[other], record.phase == .pending else { return nil }
            return record.entry
        }
    }

    /// The writes behind `id` in its scope whose first save is still open (a rewrite waits for them).
    func saving(after id: UUID) -> [UUID] {
        guard let scope = records[id]?.entry.scope else { return [] }
        return queues[scope, default: []].filter { records[$0]?.phase == .saving }
    }

    /// A queued write behind the delivered one got a new payload (saved): mirror it.
    mutating func rewritten(_ entry: OutboxEntry) {
        guard let record = records[entry.id], record.phase == .pending else { return }
        replace(entry.id, entry: entry, phase: .pending)
    }

    /// The write was acknowledged (or the server's version won) and removed from the storage.
    mutating func delivered(_ id: UUID) {
        guard records[id]?.phase == .delivering else { return }
        remove(id)
        rememberDelivered(id)
    }

    /// The last writes delivered here, so that a read of a shared storage made before one of those
    /// deliveries (`discovered(_:)`, `refreshed(_:)`) does not bring it back.
    private(set) var recentlyDelivered: Set<UUID> = []
    private var recentlyDeliveredOrder: [UUID] = []
    static let recentlyDeliveredLimit = 1_024

    private mutating func rememberDelivered(_ id: UUID) {
        guard recentlyDelivered.insert(id).inserted else { return }
        recentlyDeliveredOrder.append(id)
        if recentlyDeliveredOrder.count > Self.recentlyDeliveredLimit {
            recentlyDelivered.remove(recentlyDeliveredOrder.removeFirst())
        }
    }

    /// The write failed and waits for `entry.nextAttemptAt` (saved, or kept in this process).
    mutating func deferred(_ entry: OutboxEntry) {
        guard records[entry.id]?.phase == .delivering else { return }
        replace(entry.id, entry: entry, phase: .pending)
    }

    /// The storage failed while the write was handled: it stays as it was, due no earlier than `until`.
    mutating func heldBack(_ id: UUID, until: Date) {
        guard var record = records[id], record.phase == .delivering || record.phase == .saving else { return }
        record.entry.nextAttemptAt = max(record.entry.nextAttemptAt, until)
        replace(id, entry: record.entry, phase: record.phase == .saving ? .unresolved : .pending)
    }

    /// The write was parked (saved as such). Returns it when its kind has a handler by now and it
    /// was parked for want of one: revive it.
    mutating func parked(_ entry: OutboxEntry) -> OutboxEntry? {
        guard records[entry.id]?.phase == .delivering else { return nil }
        replace(entry.id, entry: entry, phase: .parked)
        if entry.deadLetter?.reason == .unknownKind, registeredKinds.contains(entry.kind) { return entry }
        return nil
    }

    /// The drain is done with `scope`. Returns whether the scope still holds writes (so a waiting
    /// `run()` must look at it again).
    mutating func releaseScope(_ scope: String) -> Bool {
        busyScopes.remove(scope)
        scopesToReadBack.remove(scope)
        return queues[scope] != nil
    }

    // MARK: Dead letters and registration

    /// A handler for `kind` exists now; returns the writes parked for want of one (to revive).
    mutating func register(_ kind: String) -> [OutboxEntry] {
        registeredKinds.insert(kind)
        return isLoaded ? revivable(kinds: [kind]) : []
    }

    enum OperatorError: Error, Sendable, Hashable {
        case notFound, notParked, busy
    }

    /// Starts putting a parked write back in the queue, at its end (a new sequence), due `now`,
    /// attempts reset. `onlyIfUnknownKind`: a revive, which applies only to writes parked for want of
    /// a handler. `sequence`: the one the storage issued, when it is shared by processes. Save the
    /// returned entry, then `requeueFinished(_:saved:)`.
    mutating func beginRequeue(
        _ id: UUID, now: Date, onlyIfUnknownKind: Bool = false, sequence: UInt64? = nil
    ) -> Result<OutboxEntry, OperatorError> {
        guard let record = records[id] else { return .failure(.notFound) }
        switch record.phase {
        case .parked: break
        case .requeueing, .discarding: return .failure(.busy)
        default: return .failure(.notParked)
        }
        if onlyIfUnknownKind, record.entry.deadLetter?.reason != .unknownKind { return .failure(.notParked) }
        var entry = record.entry
        entry.state = .pending
        entry.sequence = sequence.map { takeIssued($0) } ?? takeSequence()
        entry.attempts = 0
        entry.queuedAt = now
        entry.nextAttemptAt = now
        entry.inFlightConflicts = 0
        remove(id)
        insert(Record(entry: entry, phase: .requeueing, parkedEntry: record.entry))
        return .success(entry)
    }

    /// The requeue's save finished: queued when it saved, parked as before when it did not.
    mutating func requeueFinished(_ id: UUID, saved: Bool) {
        guard let record = records[id], record.phase == .requeueing, let parkedEntry = record.parkedEntry else { return }
        if saved {
            replace(id, entry: record.entry, phase: .pending)
        } else {
            remove(id)
            insert(Record(entry: parkedEntry, phase: .parked))
        }
    }

    /// Starts removing a parked write for good; remove it from the storage, then `discardFinished(_:removed:)`.
    mutating func beginDiscard(_ id: UUID) -> Result<OutboxEntry, OperatorError> {
        guard let record = records[id] else { return .failure(.notFound) }
        switch record.phase {
        case .parked: break
        case .requeueing, .discarding: return .failure(.busy)
        default: return .failure(.notParked)
        }
        records[id]?.phase = .discarding
        return .success(record.entry)
    }

    mutating func discardFinished(_ id: UUID, removed: Bool) {
        guard records[id]?.phase == .discarding else { return }
        if removed {
            remove(id)
            discarded.insert(id)
        } else {
            records[id]?.phase = .parked
        }
    }

    // MARK: Triggers

    /// The device went online or offline. Coming online makes every write that failed for want of
    /// an answer due at once (unreachable or timed out: the network itself was the cause); returns
    /// whether it came online.
    mutating func connectivityChanged(isOnline online: Bool, now: Date) -> Bool {
        defer { isOnline = online }
        guard online, !isOnline else { return false }
        makeDue(now: now, host: nil, classes: [.unreachable, .timedOut])
        return true
    }

    /// `host` answered a request: writes to it that could not reach it at all are due at once;
    /// whether there were any. Writes that timed out keep the backoff the busy server earned.
    mutating func hostAnswered(_ host: String, now: Date) -> Bool {
        makeDue(now: now, host: host.lowercased(), classes: [.unreachable])
    }

    @discardableResult
    private mutating func makeDue(now: Date, host: String?, classes: Set<OutboxFailure.Class>) -> Bool {
        var any = false
        for (id, record) in records where record.phase == .pending {
            let entry = record.entry
            guard let failure = entry.lastFailure, classes.contains(failure.class), entry.nextAttemptAt > now else { continue }
            if let host, entry.host != host { continue }
            records[id]?.entry.nextAttemptAt = now
            any = true
        }
        return any
    }

    /// When the earliest due head of a free scope is due, if any (and online).
    func nextWakeUp() -> Date? {
        guard isOnline else { return nil }
        return queues.compactMap { scope, queue -> Date? in
            guard !busyScopes.contains(scope), let head = records[queue[0]],
                head.phase == .pending || head.phase == .unresolved
            else { return nil }
            return head.entry.nextAttemptAt
        }.min()
    }

    /// Pending writes past the retention's age in free scopes (parked by a drain even while offline).
    /// They are marked as delivering: park each, then `parked(_:)`.
    mutating func claimExpired(now: Date) -> [(OutboxEntry, DeadLetter)] {
        guard configuration.retention.maxAge != nil else { return [] }
        var expired: [(OutboxEntry, DeadLetter)] = []
        for (id, record) in records where record.phase == .pending && !busyScopes.contains(record.entry.scope) {
            guard let reason = Self.retentionExceeded(record.entry, retention: configuration.retention, now: now) else { continue }
            records[id]?.phase = .delivering
            expired.append((record.entry, DeadLetter(reason: .retentionExceeded, detail: reason, parkedAt: now)))
        }
        return expired.sorted { Outbox.deliveryOrder($0.0, $1.0) }
    }

    // MARK: Reading

    /// Whether `id` is still queued (not delivered, parked, discarded or given up).
    func isQueued(_ id: UUID) -> Bool { records[id]?.phase.isQueued ?? false }

    /// The writes of `scope` a read overlays: saved and not parked, oldest first.
    func pendingEntries(scope: String) -> [OutboxEntry] {
        queues[scope, default: []].compactMap { id in
            guard let record = records[id], record.phase == .pending || record.phase == .delivering else { return nil }
            return record.entry
        }
    }

    /// The writes of every scope a read overlays, by scope and then oldest first.
    var pendingEntries: [OutboxEntry] {
        queues.keys.sorted().flatMap { pendingEntries(scope: $0) }
    }

    /// Every saved entry (not those whose first save is still open).
    var visibleEntries: [OutboxEntry] {
        records.values.filter { $0.phase != .saving && $0.phase != .unresolved }.map(\.entry)
    }

    /// Whether this outbox has no record of `id` at all (never queued here, or gone) and has not
    /// discarded it.
    func isUnknown(_ id: UUID) -> Bool { records[id] == nil && !discarded.contains(id) }

    func entry(_ id: UUID) -> OutboxEntry? {
        guard let record = records[id], record.phase != .saving, record.phase != .unresolved else { return nil }
        return record.entry
    }

    var status: OutboxStatus {
        OutboxStatus(
            pendingByScope: pendingCounts, parked: parkedCount, isDraining: drains > 0, isOnline: isOnline,
            lastFailure: lastFailure, isLoaded: isLoaded)
    }

    // MARK: Failure decisions

    /// How far one delivery has come through its failures (kept across the attempts of one drain).
    struct DeliveryContext: Sendable, Hashable {
        /// The precondition to send (`If-Match`): the base version, or `nil` once the client won.
        var precondition: String?
        var refreshedAuthorization = false
        var merges = 0
    }

    /// What the conflict policy of the write's kind is (the decision needs only which one).
    enum ConflictPolicyKind: Sendable, Hashable {
        case manual, serverWins, clientWins, merge
    }

    /// What to do after a failed attempt.
    enum FailureDecision: Sendable {
        /// Wait for `entry.nextAttemptAt`, then try again (save `entry`, then `deferred(_:)`).
        case retryLater(OutboxEntry)
        /// Park it (save, then `parked(_:)`).
        case park(OutboxEntry, DeadLetter)
        /// Run the auth-refresh hook, then send `entry` again.
        case refreshAuthorization(OutboxEntry)
        /// Remove it: the server's version wins; then run the refetch hook.
        case dropServerWins(OutboxEntry)
        /// Send `entry` again at once (client wins: no precondition, a new key).
        case resend(OutboxEntry)
        /// Run the merge hook, then send its result with a new key.
        case merge(OutboxEntry, OutboxConflictError)
    }

    /// The decision after attempt `entry.attempts` failed with `failure`. Pure: the same inputs give
    /// the same decision.
    static func decide(
        after failure: Outbox.Classified, entry: OutboxEntry, context: inout DeliveryContext,
        conflicts: ConflictPolicyKind, hasAuthRefresh: Bool, retry: OutboxRetryPolicy, retention: OutboxRetention
    ) -> FailureDecision {
        var entry = entry
        let at = failure.failure.at
        let previous = entry.lastFailure
        entry.lastFailure = failure.failure
        func letter(_ reason: DeadLetter.Reason, _ detail: String) -> DeadLetter {
            DeadLetter(reason: reason, detail: detail, status: failure.failure.status, body: failure.body, parkedAt: at)
        }
        func later(requested: Duration?) -> FailureDecision {
            entry.nextAttemptAt = at.addingTimeInterval(retry.delay(afterAttempt: entry.attempts, requested: requested).seconds)
            if let reason = retentionExceeded(entry, retention: retention, now: at) {
                return .park(entry, letter(.retentionExceeded, "\(reason); last failure: \(failure.failure.message)"))
            }
            return .retryLater(entry)
        }
        switch failure.disposition {
        case .retryLater(let requested):
            return later(requested: requested)
        case .unauthorized:
            guard !context.refreshedAuthorization, hasAuthRefresh else {
                return .park(entry, letter(.unauthorized, failure.failure.message))
            }
            context.refreshedAuthorization = true
            return .refreshAuthorization(entry)
        case .conflict(let conflict):
            // A bare 409 right after an attempt that got no answer: the server may still be applying
            // that attempt (the Idempotency-Key draft lets it answer 409 without `Retry-After`). Not a
            // conflict yet: back off, a bounded number of times.
            let afterNoAnswer = previous?.class == .timedOut || entry.inFlightConflicts > 0
            if conflict.status == 409, afterNoAnswer, entry.inFlightConflicts < retry.inFlightConflictRetries {
                entry.inFlightConflicts += 1
                entry.lastFailure = OutboxFailure(
                    class: .transient,
                    message: "409 after an attempt that got no answer: the server may still be applying it (\(entry.inFlightConflicts) of \(retry.inFlightConflictRetries))",
                    status: 409, at: at)
                return later(requested: nil)
            }
            switch conflicts {
            case .manual:
                return .park(entry, letter(.conflict, conflict.description))
            case .serverWins:
                return .dropServerWins(entry)
            case .clientWins:
                guard context.precondition != nil else {
                    return .park(entry, letter(.conflict, "\(conflict.description), and the write had no precondition to drop"))
                }
                context.precondition = nil
                entry.keyRevision += 1
                entry.inFlightConflicts = 0
                return .resend(entry)
            case .merge:
                context.merges += 1
                guard context.merges <= 3 else {
                    return .park(entry, letter(.conflict, "\(conflict.description), still after 3 merges"))
                }
                entry.keyRevision += 1
                entry.inFlightConflicts = 0
                return .merge(entry, conflict)
            }
        case .park(let reason):
            return .park(entry, letter(reason, failure.failure.message))
        }
    }

    static func retentionExceeded(_ entry: OutboxEntry, retention: OutboxRetention, now: Date) -> String? {
        if let maxAttempts = retention.maxAttempts, entry.attempts >= maxAttempts, entry.lastFailure != nil {
            return "\(entry.attempts) attempts failed (the limit is \(maxAttempts))"
        }
        if let maxAge = retention.maxAge, Duration.between(entry.queuedAt, now) > maxAge {
            return "queued for \(Duration.between(entry.queuedAt, now).formattedAge) (the limit is \(maxAge.formattedAge))"
        }
        return nil
    }

    // MARK: Indexes

    /// This outbox's next sequence (a storage used by one process).
    private mutating func takeSequence() -> UInt64 {
        let taken = nextSequence
        nextSequence = taken &+ 1
        return taken
    }

    /// `issued`, a sequence the shared storage gave this process: taken as it is, and this outbox's
    /// own numbering continues after it.
    private mutating func takeIssued(_ issued: UInt64) -> UInt64 {
        nextSequence = max(nextSequence, issued &+ 1)
        return issued
    }

    private func revivable(kinds: Set<String>) -> [OutboxEntry] {
        records.values
            .filter { $0.phase == .parked && $0.entry.deadLetter?.reason == .unknownKind && kinds.contains($0.entry.kind) }
            .map(\.entry)
            .sorted(by: Outbox.deliveryOrder)
    }

    /// Adds `record` to the status counts (`by: 1`) or takes it out (`by: -1`).
    private mutating func tally(_ record: Record, by delta: Int) {
        switch record.phase.countsAsPending {
        case true?:
            let count = pendingCounts[record.entry.scope, default: 0] + delta
            pendingCounts[record.entry.scope] = count == 0 ? nil : count
        case false?:
            parkedCount += delta
        case nil:
            break
        }
    }

    private mutating func insert(_ record: Record) {
        let id = record.entry.id
        records[id] = record
        tally(record, by: 1)
        guard record.phase.isQueued else { return }
        // Changed in place: a copy taken out of the dictionary is shared with it, so inserting into
        // it copied the whole queue on every enqueue (an enqueue cost more the longer the queue).
        let scope = record.entry.scope
        // Almost always the end: writes are queued in sequence order.
        var index = queues[scope]?.endIndex ?? 0
        while index > 0, let previousID = queues[scope]?[index - 1], let previous = records[previousID],
              Outbox.deliveryOrder(record.entry, previous.entry) {
            index -= 1
        }
        queues[scope, default: []].insert(id, at: index)
    }

    private mutating func remove(_ id: UUID) {
        guard let record = records.removeValue(forKey: id) else { return }
        tally(record, by: -1)
        let scope = record.entry.scope
        guard record.phase.isQueued, let index = queues[scope]?.firstIndex(of: id) else { return }
        // In place, as `insert`: no copy of the queue.
        queues[scope]?.remove(at: index)
        if queues[scope]?.isEmpty == true { queues[scope] = nil }
    }

    /// Replaces a record's entry and phase, keeping the queue (the sequence never changes here).
    private mutating func replace(_ id: UUID, entry: OutboxEntry, phase: Phase) {
        guard let old = records[id] else { return }
        if old.phase.isQueued == phase.isQueued {
            let new = Record(entry: entry, phase: phase, parkedEntry: old.parkedEntry)
            tally(old, by: -1)
            tally(new, by: 1)
            records[id] = new
        } else {
            remove(id)
            insert(Record(entry: entry, phase: phase))
        }
    }
}
