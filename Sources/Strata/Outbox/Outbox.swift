import Foundation
import Logging
import Metrics

/// A durable queue of writes that delivers each one once, in order per scope, when the server can
/// be reached: the write half of offline-first.
///
/// ```swift
/// let outbox = Outbox(storage: FileOutboxStorage(directory: supportDir.appendingPathComponent("outbox")))
/// outbox.registerHTTP()                                  // kind "http": requests queued with enqueue(_:body:)
/// Task { try await outbox.run() }                        // drains now, on triggers, and when backoffs end
///
/// try await outbox.enqueue(request, body: json)          // durable when it returns; sent when possible
/// ```
///
/// - **Durable.** ``enqueue(kind:scope:payload:host:baseVersion:)`` returns once the write is saved
///   in the ``OutboxStorage``; it is removed only after its handler reported it delivered, so a
///   process killed at any point sends it after relaunch.
/// - **Once.** Every attempt of one write carries the same key (``OutboxEntry/idempotencyKey``; HTTP
///   writes send it as `Idempotency-Key`), so a server that remembers keys applies a write once even
///   when an acknowledgement was lost and the write is sent again.
/// - **Ordered.** Writes of one scope are delivered one at a time, in the order they were queued;
///   scopes run in parallel, and a scope that keeps failing never holds up another.
/// - **Failures.** No answer, 408, 429, 5xx (but 501 and 505) and a 409 with `Retry-After` (the
///   Idempotency-Key draft's "still processing") are retried with a jittered backoff
///   (``OutboxRetryPolicy``, honouring `Retry-After`), not at all while ``connectivityChanged(isOnline:)``
///   says the device is offline, and at once when it comes back. 401 runs the kind's auth-refresh
///   hook, then sends once more. 409/412 go to the kind's ``OutboxConflictPolicy``. Any other
///   failure parks the write as a dead letter (``DeadLetter``) with the status and body: nothing is
///   ever dropped silently, not even at the ``OutboxRetention`` limit.
/// - **Visible.** ``status``, ``statusUpdates()``, ``waitUntilDrained(timeout:)``, the dead letters
///   (``deadLetters()``, ``retry(_:)``, ``discard(_:)``), a log line per parked write, and metrics
///   (`strata_outbox_*`, dimension `outbox`).
/// - **Read your writes.** ``Loader/overlayingPending(_:scope:apply:)`` shows a read with its pending
///   writes applied, with provenance that says "pending (n)".
///
/// Time comes from the outbox's ``LoadEnvironment`` (`now` stamps entries; backoffs wait on `clock`),
/// so tests drive it with a manual clock.
public final class Outbox: Sendable, CustomStringConvertible {
    /// Where the entries are kept.
    public let storage: any OutboxStorage
    /// The name in logs and metrics (dimension `outbox`).
    public let name: String
    let environment: LoadEnvironment
    let retryPolicy: OutboxRetryPolicy
    let retention: OutboxRetention
    let maxConcurrentScopes: Int
    let metrics: OutboxMetrics
    private let state = Locked(State())
    private let registrations = Locked<[String: Registration]>([:])

    /// What a handler is given for one attempt to deliver a write.
    public struct Delivery: Sendable {
        /// The write, its ``OutboxEntry/attempts`` already counting this attempt.
        public let entry: OutboxEntry
        /// The precondition to send (`If-Match` for HTTP): the entry's base version, or `nil` when
        /// there is none or the conflict policy said the client wins.
        public let precondition: String?

        /// The key every attempt of this write sends.
        public var idempotencyKey: String { entry.idempotencyKey }
        /// Which attempt this is, 1 for the first.
        public var attempt: Int { entry.attempts }
    }

    /// What a handler says about a write it delivered.
    public struct Receipt: Sendable {
        let rewrite: (@Sendable (OutboxEntry) -> Data?)?

        /// Delivered; nothing else to do.
        public static let delivered = Receipt(rewrite: nil)

        /// Delivered, and the writes of the same scope still queued behind it must change: `rewrite`
        /// gets each and returns its new payload, or `nil` to keep it. For a server-assigned id: the
        /// create returned id 42 for the client's temporary id, so later updates of that object say 42.
        public static func delivered(rewritingLaterWrites rewrite: @escaping @Sendable (OutboxEntry) -> Data?) -> Receipt {
            Receipt(rewrite: rewrite)
        }
    }

    /// Sends one write; throws what went wrong (an ``HTTPError``, an ``OutboxConflict``, any error:
    /// see ``Outbox`` for how each is treated).
    public typealias Handler = @Sendable (Delivery) async throws -> Receipt

    struct Registration: Sendable {
        var handler: Handler
        var conflicts: OutboxConflictPolicy
        var refreshAuthorization: (@Sendable () async throws -> Void)?
    }

    /// Creates an outbox over `storage`. Nothing is read until the first call that needs the entries.
    /// - Parameters:
    ///   - storage: where entries are kept (``FileOutboxStorage``, a SQLite or PostgreSQL storage).
    ///   - name: for logs and metrics.
    ///   - environment: `now` stamps entries and schedules retries, `clock` waits for them, `logger`
    ///     reports parked writes and storage failures.
    ///   - retry: the backoff after transient failures.
    ///   - retention: when a write that keeps failing is parked.
    ///   - maxConcurrentScopes: how many scopes deliver at once.
    ///   - metricsFactory: the swift-metrics backend (`MetricsSystem.factory` by default).
    public init(
        storage: any OutboxStorage,
        name: String = "outbox",
        environment: LoadEnvironment = .live,
        retry: OutboxRetryPolicy = OutboxRetryPolicy(),
        retention: OutboxRetention = OutboxRetention(),
        maxConcurrentScopes: Int = 4,
        metricsFactory: (any MetricsFactory)? = nil
    ) {
        precondition(maxConcurrentScopes > 0, "maxConcurrentScopes must be positive")
        self.storage = storage
        self.name = name
        self.environment = environment
        self.retryPolicy = retry
        self.retention = retention
        self.maxConcurrentScopes = maxConcurrentScopes
        self.metrics = OutboxMetrics(name: name, factory: metricsFactory ?? MetricsSystem.factory)
    }

    public var description: String { "Outbox(\(name), \(storage))" }

    var logger: Logger { environment.logger }

    // MARK: Registering handlers

    /// Registers the handler for writes of `kind`. Register every kind before ``run()`` or
    /// ``drain()``: an entry whose kind has no handler is parked (``DeadLetter/Reason/unknownKind``),
    /// and goes back to the queue when its kind is registered later.
    /// - Parameters:
    ///   - kind: the name writes are queued under; the same in every process that drains the storage.
    ///   - conflicts: what a 409/412 (or an ``OutboxConflict``) does to a write of this kind.
    ///   - refreshAuthorization: run after a 401, before the write is sent once more.
    ///   - handler: sends one write and returns a ``Receipt``, or throws what went wrong.
    public func register(
        _ kind: String,
        conflicts: OutboxConflictPolicy = .manual,
        refreshAuthorization: (@Sendable () async throws -> Void)? = nil,
        handler: @escaping Handler
    ) {
        registrations.withLock {
            $0[kind] = Registration(handler: handler, conflicts: conflicts, refreshAuthorization: refreshAuthorization)
        }
        let revived = state.withLock { state -> [OutboxEntry] in
            state.entries.values.filter { $0.kind == kind && $0.deadLetter?.reason == .unknownKind }
        }
        guard !revived.isEmpty else { return }
        Task { await self.revive(revived) }
    }

    /// Puts writes parked for want of a handler back in the queue; a failure is logged (they stay
    /// parked, and ``retry(_:)`` can put them back later).
    private func revive(_ entries: [OutboxEntry]) async {
        for entry in entries {
            // Still parked for want of a handler (not retried, discarded or revived meanwhile).
            guard state.withLock({ $0.entries[entry.id]?.deadLetter?.reason == .unknownKind }) else { continue }
            do {
                try await requeue(entry)
                logger.notice("outbox write requeued: its kind has a handler now", metadata: metadata(for: entry))
            } catch {
                logger.error("outbox could not requeue a write whose kind has a handler now", metadata: metadata(for: entry, error: error))
            }
        }
    }

    /// Registers a handler for writes of `kind` whose payload is `Write` as JSON (queued with
    /// ``enqueue(_:kind:scope:host:baseVersion:)``). A payload that does not decode parks the write
    /// (``DeadLetter/Reason/unreadablePayload``).
    public func register<Write: Decodable & Sendable>(
        _ kind: String, as type: Write.Type,
        conflicts: OutboxConflictPolicy = .manual,
        refreshAuthorization: (@Sendable () async throws -> Void)? = nil,
        handler: @escaping @Sendable (Write, Delivery) async throws -> Receipt
    ) {
        register(kind, conflicts: conflicts, refreshAuthorization: refreshAuthorization) { delivery in
            let write: Write
            do {
                write = try JSONDecoder().decode(Write.self, from: delivery.entry.payload)
            } catch {
                throw UnreadablePayload(detail: "not a \(Write.self): \(describeDecodingError(error))")
            }
            return try await handler(write, delivery)
        }
    }

    // MARK: Queueing

    /// Queues a write: saved in the storage when this returns, delivered when the server can be reached.
    /// - Parameters:
    ///   - kind: the name of the handler that sends it.
    ///   - scope: writes of one scope are delivered one at a time, in order (the resource they change).
    ///   - payload: the write, encoded.
    ///   - host: the host it goes to, so a successful load from that host starts a drain.
    ///   - baseVersion: the server version it was made against (sent as `If-Match` by HTTP writes).
    /// - Throws: ``OutboxError/storage(_:)`` when it could not be saved: the write is not queued.
    @discardableResult
    public func enqueue(
        kind: String, scope: String, payload: Data, host: String? = nil, baseVersion: String? = nil
    ) async throws -> OutboxEntry {
        try await ensureLoaded()
        let now = environment.now()
        let entry = state.withLock { state -> OutboxEntry in
            defer { state.nextSequence += 1 }
            return OutboxEntry(
                id: .version7(at: now), sequence: state.nextSequence, scope: scope, kind: kind, payload: payload,
                host: host?.lowercased(), baseVersion: baseVersion, createdAt: now)
        }
        do {
            try await storage.save(entry)
        } catch {
            metrics.storageFailures.increment()
            throw OutboxError.storage(error)
        }
        state.withLock { $0.put(entry) }
        metrics.enqueued.increment()
        changed()
        wake()
        return entry
    }

    /// Queues `write` as JSON for the handler registered as `kind` with ``register(_:as:conflicts:refreshAuthorization:handler:)``.
    @discardableResult
    public func enqueue<Write: Encodable>(
        _ write: Write, kind: String, scope: String, host: String? = nil, baseVersion: String? = nil
    ) async throws -> OutboxEntry {
        let payload: Data
        do {
            payload = try JSONEncoder().encode(write)
        } catch {
            throw OutboxError.unencodablePayload(kind: kind, reason: "\(error)")
        }
        return try await enqueue(kind: kind, scope: scope, payload: payload, host: host, baseVersion: baseVersion)
    }

    // MARK: Reading the queue

    /// Every entry, pending and parked, in the order they are delivered (by scope, then sequence).
    public func entries() async throws -> [OutboxEntry] {
        try await ensureLoaded()
        return state.withLock { Array($0.entries.values) }.sorted(by: Self.deliveryOrder)
    }

    /// The writes of `scope` waiting for delivery, oldest first (what a read overlays).
    public func pendingEntries(scope: String) async throws -> [OutboxEntry] {
        try await ensureLoaded()
        return state.withLock { state in state.queues[scope, default: []].compactMap { state.entries[$0] } }
    }

    /// The parked writes, oldest first.
    public func deadLetters() async throws -> [OutboxEntry] {
        try await entries().filter { !$0.isPending }
    }

    /// The entry with `id`, if it is still in the outbox.
    public func entry(_ id: UUID) async throws -> OutboxEntry? {
        try await ensureLoaded()
        return state.withLock { $0.entries[id] }
    }

    static func deliveryOrder(_ a: OutboxEntry, _ b: OutboxEntry) -> Bool {
        // Field by field: a tuple comparison would format both ids as strings (a `snprintf` each) on
        // every comparison, though sequences never tie within one outbox.
        if a.scope != b.scope { return a.scope < b.scope }
        if a.sequence != b.sequence { return a.sequence < b.sequence }
        return a.id.uuidString < b.id.uuidString
    }

    // MARK: Dead letters

    /// Puts a parked write back in the queue, due now, its attempt count reset (the retention's age
    /// counts from now).
    /// - Throws: ``OutboxError/notFound(_:)``, ``OutboxError/notParked(_:)``, ``OutboxError/storage(_:)``.
    public func retry(_ id: UUID) async throws {
        try await ensureLoaded()
        guard let entry = state.withLock({ $0.entries[id] }) else { throw OutboxError.notFound(id) }
        guard !entry.isPending else { throw OutboxError.notParked(id) }
        try await requeue(entry)
        logger.notice("outbox write retried from the dead letters", metadata: metadata(for: entry))
    }

    /// Removes a parked write for good: the only way a write leaves the outbox undelivered. Logged
    /// (with its kind and scope) and counted.
    /// - Throws: ``OutboxError/notFound(_:)``, ``OutboxError/notParked(_:)`` (a pending write is not
    ///   discarded while it may be in flight), ``OutboxError/storage(_:)``.
    public func discard(_ id: UUID) async throws {
        try await ensureLoaded()
        guard let entry = state.withLock({ $0.entries[id] }) else { throw OutboxError.notFound(id) }
        guard !entry.isPending else { throw OutboxError.notParked(id) }
        do {
            try await storage.remove(id)
        } catch {
            metrics.storageFailures.increment()
            throw OutboxError.storage(error)
        }
        state.withLock { $0.delete(id) }
        metrics.discarded(.discardedByRequest).increment()
        logger.notice("outbox dead letter discarded", metadata: metadata(for: entry))
        changed()
    }

    private func requeue(_ entry: OutboxEntry) async throws {
        var entry = entry
        let now = environment.now()
        entry.state = .pending
        entry.attempts = 0
        entry.queuedAt = now
        entry.nextAttemptAt = now
        do {
            try await storage.save(entry)
        } catch {
            metrics.storageFailures.increment()
            throw OutboxError.storage(error)
        }
        state.withLock { $0.put(entry) }
        changed()
        wake()
    }

    // MARK: Triggers

    /// Tells the outbox whether the device is online. Offline, nothing is attempted; back online,
    /// writes that failed for want of an answer are due at once and a running ``run()`` drains.
    public func connectivityChanged(isOnline: Bool) {
        let now = environment.now()
        let cameOnline = state.withLock { state -> Bool in
            defer { state.isOnline = isOnline }
            guard isOnline, !state.isOnline else { return false }
            state.makeUnreachableDue(now: now, host: nil)
            return true
        }
        changed()
        if cameOnline { wake() }
    }

    /// Follows a connectivity signal (a path monitor's updates, a test's stream): calls
    /// ``connectivityChanged(isOnline:)`` with each value until the sequence ends or the task is cancelled.
    ///
    /// ```swift
    /// Task { await outbox.follow(connectivity: reachability.updates) }   // an AsyncSequence of Bool
    /// ```
    public func follow<Signal: AsyncSequence & Sendable>(connectivity signal: Signal) async where Signal.Element == Bool {
        do {
            for try await isOnline in signal {
                connectivityChanged(isOnline: isOnline)
            }
        } catch {
            logger.warning("outbox stopped following its connectivity signal", metadata: ["outbox": "\(name)", "error": "\(error)"])
        }
    }

    /// Tells the outbox that `host` just answered a load: writes to it that failed for want of an
    /// answer are due at once, and a running ``run()`` drains. ``HTTPTransport/reportingReachability(to:)``
    /// calls it after every successful response.
    public func hostAnswered(_ host: String) {
        let now = environment.now()
        let due = state.withLock { $0.makeUnreachableDue(now: now, host: host.lowercased()) }
        if due { wake() }
    }

    /// Delivers every write that is due now, scopes in parallel, and returns when none is left due
    /// (the rest wait for a backoff, for connectivity, or are parked). ``run()`` calls it; call it
    /// yourself from a background task (`BGTaskScheduler`) or a server's service loop.
    /// - Throws: ``OutboxError/storage(_:)`` when the entries could not be read.
    @discardableResult
    @concurrent
    public func drain() async throws -> OutboxDrainReport {
        try await ensureLoaded()
        var report = OutboxDrainReport()
        report.parked += await parkExpired()
        state.withLock { $0.drains += 1 }
        changed()
        defer {
            state.withLock { $0.drains -= 1 }
            changed()
        }
        // Each scope is drained at most once per call: a scope that stopped (its storage failed, its
        // handler was interrupted) is not claimed again at once, so a failing scope never spins. A
        // slot that frees up takes the next due scope at once, so one slow scope never holds up the
        // others while there are more due scopes than slots.
        var drained = Set<String>()
        await withTaskGroup(of: OutboxDrainReport.self) { group in
            var running = 0
            func claimMore() {
                guard !Task.isCancelled else { return }
                for scope in claimDueScopes(excluding: drained) {
                    drained.insert(scope)
                    running += 1
                    group.addTask { await self.drainScope(scope) }
                }
            }
            claimMore()
            while running > 0, let scopeReport = await group.next() {
                running -= 1
                report.add(scopeReport)
                claimMore()
            }
        }
        return report
    }

    /// Drains now, then again whenever a write is queued, connectivity comes back, a host answers,
    /// or a backoff ends; until the task is cancelled. Start it once per outbox, in a task of its own
    /// (or as a service of a server's lifecycle).
    /// - Throws: ``OutboxError/storage(_:)`` when the entries could not be read at start.
    @concurrent
    public func run() async throws {
        try await ensureLoaded()
        while !Task.isCancelled {
            do {
                try await drain()
            } catch {
                logger.error("outbox drain failed", metadata: ["outbox": "\(name)", "error": "\(error)"])
            }
            await waitForWork(until: state.withLock { $0.nextWakeUp() })
        }
    }

    /// Waits until every write that was queued when it was called has left the queue: delivered,
    /// or parked. Something must be draining meanwhile (``run()`` or ``drain()``).
    /// - Throws: ``OutboxError/drainTimedOut(remaining:timeout:)`` after `timeout` on the outbox's clock.
    public func waitUntilDrained(timeout: Duration) async throws {
        try await ensureLoaded()
        let token = UUID()
        let waited = state.withLock { state -> Set<UUID> in Set(state.queues.values.joined()) }
        if waited.isEmpty { return }
        let clock = environment.clock
        let drained = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await withTaskCancellationHandler {
                    await withCheckedContinuation { continuation in
                        let resumeNow = self.state.withLock { state -> Bool in
                            let remaining = waited.filter { state.entries[$0]?.isPending == true }
                            // Cancelled already (the time limit passed first): the handler ran and
                            // found nothing to resume; do not wait.
                            if remaining.isEmpty || Task.isCancelled { return true }
                            state.drainWaiters[token] = DrainWaiter(ids: remaining, continuation: continuation)
                            return false
                        }
                        if resumeNow { continuation.resume() }
                    }
                } onCancel: {
                    self.state.withLock { $0.drainWaiters.removeValue(forKey: token) }?.continuation.resume()
                }
                return !Task.isCancelled
            }
            group.addTask {
                try? await clock.sleep(for: timeout)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
        if !drained {
            let remaining = state.withLock { state in waited.filter { state.entries[$0]?.isPending == true }.count }
            if remaining > 0 { throw OutboxError.drainTimedOut(remaining: remaining, timeout: timeout) }
        }
    }

    // MARK: Status

    /// What the outbox holds and does now.
    public var status: OutboxStatus { state.withLock { $0.status } }

    /// The status now, then after every change (queued, delivered, parked, draining, connectivity),
    /// newest first when the reader falls behind. Ends when the reader's task is cancelled.
    public func statusUpdates() -> AsyncStream<OutboxStatus> {
        let (stream, continuation) = AsyncStream.makeStream(of: OutboxStatus.self, bufferingPolicy: .bufferingNewest(1))
        let token = UUID()
        let current = state.withLock { state -> OutboxStatus in
            state.observers[token] = continuation
            return state.status
        }
        continuation.yield(current)
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.observers.removeValue(forKey: token) }
        }
        return stream
    }

    // MARK: Internals

    private struct DrainWaiter {
        var ids: Set<UUID>
        var continuation: CheckedContinuation<Void, Never>
    }

    private struct State {
        var loaded = false
        var loading: Task<[OutboxEntry], any Error>?
        /// Every entry, by id. Written only through `put` and `delete`, which keep the two indexes below.
        var entries: [UUID: OutboxEntry] = [:]
        /// The pending entries' ids per scope, in delivery order.
        var queues: [String: [UUID]] = [:]
        /// How many entries are parked.
        var parked = 0
        var nextSequence: UInt64 = 1
        var busyScopes: Set<String> = []
        var isOnline = true
        var drains = 0
        var lastFailure: OutboxFailure?
        var observers: [UUID: AsyncStream<OutboxStatus>.Continuation] = [:]
        var drainWaiters: [UUID: DrainWaiter] = [:]
        var wakeWaiters: [UUID: CheckedContinuation<Void, Never>] = [:]
        var wakeRequested = false

        var status: OutboxStatus {
            OutboxStatus(
                pendingByScope: queues.mapValues(\.count), parked: parked, isDraining: drains > 0, isOnline: isOnline,
                lastFailure: lastFailure, isLoaded: loaded)
        }

        /// Inserts or replaces `entry`, keeping the per-scope queues and the parked count exact.
        mutating func put(_ entry: OutboxEntry) {
            if let old = entries.updateValue(entry, forKey: entry.id) { unindex(old) }
            if entry.isPending {
                var queue = queues[entry.scope, default: []]
                // Almost always the end: entries are queued in sequence order.
                var index = queue.endIndex
                while index > queue.startIndex, let previous = entries[queue[index - 1]], Outbox.deliveryOrder(entry, previous) {
                    index -= 1
                }
                queue.insert(entry.id, at: index)
                queues[entry.scope] = queue
            } else {
                parked += 1
            }
        }

        /// Removes the entry with `id`, if any.
        mutating func delete(_ id: UUID) {
            if let old = entries.removeValue(forKey: id) { unindex(old) }
        }

        private mutating func unindex(_ entry: OutboxEntry) {
            guard entry.isPending else {
                parked -= 1
                return
            }
            guard var queue = queues[entry.scope], let index = queue.firstIndex(of: entry.id) else { return }
            queue.remove(at: index)
            queues[entry.scope] = queue.isEmpty ? nil : queue
        }

        /// The first pending entry of each scope, by sequence.
        func heads() -> [String: OutboxEntry] {
            queues.compactMapValues { queue in queue.first.flatMap { entries[$0] } }
        }

        /// When the earliest waiting head is due, if any (and the device is online).
        func nextWakeUp() -> Date? {
            guard isOnline else { return nil }
            return heads().values.filter { !busyScopes.contains($0.scope) }.map(\.nextAttemptAt).min()
        }

        /// Makes entries that failed for want of an answer due at `now` (those to `host`, or all);
        /// whether there were any.
        @discardableResult
        mutating func makeUnreachableDue(now: Date, host: String?) -> Bool {
            var any = false
            for (id, entry) in entries where entry.isPending && entry.lastFailure?.class == .unreachable && entry.nextAttemptAt > now {
                if let host, let entryHost = entry.host, entryHost != host { continue }
                entries[id]?.nextAttemptAt = now
                any = true
            }
            return any
        }
    }

    /// Reads the entries from the storage once (again after a failed read).
    func ensureLoaded() async throws {
        let task = state.withLock { state -> Task<[OutboxEntry], any Error>? in
            if state.loaded { return nil }
            if let loading = state.loading { return loading }
            let storage = self.storage
            let loading = Task { try await storage.loadAll() }
            state.loading = loading
            return loading
        }
        guard let task else { return }
        do {
            let loaded = try await task.value
            let didLoad = state.withLock { state -> Bool in
                guard !state.loaded else { return false }
                for entry in loaded { state.put(entry) }
                state.nextSequence = (state.entries.values.map(\.sequence).max() ?? 0) + 1
                state.loaded = true
                state.loading = nil
                return true
            }
            changed()
            // Kinds are registered at start, usually before the entries are read: writes an earlier
            // process parked for want of a handler go back in the queue now that one exists.
            if didLoad {
                let registered = registrations.withLock { Set($0.keys) }
                let revivable = state.withLock { state in
                    state.entries.values.filter { $0.deadLetter?.reason == .unknownKind && registered.contains($0.kind) }
                }
                if !revivable.isEmpty { await revive(revivable.sorted(by: Self.deliveryOrder)) }
            }
        } catch {
            state.withLock { if $0.loading == task { $0.loading = nil } }
            metrics.storageFailures.increment()
            throw OutboxError.storage(error)
        }
    }

    private func claimDueScopes(excluding drained: Set<String>) -> [String] {
        let now = environment.now()
        return state.withLock { state -> [String] in
            guard state.isOnline else { return [] }
            let room = maxConcurrentScopes - state.busyScopes.count
            guard room > 0 else { return [] }
            let due = state.heads().values
                .filter { !state.busyScopes.contains($0.scope) && !drained.contains($0.scope) && $0.nextAttemptAt <= now }
                .sorted(by: { ($0.sequence, $0.scope) < ($1.sequence, $1.scope) })
                .prefix(room)
                .map(\.scope)
            state.busyScopes.formUnion(due)
            return due
        }
    }

    /// Delivers the due writes of `scope` one after another, until one fails or none is due.
    private func drainScope(_ scope: String) async -> OutboxDrainReport {
        defer {
            // A `run()` that looked for its next wake-up while this scope was busy skipped it: when
            // the scope still holds writes, make it look again.
            let holdsWrites = state.withLock { state -> Bool in
                state.busyScopes.remove(scope)
                return state.queues[scope] != nil
            }
            if holdsWrites { wake() }
        }
        var report = OutboxDrainReport()
        while !Task.isCancelled {
            let now = environment.now()
            let head = state.withLock { state -> OutboxEntry? in
                guard state.isOnline, let head = state.heads()[scope], head.nextAttemptAt <= now else { return nil }
                return head
            }
            guard let head else { break }
            let outcome = await deliver(head)
            report.record(outcome)
            if outcome != .delivered && outcome != .parked && outcome != .discarded { break }
        }
        return report
    }

    enum Outcome: Equatable {
        case delivered, parked, discarded, deferred, stopped
    }

    /// One write, through its handler, with what the failure classes ask for.
    private func deliver(_ entry: OutboxEntry) async -> Outcome {
        let now = environment.now()
        if let reason = retentionExceeded(entry, now: now) {
            return await park(entry, DeadLetter(reason: .retentionExceeded, detail: reason, parkedAt: now))
        }
        guard let registration = registrations.withLock({ $0[entry.kind] }) else {
            return await park(entry, DeadLetter(
                reason: .unknownKind, detail: "no handler is registered for kind '\(entry.kind)'", parkedAt: now))
        }
        var entry = entry
        var precondition = entry.baseVersion
        var refreshedAuthorization = false
        var merges = 0
        while true {
            entry.attempts += 1
            guard await persist(entry) else { return holdBack(entry) }
            do {
                let receipt = try await registration.handler(Delivery(entry: entry, precondition: precondition))
                return await complete(entry, receipt)
            } catch {
                // Only the drain's own cancellation stops it; a handler that throws
                // `CancellationError` by itself (a transport whose request was cancelled) failed,
                // and is classified, so it backs off instead of being sent again at once.
                if Task.isCancelled { return .stopped }
                let failedAt = environment.now()
                let failure = Self.classify(error, at: failedAt)
                state.withLock { $0.lastFailure = failure.failure }
                metrics.failures(failure.failure.class).increment()
                switch failure.disposition {
                case .retryLater(let requested):
                    entry.lastFailure = failure.failure
                    entry.nextAttemptAt = failedAt.addingTimeInterval(
                        retryPolicy.delay(afterAttempt: entry.attempts, requested: requested).seconds)
                    if let reason = retentionExceeded(entry, now: failedAt) {
                        return await park(entry, DeadLetter(
                            reason: .retentionExceeded, detail: "\(reason); last failure: \(failure.failure.message)",
                            status: failure.failure.status, body: failure.body, parkedAt: failedAt))
                    }
                    if !(await persist(entry)) {
                        // Not saved: the backoff still holds in this process (after a relaunch the
                        // write is due at once, which is safe).
                        state.withLock { $0.put(entry) }
                    }
                    changed()
                    return .deferred
                case .unauthorized:
                    entry.lastFailure = failure.failure
                    guard !refreshedAuthorization, let refresh = registration.refreshAuthorization else {
                        return await park(entry, DeadLetter(
                            reason: .unauthorized, detail: failure.failure.message, status: failure.failure.status,
                            body: failure.body, parkedAt: failedAt))
                    }
                    refreshedAuthorization = true
                    do {
                        try await refresh()
                    } catch {
                        return await park(entry, DeadLetter(
                            reason: .unauthorized, detail: "the auth refresh failed: \(error)", status: failure.failure.status,
                            body: failure.body, parkedAt: failedAt))
                    }
                case .conflict(let conflict):
                    entry.lastFailure = failure.failure
                    switch registration.conflicts {
                    case .manual:
                        return await park(entry, DeadLetter(
                            reason: .conflict, detail: conflict.description, status: conflict.status, body: conflict.body,
                            parkedAt: failedAt))
                    case .serverWins(let refetch):
                        let outcome = await remove(entry, because: .conflictServerWins)
                        await refetch(entry)
                        return outcome
                    case .clientWins:
                        guard precondition != nil else {
                            return await park(entry, DeadLetter(
                                reason: .conflict, detail: "\(conflict.description), and the write had no precondition to drop",
                                status: conflict.status, body: conflict.body, parkedAt: failedAt))
                        }
                        precondition = nil
                    case .merge(let merge):
                        merges += 1
                        guard merges <= 3 else {
                            return await park(entry, DeadLetter(
                                reason: .conflict, detail: "\(conflict.description), still after 3 merges",
                                status: conflict.status, body: conflict.body, parkedAt: failedAt))
                        }
                        do {
                            let merged = try await merge(entry, conflict)
                            entry.payload = merged.payload
                            entry.baseVersion = merged.baseVersion
                            precondition = merged.baseVersion
                        } catch {
                            return await park(entry, DeadLetter(
                                reason: .conflict, detail: "\(conflict.description); the merge failed: \(error)",
                                status: conflict.status, body: conflict.body, parkedAt: failedAt))
                        }
                    }
                case .park(let reason):
                    entry.lastFailure = failure.failure
                    return await park(entry, DeadLetter(
                        reason: reason, detail: failure.failure.message, status: failure.failure.status, body: failure.body,
                        parkedAt: failedAt))
                }
            }
        }
    }

    private func retentionExceeded(_ entry: OutboxEntry, now: Date) -> String? {
        if let maxAttempts = retention.maxAttempts, entry.attempts >= maxAttempts, entry.lastFailure != nil {
            return "\(entry.attempts) attempts failed (the limit is \(maxAttempts))"
        }
        if let maxAge = retention.maxAge, Duration.between(entry.queuedAt, now) > maxAge {
            return "queued for \(Duration.between(entry.queuedAt, now).formattedAge) (the limit is \(maxAge.formattedAge))"
        }
        return nil
    }

    /// Parks pending writes past the retention's age, even while offline; returns how many.
    private func parkExpired() async -> Int {
        guard retention.maxAge != nil else { return 0 }
        let now = environment.now()
        let expired = state.withLock { state in
            state.entries.values.filter { $0.isPending && !state.busyScopes.contains($0.scope) }
        }.compactMap { entry in retentionExceeded(entry, now: now).map { (entry, $0) } }
        var parked = 0
        for (entry, reason) in expired where await park(entry, DeadLetter(reason: .retentionExceeded, detail: reason, parkedAt: now)) == .parked {
            parked += 1
        }
        return parked
    }

    /// Saves `entry` and mirrors it; `false` (logged) when the storage failed.
    private func persist(_ entry: OutboxEntry) async -> Bool {
        do {
            try await storage.save(entry)
        } catch {
            metrics.storageFailures.increment()
            logger.error("outbox could not save a write; it stays queued as it was", metadata: metadata(for: entry, error: error))
            return false
        }
        state.withLock { $0.put(entry) }
        return true
    }

    /// The storage failed while `entry` was being handled: it stays as it is, due again after the
    /// retry policy's first delay in this process (so neither `drain()` nor `run()` spins on a
    /// storage that keeps failing).
    private func holdBack(_ entry: OutboxEntry) -> Outcome {
        let until = environment.now().addingTimeInterval(retryPolicy.delay(afterAttempt: 1, requested: nil).seconds)
        state.withLock { state in
            guard var current = state.entries[entry.id], current.isPending else { return }
            current.nextAttemptAt = max(current.nextAttemptAt, until)
            state.put(current)
        }
        return .stopped
    }

    private func park(_ entry: OutboxEntry, _ letter: DeadLetter) async -> Outcome {
        var parked = entry
        parked.state = .parked(letter)
        guard await persist(parked) else { return holdBack(entry) }
        metrics.parked(letter.reason).increment()
        var details = metadata(for: parked)
        details["outbox.reason"] = "\(letter.reason.rawValue)"
        details["outbox.detail"] = "\(letter.detail)"
        if let status = letter.status { details["http.status"] = "\(status)" }
        logger.warning("outbox write parked as a dead letter", metadata: details)
        settleAndNotify()
        return .parked
    }

    private func complete(_ entry: OutboxEntry, _ receipt: Receipt) async -> Outcome {
        // The writes queued behind it are rewritten (a server-assigned id) and saved *before* the
        // delivered write is removed: a crash in between sends the delivered write again with the
        // same key, the server answers it from its record, and the rewrite runs again. Removed
        // first, a crash would leave the later writes with an id nothing can rewrite any more.
        if let rewrite = receipt.rewrite {
            let later = state.withLock { state in
                state.queues[entry.scope, default: []].filter { $0 != entry.id }.compactMap { state.entries[$0] }
            }
            for var next in later {
                guard let payload = rewrite(next) else { continue }
                next.payload = payload
                guard await persist(next) else {
                    logger.error(
                        "outbox could not save a write rewritten after the one before it was delivered; that one is kept and sent again",
                        metadata: metadata(for: entry))
                    return holdBack(entry)
                }
            }
        }
        do {
            try await storage.remove(entry.id)
        } catch {
            metrics.storageFailures.increment()
            logger.error(
                "outbox delivered a write but could not remove it; after a relaunch it is sent again with the same idempotency key",
                metadata: metadata(for: entry, error: error))
        }
        state.withLock { $0.delete(entry.id) }
        metrics.delivered.increment()
        settleAndNotify()
        return .delivered
    }

    private func remove(_ entry: OutboxEntry, because why: OutboxMetrics.DiscardReason) async -> Outcome {
        do {
            try await storage.remove(entry.id)
        } catch {
            metrics.storageFailures.increment()
            logger.error("outbox could not remove a write", metadata: metadata(for: entry, error: error))
            return holdBack(entry)
        }
        state.withLock { $0.delete(entry.id) }
        metrics.discarded(why).increment()
        var details = metadata(for: entry)
        details["outbox.payload_bytes"] = "\(entry.payload.count)"
        logger.warning("outbox write dropped: the server's version wins the conflict", metadata: details)
        settleAndNotify()
        return .discarded
    }

    /// Resumes the drain waiters whose writes have all left the queue, then publishes the status.
    private func settleAndNotify() {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            var ready: [CheckedContinuation<Void, Never>] = []
            for (token, waiter) in state.drainWaiters {
                let remaining = waiter.ids.filter { state.entries[$0]?.isPending == true }
                if remaining.isEmpty {
                    ready.append(waiter.continuation)
                    state.drainWaiters[token] = nil
                } else {
                    state.drainWaiters[token]?.ids = remaining
                }
            }
            return ready
        }
        for continuation in ready { continuation.resume() }
        changed()
    }

    /// Publishes the status to every observer and the gauges.
    private func changed() {
        let (status, observers) = state.withLock { ($0.status, Array($0.observers.values)) }
        metrics.pending.record(status.pending)
        metrics.parkedNow.record(status.parked)
        for observer in observers { observer.yield(status) }
    }

    /// Whether a ``run()`` waits for a wake-up now (for tests).
    var isWaitingForWork: Bool { state.withLock { !$0.wakeWaiters.isEmpty } }

    /// Wakes a waiting ``run()`` (or makes its next wait return at once).
    private func wake() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            if state.wakeWaiters.isEmpty {
                state.wakeRequested = true
                return []
            }
            defer { state.wakeWaiters.removeAll() }
            return Array(state.wakeWaiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns on ``wake()``, at `date` (on the environment's clock), or when the task is cancelled.
    private func waitForWork(until date: Date?) async {
        let clock = environment.clock
        let delay = date.map { Duration.between(environment.now(), $0) }
        if let delay, delay <= .zero { return }
        let token = UUID()
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await withTaskCancellationHandler {
                    await withCheckedContinuation { continuation in
                        let now = self.state.withLock { state -> Bool in
                            // Read under the lock: the runtime marks the task cancelled before its
                            // handler runs, so a cancellation is seen here or the handler finds
                            // the continuation stored.
                            if Task.isCancelled { return true }
                            if state.wakeRequested {
                                state.wakeRequested = false
                                return true
                            }
                            state.wakeWaiters[token] = continuation
                            return false
                        }
                        if now { continuation.resume() }
                    }
                } onCancel: {
                    self.state.withLock { $0.wakeWaiters.removeValue(forKey: token) }?.resume()
                }
            }
            if let delay {
                group.addTask { try? await clock.sleep(for: delay) }
            }
            await group.next()
            group.cancelAll()
        }
    }

    func metadata(for entry: OutboxEntry, error: (any Error)? = nil) -> Logger.Metadata {
        var metadata: Logger.Metadata = [
            "outbox": "\(name)", "outbox.id": "\(entry.idempotencyKey)", "outbox.kind": "\(entry.kind)",
            "outbox.scope": "\(entry.scope)", "outbox.attempts": "\(entry.attempts)",
        ]
        if let error { metadata["error"] = "\(error)" }
        return metadata
    }
}

/// What one ``Outbox/drain()`` did.
public struct OutboxDrainReport: Sendable, Hashable {
    /// Writes delivered.
    public var delivered = 0
    /// Writes parked as dead letters.
    public var parked = 0
    /// Writes removed because the server's version won a conflict.
    public var discarded = 0
    /// Writes that failed and wait for a retry.
    public var deferred = 0

    /// A report of nothing done yet.
    public init() {}

    mutating func record(_ outcome: Outbox.Outcome) {
        switch outcome {
        case .delivered: delivered += 1
        case .parked: parked += 1
        case .discarded: discarded += 1
        case .deferred: deferred += 1
        case .stopped: break
        }
    }

    mutating func add(_ other: OutboxDrainReport) {
        delivered += other.delivered
        parked += other.parked
        discarded += other.discarded
        deferred += other.deferred
    }
}

/// What an ``Outbox`` holds and does.
public struct OutboxStatus: Sendable, Hashable {
    /// Writes waiting for delivery, per scope (scopes with none are absent).
    public var pendingByScope: [String: Int]
    /// Parked writes (dead letters).
    public var parked: Int
    /// Whether a drain is running.
    public var isDraining: Bool
    /// What ``Outbox/connectivityChanged(isOnline:)`` last said (`true` until it says otherwise).
    public var isOnline: Bool
    /// The last failed attempt, of any write.
    public var lastFailure: OutboxFailure?
    /// Whether the entries have been read from the storage yet (before that, the counts are zero).
    public var isLoaded: Bool

    /// Writes waiting for delivery, in all scopes.
    public var pending: Int { pendingByScope.values.reduce(0, +) }
}

/// Why an ``Outbox`` call failed.
public enum OutboxError: Error, Sendable, CustomStringConvertible {
    /// The storage failed (the underlying error is usually a ``StoreError``); for `enqueue`, the write
    /// was not queued.
    case storage(any Error)
    /// No entry has this id (delivered, discarded, or never queued).
    case notFound(UUID)
    /// The entry is pending, not parked.
    case notParked(UUID)
    /// `waitUntilDrained` gave up with `remaining` of its writes still queued.
    case drainTimedOut(remaining: Int, timeout: Duration)
    /// A typed write did not encode as JSON; nothing was queued.
    case unencodablePayload(kind: String, reason: String)

    public var description: String {
        switch self {
        case .storage(let error): "outbox storage failed: \(error)"
        case .notFound(let id): "outbox has no entry \(id.uuidString.lowercased())"
        case .notParked(let id): "outbox entry \(id.uuidString.lowercased()) is pending, not parked"
        case .drainTimedOut(let remaining, let timeout):
            "outbox did not drain within \(timeout.formattedAge): \(remaining) write(s) still queued"
        case .unencodablePayload(let kind, let reason): "outbox write of kind '\(kind)' does not encode: \(reason)"
        }
    }
}

/// A payload its handler could not read: parked as ``DeadLetter/Reason/unreadablePayload``.
struct UnreadablePayload: Error, CustomStringConvertible {
    var detail: String
    var description: String { "unreadable payload: \(detail)" }
}
