import Foundation
import Logging
import Metrics
@_spi(StrataInternals) import Strata

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
/// - **Durable.** `enqueue(kind:scope:payload:host:baseVersion:id:invalidates:)` returns once the write is saved
///   in the ``OutboxStorage``; it is removed only after its handler reported it delivered, so a
///   process killed at any point sends it after relaunch.
/// - **Once.** Every attempt of one write carries the same key (``OutboxEntry/idempotencyKey``; HTTP
///   writes send it as `Idempotency-Key`), so a server that remembers keys applies a write once even
///   when an acknowledgement was lost and the write is sent again. `enqueue` is idempotent by the
///   entry's id (pass your own), and a save with an unknown outcome is read back before it answers.
/// - **Ordered.** Writes of one scope are delivered one at a time, in the order they were queued,
///   even when `enqueue` is called concurrently (a write whose save is in flight holds its scope);
///   scopes run in parallel, and a scope that keeps failing never holds up another.
/// - **Failures.** Each attempt's failure has a class (``OutboxFailure/Class``, where the rule is
///   stated once). Transient ones are retried with a jittered backoff
///   (``OutboxRetryPolicy``, honouring `Retry-After`), not at all while `connectivityChanged(isOnline:)`
///   says the device is offline, and at once when it comes back. A bare 409 right after an attempt
///   that got no answer is taken for "still being applied" and retried, a bounded number of times
///   (``OutboxRetryPolicy/inFlightConflictRetries``). A handler that runs past the outbox's
///   `handlerDeadline` is cancelled and counts as timed out. 401 runs the kind's auth-refresh
///   hook, then sends once more. 409/412 go to the kind's ``OutboxConflictPolicy``. Any other
///   failure parks the write as a dead letter (``DeadLetter``) with the status and body: nothing is
///   ever dropped silently, not even at the ``OutboxRetention`` limit.
/// - **Visible.** `status`, `statusUpdates()`, `waitUntilDrained(timeout:)`, the dead letters
///   (`deadLetters()`, `retry(_:)`, `discard(_:)`), a log line per parked write, and metrics
///   (`strata_outbox_*`, dimension `outbox`).
/// - **Read your writes.** `overlayingPending(_:scope:apply:)` shows a read with its pending
///   writes applied, with provenance that says "pending (n)".
///
/// Time comes from the outbox's `LoadEnvironment` (`now` stamps entries; backoffs wait on `clock`),
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
    let handlerDeadline: Duration?
    let metrics: OutboxMetrics
    let state: Locked<State>
    /// Saves the writes queued while another is being saved together (``OutboxStorage/save(contentsOf:)``).
    let groupCommit: OutboxGroupCommit
    /// This outbox, as the other processes sharing its storage see it.
    let claimant = OutboxClaimant.thisProcess()
    /// How long a claim on a scope lasts unless renewed (before each attempt): longer than one
    /// attempt may take, so a live drainer never loses its scope in the middle of one.
    let claimLease: Duration
    /// How soon a scope another process drains is asked for again.
    static let claimRetry: Duration = .seconds(1)

    /// What a handler is given for one attempt to deliver a write.
    public struct Delivery: Sendable {
        /// The write, its ``OutboxEntry/attempts`` already counting this attempt.
        public let entry: OutboxEntry
        /// The precondition to send (`If-Match` for HTTP): the entry's base version, or `nil` when
        /// there is none or the conflict policy said the client wins.
        public let precondition: String?

        /// The key this attempt sends: the same on every attempt of the write, and a new one
        /// derived from it once the request was changed after a refusal (``OutboxEntry/keyRevision``).
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

    /// Sends one write; throws what went wrong (an `HTTPError`, an ``OutboxConflictError``, any error:
    /// see ``Outbox`` for how each is treated).
    public typealias Handler = @Sendable (Delivery) async throws -> Receipt

    /// Creates an outbox over `storage`. Nothing is read until the first call that needs the entries.
    /// - Parameters:
    ///   - storage: where entries are kept (``FileOutboxStorage``, a SQLite or PostgreSQL storage).
    ///   - name: for logs and metrics.
    ///   - environment: `now` stamps entries and schedules retries, `clock` waits for them, `logger`
    ///     reports parked writes and storage failures.
    ///   - retry: the backoff after transient failures.
    ///   - retention: when a write that keeps failing is parked.
    ///   - maxConcurrentScopes: how many scopes deliver at once.
    ///   - handlerDeadline: how long one attempt's handler may run (on the environment's clock) before
    ///     it is cancelled and the attempt counts as timed out, so one stuck handler never holds its
    ///     scope; `nil` for none. 60 s by default.
    ///   - metricsFactory: the swift-metrics backend (`MetricsSystem.factory` by default).
    public init(
        storage: any OutboxStorage,
        name: String = "outbox",
        environment: LoadEnvironment = .live,
        retry: OutboxRetryPolicy = OutboxRetryPolicy(),
        retention: OutboxRetention = OutboxRetention(),
        maxConcurrentScopes: Int = 4,
        handlerDeadline: Duration? = .seconds(60),
        metricsFactory: (any MetricsFactory)? = nil
    ) {
        precondition(maxConcurrentScopes > 0, "maxConcurrentScopes must be positive")
        precondition(handlerDeadline.map { $0 > .zero } ?? true, "handlerDeadline must be positive")
        self.storage = storage
        self.groupCommit = OutboxGroupCommit(storage: storage)
        self.name = name
        self.environment = environment
        self.retryPolicy = retry
        self.retention = retention
        self.maxConcurrentScopes = maxConcurrentScopes
        self.handlerDeadline = handlerDeadline
        self.metrics = OutboxMetrics(name: name, factory: metricsFactory ?? MetricsSystem.factory)
        self.claimLease = (handlerDeadline ?? .seconds(300)) + .seconds(30)
        self.state = Locked(State(machine: OutboxStateMachine(configuration: .init(
            maxConcurrentScopes: maxConcurrentScopes, retention: retention))))
    }

    public var description: String { "Outbox(\(name), \(storage))" }

    var logger: Logger { environment.logger }

    // MARK: Queueing

    /// Queues a write: saved in the storage when this returns, delivered when the server can be reached.
    ///
    /// Idempotent by `id`: an app that passes its own id (a draft's id) and calls again after an
    /// error gets the same entry when the first call did queue it, never a second copy. When a save
    /// fails in a way that may have stored it all the same (a cancelled caller, a timeout, a
    /// connection lost after the commit was sent), the outbox reads it back by id before answering,
    /// so the answer is exactly one of: queued (returned), not queued (``OutboxError/storage(_:)``:
    /// nothing is stored), or ``OutboxError/outcomeUnknown(id:underlying:)`` when even the read-back
    /// failed: the write then holds its scope until a read-back settles it, and calling again with
    /// the same `id` settles it.
    /// - Parameters:
    ///   - kind: the name of the handler that sends it.
    ///   - scope: writes of one scope are delivered one at a time, in the order their `enqueue`
    ///     calls took a place in the queue, even when the calls run concurrently.
    ///   - payload: the write, encoded.
    ///   - host: the host it goes to, so a successful load from that host starts a drain.
    ///   - baseVersion: the server version it was made against (sent as `If-Match` by HTTP writes).
    ///   - id: the entry's id and idempotency key; a new UUIDv7 when `nil`.
    ///   - invalidates: the live query tags and key prefixes its delivery invalidates
    ///     (``OutboxEntry/invalidates``).
    /// - Returns: the queued entry (the earlier one, when `id` was queued before).
    /// - Throws: ``OutboxError/storage(_:)`` (not queued), ``OutboxError/outcomeUnknown(id:underlying:)``,
    ///   ``OutboxError/discarded(_:)`` when `id` was discarded by this process.
    @discardableResult
    public func enqueue(
        kind: String, scope: String, payload: Data, host: String? = nil, baseVersion: String? = nil, id: UUID? = nil,
        invalidates: [String] = []
    ) async throws -> OutboxEntry {
        try await ensureLoaded()
        let now = environment.now()
        let id = id ?? .version7(at: now)
        // Shared by processes: the storage numbers the write, so writes queued by different
        // processes into one scope are delivered in the order they were acknowledged. With nothing
        // else being saved, it numbers and saves the write in one step.
        var sequence: UInt64?
        let (known, unknown) = state.withLock { ($0.machine.entry(id) != nil, $0.machine.isUnknown(id)) }
        if storage.isSharedByProcesses, !known {
            // An id this outbox has no record of: numbered and saved in one step when nothing else
            // is being saved. (One whose save is in flight or unknown goes the way below: it waits,
            // or is read back.)
            if unknown, let numbered = await enqueueNumbered(
                id: id, kind: kind, scope: scope, payload: payload, host: host, baseVersion: baseVersion,
                invalidates: invalidates, now: now) {
                return try await numbered()
            }
            sequence = try await sequenceIssuedByStorage()
        }
        while true {
            let decision = state.withLock {
                $0.machine.enqueue(
                    id: id, kind: kind, scope: scope, payload: payload, host: host, baseVersion: baseVersion,
                    invalidates: invalidates, now: now, sequence: sequence)
            }
            switch decision {
            case .existing(let entry):
                return entry
            case .discarded:
                throw OutboxError.discarded(id)
            case .wait:
                try await waitForSave(of: id)
            case .resolve(let entry):
                return try await settle(entry, saveError: nil)
            case .save(let entry):
                do {
                    try await groupCommit.save(entry)
                } catch {
                    metrics.storageFailures.increment()
                    return try await settle(entry, saveError: error)
                }
                return await stored(entry)
            }
        }
    }

    /// A new write's first save succeeded: it is queued.
    private func stored(_ entry: OutboxEntry) async -> OutboxEntry {
        state.withLock { state in
            _ = state.machine.saveFinished(entry.id, .stored(entry))
            state.writeEvents.append(.queued(entry))
        }
        await reportWriteEvents()
        finishSave(of: entry.id)
        metrics.enqueued.increment()
        changed()
        wake()
        return entry
    }

    /// A new write into a storage shared by processes, with nothing else being saved: numbered and
    /// saved in one storage step (``OutboxStorage/saveNumbered(after:_:)``), the machine deciding
    /// inside it. Returns the rest of `enqueue` to run, or `nil` when another save is in flight or
    /// another call's save of the same id began meanwhile (the caller then numbers it apart and
    /// waits for that save).
    private func enqueueNumbered(
        id: UUID, kind: String, scope: String, payload: Data, host: String?, baseVersion: String?, invalidates: [String], now: Date
    ) async -> (() async throws -> OutboxEntry)? {
        let state = self.state
        let storage = self.storage
        let decided = Locked<OutboxStateMachine.EnqueueDecision?>(nil)
        let floor = state.withLock { $0.machine.nextSequence } &- 1
        guard let outcome = await groupCommit.saveAlone(id, { () async -> (any Error)? in
            do {
                _ = try await storage.saveNumbered(after: floor) { sequence in
                    let decision = state.withLock { state in
                        state.machine.enqueue(
                            id: id, kind: kind, scope: scope, payload: payload, host: host, baseVersion: baseVersion,
                            invalidates: invalidates, now: now, sequence: sequence)
                    }
                    decided.withLock { $0 = decision }
                    guard case .save(let entry) = decision else { return nil }
                    return entry
                }
                return nil
            } catch {
                return error
            }
        }) else { return nil }
        switch decided.withLock({ $0 }) {
        case nil:
            // The storage failed before it numbered the write: nothing is queued.
            metrics.storageFailures.increment()
            return { throw OutboxError.storage(outcome ?? StoreError(store: "\(storage)", operation: .insert, key: nil, reason: "numbering failed")) }
        case .save(let entry)?:
            guard let error = outcome else { return { await self.stored(entry) } }
            metrics.storageFailures.increment()
            return { try await self.settle(entry, saveError: error) }
        // Another call of the same id got there first (between the check and the numbering).
        case .existing(let entry)?:
            return { entry }
        case .discarded?:
            return { throw OutboxError.discarded(id) }
        case .resolve(let entry)?:
            return { try await self.settle(entry, saveError: nil) }
        case .wait?:
            return nil
        }
    }

    /// Queues `write` as JSON for the handler registered as `kind` with `register(_:as:conflicts:refreshAuthorization:handler:)`.
    @discardableResult
    public func enqueue<Write: Encodable>(
        _ write: Write, kind: String, scope: String, host: String? = nil, baseVersion: String? = nil, id: UUID? = nil,
        invalidates: [String] = []
    ) async throws -> OutboxEntry {
        let payload: Data
        do {
            payload = try JSONEncoder().encode(write)
        } catch {
            throw OutboxError.unencodablePayload(kind: kind, reason: "\(error)")
        }
        return try await enqueue(
            kind: kind, scope: scope, payload: payload, host: host, baseVersion: baseVersion, id: id, invalidates: invalidates)
    }

    /// Settles a first save whose outcome is unknown (`saveError`, or an earlier unknown outcome) by
    /// reading the entry back, in a task of its own so a cancelled caller still gets an answer: stored
    /// (queued), absent (not queued), or unknown (read-back failed; the write holds its scope).
    private func settle(_ entry: OutboxEntry, saveError: (any Error)?) async throws -> OutboxEntry {
        let readBack = await readBack(entry.id)
        let queued = state.withLock { state in
            let queued = state.machine.saveFinished(entry.id, readBack.outcome)
            if let queued { state.writeEvents.append(.queued(queued)) }
            return queued
        }
        await reportWriteEvents()
        finishSave(of: entry.id)
        changed()
        if let queued {
            if saveError != nil {
                logger.notice("outbox save reported a failure but the write was stored; it is queued", metadata: metadata(for: queued))
            }
            metrics.enqueued.increment()
            wake()
            return queued
        }
        if let readError = readBack.error {
            metrics.storageFailures.increment()
            logger.error(
                "outbox could not tell whether a write was saved; it holds its scope until a read-back settles it",
                metadata: metadata(for: entry, error: readError))
            throw OutboxError.outcomeUnknown(id: entry.id, underlying: saveError ?? readError)
        }
        wake()  // the scope it held may have writes behind it
        throw OutboxError.storage(saveError ?? StoreError(
            store: "\(storage)", operation: .insert, key: entry.idempotencyKey,
            reason: "an earlier save of this write had an unknown outcome; reading it back found nothing stored"))
    }

    /// Reads the entry with `id` back from the storage, in a task of its own (a cancelled caller still
    /// gets the answer): stored, absent, or unknown with the read's error.
    func readBack(_ id: UUID) async -> (outcome: OutboxStateMachine.SaveOutcome, error: (any Error)?) {
        let storage = self.storage
        switch await Task(operation: { try await storage.entry(id) }).result {
        case .success(let stored?): return (.stored(stored), nil)
        case .success(nil): return (.absent, nil)
        case .failure(let error): return (.unknown, error)
        }
    }

    /// Waits until another call's first save of `id` has an outcome.
    func waitForSave(of id: UUID) async throws {
        let state = self.state
        let waitID = state.withLock { $0.saveWaiters[id, default: ConditionWaiters()].makeID() }
        try await waitCancellably { continuation in
            state.withLock { state in
                state.saveWaiters[id, default: ConditionWaiters()].wait(
                    waitID, until: { $0 }, current: state.machine.records[id]?.phase != .saving, continuation: continuation)
                if state.saveWaiters[id]?.isEmpty == true { state.saveWaiters[id] = nil }
            }
        } withdraw: {
            state.withLock { state in
                state.saveWaiters[id]?.withdraw(waitID, throwing: CancellationError())
                if state.saveWaiters[id]?.isEmpty == true { state.saveWaiters[id] = nil }
            }
        }
    }

    /// The first save of `id` has an outcome: resumes the calls waiting for it.
    func finishSave(of id: UUID) {
        state.withLock { state in
            guard var waiters = state.saveWaiters.removeValue(forKey: id) else { return }
            waiters.resumeSatisfied(by: true)
        }
    }

    // MARK: Reading the queue

    /// Every entry, pending and parked, in the order they are delivered (by scope, then sequence).
    public func entries() async throws -> [OutboxEntry] {
        try await ensureLoaded()
        return state.withLock { $0.machine.visibleEntries }.sorted(by: Self.deliveryOrder)
    }

    /// The writes of `scope` waiting for delivery, oldest first (what a read overlays).
    public func pendingEntries(scope: String) async throws -> [OutboxEntry] {
        try await ensureLoaded()
        return state.withLock { $0.machine.pendingEntries(scope: scope) }
    }

    /// The parked writes, oldest first.
    public func deadLetters() async throws -> [OutboxEntry] {
        try await entries().filter { !$0.isPending }
    }

    /// The entry with `id`, if it is still in the outbox.
    public func entry(_ id: UUID) async throws -> OutboxEntry? {
        try await ensureLoaded()
        return state.withLock { $0.machine.entry(id) }
    }

    static func deliveryOrder(_ a: OutboxEntry, _ b: OutboxEntry) -> Bool {
        // Field by field: a tuple comparison would format both ids as strings (a `snprintf` each) on
        // every comparison, though sequences never tie within one outbox.
        if a.scope != b.scope { return a.scope < b.scope }
        if a.sequence != b.sequence { return a.sequence < b.sequence }
        return a.id.uppercasedString < b.id.uppercasedString
    }

    // MARK: Triggers

    /// Tells the outbox whether the device is online. Offline, nothing is attempted; back online,
    /// writes that failed for want of an answer are due at once and a running `run()` drains.
    public func connectivityChanged(isOnline: Bool) {
        let now = environment.now()
        let cameOnline = state.withLock { $0.machine.connectivityChanged(isOnline: isOnline, now: now) }
        changed()
        if cameOnline { wake() }
    }

    /// Follows a connectivity signal (a path monitor's updates, a test's stream): calls
    /// `connectivityChanged(isOnline:)` with each value until the sequence ends or the task is cancelled.
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

    /// Tells the outbox that `host` just answered a request: writes to it that could not reach it at
    /// all are due at once, and a running `run()` drains. Writes that *timed out* keep their
    /// backoff: the host answering something else does not mean it is done with a slow write.
    /// `reportingReachability(to:)` calls it after every successful response.
    public func hostAnswered(_ host: String) {
        let now = environment.now()
        let due = state.withLock { $0.machine.hostAnswered(host, now: now) }
        if due { wake() }
    }

    /// Delivers every write that is due now, scopes in parallel, and returns when none is left due
    /// (the rest wait for a backoff, for connectivity, or are parked). `run()` calls it; call it
    /// yourself from a background task (`BGTaskScheduler`) or a server's service loop.
    /// - Throws: ``OutboxError/storage(_:)`` when the entries could not be read.
    @discardableResult
    @concurrent
    public func drain() async throws -> OutboxDrainReport {
        try await ensureLoaded()
        var report = OutboxDrainReport()
        if storage.isSharedByProcesses { try await discoverWritesOfOtherProcesses() }
        report.parked += await parkExpired()
        state.withLock { $0.machine.drains += 1 }
        changed()
        defer {
            state.withLock { $0.machine.drains -= 1 }
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
                let now = environment.now()
                for scope in state.withLock({ $0.machine.claimDueScopes(now: now, excluding: drained) }) {
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
            await waitForWork(until: state.withLock { $0.machine.nextWakeUp() })
        }
    }

    /// Waits until every write that was queued when it was called has left the queue: delivered,
    /// or parked. Something must be draining meanwhile (`run()` or `drain()`).
    /// - Throws: ``OutboxError/drainTimedOut(remaining:timeout:)`` after `timeout` on the outbox's
    ///   clock; `CancellationError` when the calling task is cancelled.
    public func waitUntilDrained(timeout: Duration) async throws {
        try await ensureLoaded()
        let token = UUID()
        let waited = state.withLock { state -> Set<UUID> in
            Set(state.machine.records.values.filter { $0.phase.isQueued }.map(\.entry.id))
        }
        if waited.isEmpty { return }
        let clock = environment.clock
        let drained = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await withTaskCancellationHandler {
                    await withCheckedContinuation { continuation in
                        let resumeNow = self.state.withLock { state -> Bool in
                            let remaining = waited.filter { state.machine.isQueued($0) }
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
        // The caller's own cancellation wins over whatever the race found.
        try Task.checkCancellation()
        if !drained {
            let remaining = state.withLock { state in waited.filter { state.machine.isQueued($0) }.count }
            if remaining > 0 { throw OutboxError.drainTimedOut(remaining: remaining, timeout: timeout) }
        }
    }

    // MARK: Internals

    struct DrainWaiter: Sendable {
        var ids: Set<UUID>
        var continuation: CheckedContinuation<Void, Never>
    }

    struct State: Sendable {
        var machine: OutboxStateMachine
        var loading: Task<[OutboxEntry], any Error>?
        var registrations: [String: Registration] = [:]
        var observers: [UUID: AsyncStream<OutboxStatus>.Continuation] = [:]
        var drainWaiters: [UUID: DrainWaiter] = [:]
        /// Calls waiting for another call's first save of an id (`waitForSave(of:)`).
        var saveWaiters: [UUID: ConditionWaiters<Bool>] = [:]
        var wakeWaiters: [UUID: CheckedContinuation<Void, Never>] = [:]
        var wakeRequested = false
        /// Who is told of each write's changes, and what is still to tell them (`observeWrites(_:)`).
        var writeEvents = WriteEventFeed()
    }

    /// Reads the entries from the storage once (again after a failed read).
    package func ensureLoaded() async throws {
        let task = state.withLock { state -> Task<[OutboxEntry], any Error>? in
            if state.machine.isLoaded { return nil }
            if let loading = state.loading { return loading }
            let storage = self.storage
            let loading = Task { try await storage.loadAll() }
            state.loading = loading
            return loading
        }
        guard let task else { return }
        do {
            let loaded = try await task.value
            // Kinds are registered at start, usually before the entries are read: writes an earlier
            // process parked for want of a handler go back in the queue now that one exists.
            let revivable = state.withLock { state -> [OutboxEntry] in
                state.loading = nil
                let wasLoaded = state.machine.isLoaded
                let revivable = state.machine.loaded(loaded)
                if !wasLoaded { state.writeEvents.append(.loaded(state.machine.pendingEntries)) }
                return revivable
            }
            await reportWriteEvents()
            changed()
            if !revivable.isEmpty { await revive(revivable) }
        } catch {
            state.withLock { if $0.loading == task { $0.loading = nil } }
            metrics.storageFailures.increment()
            throw OutboxError.storage(error)
        }
    }

    /// Resumes the drain waiters whose writes have all left the queue, then publishes the status.
    func settleAndNotify() {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            var ready: [CheckedContinuation<Void, Never>] = []
            for (token, waiter) in state.drainWaiters {
                let remaining = waiter.ids.filter { state.machine.isQueued($0) }
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

    /// Whether a `run()` waits for a wake-up now (for tests).
    var isWaitingForWork: Bool { state.withLock { !$0.wakeWaiters.isEmpty } }

    /// Wakes a waiting `run()` (or makes its next wait return at once).
    func wake() {
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

    /// Returns on `wake()`, at `date` (on the environment's clock), or when the task is cancelled.
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
            // A scope is often a URL's path, or a user's token in one: redacted as a path is.
            "outbox.scope": "\(Redaction.redactingSecrets(inPath: entry.scope))", "outbox.attempts": "\(entry.attempts)",
        ]
        if let error { metadata["error"] = "\(Redaction.redactingSecrets(in: "\(error)"))" }
        return metadata
    }
}

/// Why an ``Outbox`` call failed.
public enum OutboxError: Error, Sendable, CustomStringConvertible {
    /// The storage failed (the underlying error is usually a `StoreError`); for `enqueue`, the write
    /// was not queued: nothing is stored under its id.
    case storage(any Error)
    /// `enqueue` could not tell whether the write was stored: its save failed and reading it back
    /// failed too. It holds its scope until a read-back settles it; call `enqueue` again with the
    /// same `id` to settle it.
    case outcomeUnknown(id: UUID, underlying: any Error)
    /// No entry has this id (delivered, discarded, or never queued).
    case notFound(UUID)
    /// The entry is pending, not parked.
    case notParked(UUID)
    /// Another operation on this dead letter (a retry, a discard) is under way.
    case busy(UUID)
    /// This id was discarded; it is not queued again.
    case discarded(UUID)
    /// `waitUntilDrained` gave up with `remaining` of its writes still queued.
    case drainTimedOut(remaining: Int, timeout: Duration)
    /// A typed write did not encode as JSON; nothing was queued.
    case unencodablePayload(kind: String, reason: String)

    public var description: String {
        switch self {
        case .storage(let error): "outbox storage failed: \(error)"
        case .outcomeUnknown(let id, let error):
            "outbox could not tell whether write \(id.lowercasedString) was stored (\(error)); enqueue it again with the same id"
        case .notFound(let id): "outbox has no entry \(id.lowercasedString)"
        case .notParked(let id): "outbox entry \(id.lowercasedString) is pending, not parked"
        case .busy(let id): "outbox entry \(id.lowercasedString) is being retried or discarded already"
        case .discarded(let id): "outbox entry \(id.lowercasedString) was discarded"
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

extension Outbox {
    /// The sequence the storage issues for a write taking its place at the end of the queue, when
    /// the storage is shared by processes (one counter for all of them); `nil` for a storage of one
    /// process, whose writes this outbox numbers itself.
    /// - Throws: ``OutboxError/storage(_:)`` when the storage cannot issue one.
    func sequenceIssuedByStorage() async throws -> UInt64? {
        guard storage.isSharedByProcesses else { return nil }
        do {
            return try await storage.nextSequence(after: state.withLock { $0.machine.nextSequence } &- 1)
        } catch {
            metrics.storageFailures.increment()
            throw OutboxError.storage(error)
        }
    }
}
