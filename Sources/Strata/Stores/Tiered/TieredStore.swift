import Foundation
import Metrics
import Logging

/// Two tiers as one store: a memory tier (L1, this process) in front of a shared tier (L2: a
/// `PostgresStore` or `SQLiteStore` many processes use, or any store).
///
/// ```swift
/// let cache = TieredStore(memory: MemoryStore(countLimit: 10_000), shared: postgresStore)
/// let feed = remote.cached(.cacheFirst(freshness: .maxAge(.seconds(5 * 60))), in: cache, key: "feed")
/// ```
///
/// - **Reads** go L1, then L2. An L2 hit fills L1 with the entry as stored, its store time kept,
///   so L1 serves it for no longer than L2's remaining life. An L2 that fails is a miss (logged):
///   the chain's next tier (the remote) answers, and no read L1 or the remote can answer fails.
/// - **Writes** (insert, delete, refresh) go to L1, then to L2, one write per key at a time, in
///   the order they were made. While L2 fails, the last write of each key waits (last write wins)
///   and the store tries again with a backoff, and at once when L2 answers a read. A write sent
///   again never replaces a row another process stored later (by store time: in the statement,
///   for a shared tier that is a ``NewestStoreTimeWins`` store; read before the write otherwise).
///   A failed L2 write never fails the call: L1 has the value, and L2 gets it when it returns.
///   With ``SharedTierWriting/inBackground``, the call returns once L1 has it.
/// - **One ordering rule**: the entry with the latest store time wins, in both tiers. A write
///   older than what L1 holds for its key changes nothing; a delete sent again after L2 was away
///   removes only a row stored at or before its time; an entry read from L2 never replaces a newer
///   one in L1. A change another node announces with a time ahead of this node's clock counts as
///   this node's now, so a fast clock elsewhere never pins this node's writes.
/// - A write takes its key's turn even when its task is cancelled: it is never lost half-way.
/// - **Read your writes**: a write registers with the same coherence rules as another node's
///   change, so a read of L2 that started before it never puts the older row back in L1; while
///   the write has not reached L2, a read of its key answers with it (L1 may have let it go) and
///   nothing read from L2 is kept for the key. Changes of one key's L1 entry (local writes, fills,
///   other nodes' changes) take turns (`KeyTurns`), so each decides and acts in one step.
/// - **L2 down**: while L2 is known to be down, one read per `downProbeInterval` tries it (a
///   probe); the others are misses at once instead of each paying its connect timeout.
/// - ``removeAll()`` clears both and forgets waiting writes; it throws if L2 cannot be cleared.
/// - **Other nodes' writes**: given a ``Backplane`` (``init(memory:shared:backplane:environment:firstRetryDelay:maxRetryDelay:sharedTierWriting:downProbeInterval:maxWaitingWrites:metricsFactory:metricsName:)``),
///   the store drops a memory copy older than a change another node announces for its key, never
///   keeps in memory an entry whose read started before such a change arrived, and empties the
///   memory tier each time the backplane (re)starts listening, since changes may have been missed.
///   Its own changes, which come back, are ignored.
///
/// The decisions about L2 writes are a pure state machine's (`SharedTierWrites`); this type
/// carries them out.
public final class TieredStore<Memory: Store, Shared: Store>: Store, Sendable
where Memory.Key == Shared.Key, Memory.Value == Shared.Value {
    public typealias Key = Memory.Key
    public typealias Value = Memory.Value

    /// When a write reaches the shared tier, relative to the call that made it.
    public enum SharedTierWriting: Sendable, Hashable {
        /// The call returns once the shared tier has the write, or refused it (the write then
        /// waits for a retry).
        case awaited
        /// The call returns once the memory tier has the write; the shared tier gets it in the
        /// background, in order, one write per key at a time. A server's answer never waits for
        /// the shared tier; ``waitForUnsentWrites(atMost:)`` waits for it.
        case inBackground
    }

    /// What a write does to the shared tier.
    enum Write: Sendable {
        case insert(CacheEntry<Value>)
        /// Deleted at this time: a row stored later is not removed by a repair.
        case delete(at: Date)
        case refresh(storedAt: Date, validators: CacheValidators)
    }

    /// The memory tier (L1).
    public let memory: Memory
    /// The shared tier (L2).
    public let shared: Shared
    /// Where hits, misses and the backplane's events are counted, when the store was given a factory.
    @usableFromInline let metrics: TieredStoreMetrics?
    let environment: LoadEnvironment
    let firstRetryDelay: Duration

    /// The waits between the shared tier's repairs: doubling from `firstRetryDelay` up to
    /// `maxRetryDelay`, the library's one ``Backoff``.
    public var repairBackoff: Backoff { Backoff(initialDelay: firstRetryDelay, maxDelay: maxRetryDelay) }
    let maxRetryDelay: Duration
    /// When a write reaches the shared tier, relative to its call.
    public let sharedTierWriting: SharedTierWriting
    /// While the shared tier is down, how often a read tries it.
    public let downProbeInterval: Duration
    /// Whether the shared tier orders writes by store time itself (``NewestStoreTimeWins``).
    let sharedKeepsNewest: Bool
    private let state = Locked(State())

    struct State: Sendable {
        var writes = SharedTierWrites<Key, Write>()
        var retry: Task<Void, Never>?
        var unsentWaiters = ConditionWaiters<Int>()
        /// Waits for one key's writes to reach the shared tier (``waitUntilSent(_:)``).
        var sentWaiters = ConditionWaiters<SharedTierWrites<Key, Write>>()
        /// Calls that waited for the writes on their way (``removeAll()``, `invalidate`), for tests.
        var sendWaits = 0
        var sendWaitsWaiters = ConditionWaiters<Int>()
        var coherence = TierCoherence<Key>()
        var turns = KeyTurns<Key>()
        var turnWaiters: [UInt64: CheckedContinuation<Void, any Error>] = [:]
        var uncancellableTurnWaiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var backplane = BackplaneStatistics()
        var backplaneWaiters = ConditionWaiters<Int>()
        var following: Task<Void, Never>?
        /// The backplane followed, kept alive for as long as the store.
        var followed: (any Backplane)?
    }

    /// What the store did with its ``Backplane``'s events.
    public struct BackplaneStatistics: Sendable, Hashable {
        /// Events handled: changes (own or not) and starts of listening.
        public var events = 0
        /// Changes announced by this node's own writes, which came back and were ignored.
        public var ownChangesIgnored = 0
        /// Memory copies dropped because another node changed their key later.
        public var copiesDropped = 0
        /// Times the backplane (re)started listening, each emptying the memory tier.
        public var listeningStarts = 0
        /// Reads of the shared tier whose entry was not kept in memory: a change of their key
        /// (another node's, or this node's own write) arrived while they ran, a write of the key
        /// had not reached the shared tier yet, or the memory tier held a newer entry.
        public var fillsSkipped = 0
        /// Invalidations by another node (by tag, key prefix or all), each emptying the memory tier.
        public var invalidations = 0
    }

    /// A store of `memory` in front of `shared`. Waiting writes are tried again after
    /// `firstRetryDelay`, doubling up to `maxRetryDelay`, on `environment`'s clock (and at once
    /// when `shared` answers a read); failures are logged to `environment`'s logger.
    ///
    /// With `metricsFactory`, the store reports its hits per tier, misses, the shared tier's failures, the
    /// writes waiting for it and its backplane's events to swift-metrics, each with the dimension
    /// `store: metricsName` (see `TieredStoreMetrics` in the source for the names).
    ///
    /// `sharedTierWriting` says whether a write's call waits for the shared tier (``SharedTierWriting/awaited``,
    /// the default) or only for the memory tier; `downProbeInterval` how often a read tries a
    /// shared tier known to be down (1 s); `maxWaitingWrites` how many writes may wait for it (by
    /// key; past it the oldest waiting one is forgotten, which bounds the memory a long outage
    /// costs; no limit by default).
    public init(
        memory: Memory, shared: Shared, environment: LoadEnvironment = .live,
        firstRetryDelay: Duration = .seconds(1), maxRetryDelay: Duration = .seconds(60),
        sharedTierWriting: SharedTierWriting = .awaited, downProbeInterval: Duration = .seconds(1),
        maxWaitingWrites: Int? = nil,
        metricsFactory: (any MetricsFactory)? = nil, metricsName: String = "tiered"
    ) {
        precondition(downProbeInterval >= .zero, "TieredStore: downProbeInterval must not be negative")
        precondition(maxWaitingWrites.map { $0 > 0 } ?? true, "TieredStore: maxWaitingWrites must be positive")
        state.withLock { $0.writes.maxWaiting = maxWaitingWrites }
        self.memory = memory
        self.shared = shared
        self.environment = environment
        self.firstRetryDelay = firstRetryDelay
        self.maxRetryDelay = maxRetryDelay
        self.sharedTierWriting = sharedTierWriting
        self.downProbeInterval = downProbeInterval
        self.sharedKeepsNewest = shared is any NewestStoreTimeWins
        self.metrics = metricsFactory.map { TieredStoreMetrics(name: metricsName, factory: $0) }
    }

    /// The former spelling of `init(memory:shared:environment:firstRetryDelay:maxRetryDelay:sharedTierWriting:downProbeInterval:maxWaitingWrites:metricsFactory:metricsName:)`.
    @available(*, deprecated, message: "the metrics factory is passed as metricsFactory:")
    public convenience init(
        memory: Memory, shared: Shared, environment: LoadEnvironment = .live,
        firstRetryDelay: Duration = .seconds(1), maxRetryDelay: Duration = .seconds(60),
        sharedTierWriting: SharedTierWriting = .awaited, downProbeInterval: Duration = .seconds(1),
        maxWaitingWrites: Int? = nil,
        metrics: any MetricsFactory, metricsName: String = "tiered"
    ) {
        self.init(
            memory: memory, shared: shared, environment: environment, firstRetryDelay: firstRetryDelay,
            maxRetryDelay: maxRetryDelay, sharedTierWriting: sharedTierWriting, downProbeInterval: downProbeInterval,
            maxWaitingWrites: maxWaitingWrites, metricsFactory: metrics, metricsName: metricsName)
    }

    deinit {
        let tasks = state.withLock { [$0.retry, $0.following] }
        for task in tasks { task?.cancel() }
    }

    /// The writes that have not reached the shared tier yet, by key (on their way or waiting).
    public var unsentWrites: Int { state.withLock { $0.writes.unsent } }

    /// Returns once no write of `key` is on its way to the shared tier or waiting for it: the
    /// shared tier has this node's last write of the key, or refused it as older than its row (or
    /// the write was forgotten by a clear). What a fleet-wide lock holder waits for before it lets
    /// go, so the next holder reads what it wrote.
    /// - Throws: `CancellationError` as soon as the waiting task is cancelled.
    public func waitUntilSent(_ key: Key) async throws {
        try await state.wait(in: \.sentWaiters, current: { $0.writes }, until: { $0.unsentWrite(of: key) == nil })
    }

    /// Whether the shared tier failed the last time it was used.
    public var sharedTierIsDown: Bool { state.withLock { $0.writes.isDown } }

    /// Returns once at most `count` writes have not reached the shared tier (every write, by
    /// default): a test's wait for the repairs, or a shutdown's.
    /// - Throws: `CancellationError` as soon as the waiting task is cancelled.
    public func waitForUnsentWrites(atMost count: Int = 0) async throws {
        try await state.wait(in: \.unsentWaiters, current: { $0.writes.unsent }, until: { $0 <= count })
    }

    // MARK: Store

    /// Inlinable: an app's call is specialised for its tiers, so a hit a memory tier answers without
    /// suspending (``MemoryStore``) costs about what that tier's own read does.
    @inlinable
    public func retrieve(_ key: Key) async throws -> CacheEntry<Value>? {
        if let hit = memory.immediateEntry(for: key) {
            metrics?.memoryHits.increment()
            return hit
        }
        return try await retrieveAfterImmediateMiss(key)
    }

    @usableFromInline
    func retrieveAfterImmediateMiss(_ key: Key) async throws -> CacheEntry<Value>? {
        if let hit = try await memory.retrieve(key) {
            metrics?.memoryHits.increment()
            return hit
        }
        // This node's own write on its way: the shared tier holds an older version until it lands.
        switch state.withLock({ $0.writes.unsentWrite(of: key) }) {
        case .insert(let entry)?:
            metrics?.memoryHits.increment()
            return entry
        case .delete?:
            metrics?.misses.increment()
            return nil
        case .refresh?, nil:
            break
        }
        guard let (entry, started) = await readShared(["key": "\(key)"], { try await shared.retrieve(key) }) else {
            metrics?.misses.increment()
            return nil
        }
        if let entry {
            metrics?.sharedHits.increment()
            await fill(entry, for: key, readStartedAt: started)
        } else {
            metrics?.misses.increment()
        }
        return entry
    }

    /// Reads the shared tier with `read`, and the coherence number the read started at; `nil` when
    /// it failed (logged: a miss), which marks the tier down, as an answer marks it up.
    private func readShared<T: Sendable>(
        _ metadata: Logger.Metadata, _ read: () async throws -> T
    ) async -> (T, started: UInt64)? {
        let now = environment.now()
        let (started, mayTry) = state.withLock { state in
            (state.coherence.readStarted, state.writes.readMayTry(now: now, probeInterval: downProbeInterval))
        }
        guard mayTry else {
            metrics?.sharedReadsSkipped.increment()
            return nil
        }
        do {
            let result = try await read()
            await perform(handle(.answered))
            return (result, started)
        } catch {
            metrics?.sharedReadFailures.increment()
            environment.logger.warning(
                "the shared tier could not be read: a miss",
                metadata: metadata.merging(["store": "\(shared)", "error": "\(error)"]) { _, new in new })
            await perform(handle(.failed))
            return nil
        }
    }

    @inlinable
    public func immediateEntry(for key: Key) -> CacheEntry<Value>? {
        memory.immediateEntry(for: key)
    }

    /// The memory tier's entries, then the shared tier's for the rest in one ``Store/retrieveMany(_:)``
    /// (kept in memory as a single read's would be). A shared tier that fails is a miss for the rest.
    public func retrieveMany(_ keys: [Key]) async throws -> [Key: CacheEntry<Value>] {
        var entries: [Key: CacheEntry<Value>] = [:]
        var rest: [Key] = []
        for key in Set(keys) {
            if let hit = try await memory.retrieve(key) { entries[key] = hit } else { rest.append(key) }
        }
        metrics?.memoryHits.increment(by: entries.count)
        guard !rest.isEmpty,
            let (shared, started) = await readShared(["keys": "\(rest.count)"], { try await self.shared.retrieveMany(rest) })
        else {
            metrics?.misses.increment(by: rest.count)
            return entries
        }
        for (key, entry) in shared {
            await fill(entry, for: key, readStartedAt: started)
            entries[key] = entry
        }
        metrics?.sharedHits.increment(by: shared.count)
        metrics?.misses.increment(by: rest.count - shared.count)
        return entries
    }

    /// Keeps `entry` in the memory tier and sends it to the shared tier, unless the memory tier
    /// holds an entry of `key` stored later (then nothing changes: the latest store time wins).
    public func insert(_ entry: CacheEntry<Value>, for key: Key) async throws {
        let actions = try await withTurn(key, cancellable: false) { () async throws -> [SharedTierWrites<Key, Write>.Action] in
            if let held = try await memoryEntry(key), held.storedAt > entry.storedAt { return [] }
            if state.withLock({ $0.coherence.isOutdated(key, storedAt: entry.storedAt) }) { return [] }
            try await memory.insert(entry, for: key)
            return registerLocalWrite(key, .insert(entry), at: entry.storedAt, setAt: entry.storedAt)
        }
        await send(actions)
    }

    /// Removes `key`'s entry from both tiers. The removal is timed at now (the store's clock), or
    /// at the store time of the entry the memory tier holds when that is later: the shared tier
    /// removes a row stored at or before that time, and keeps one another node stored later (the
    /// latest store time wins).
    public func delete(_ key: Key) async throws {
        let actions = try await withTurn(key, cancellable: false) { () async throws -> [SharedTierWrites<Key, Write>.Action] in
            var at = environment.now()
            if let held = try await memoryEntry(key) { at = max(at, held.storedAt) }
            try await memory.delete(key)
            // Not remembered as the key's newest time: a later insert is the app's later intent,
            // whatever its store time.
            return registerLocalWrite(key, .delete(at: at), at: nil)
        }
        await send(actions)
    }

    /// Re-stamps `key`'s entry in both tiers, unless the memory tier holds one stored later.
    public func refresh(_ key: Key, storedAt: Date, validators: CacheValidators) async throws -> Bool {
        let (inMemory, actions) = try await withTurn(key, cancellable: false) { () async throws -> (Bool, [SharedTierWrites<Key, Write>.Action]) in
            if let held = try await memoryEntry(key), held.storedAt > storedAt { return (true, []) }
            if state.withLock({ $0.coherence.isOutdated(key, storedAt: storedAt) }) { return (false, []) }
            let inMemory = try await memory.refresh(key, storedAt: storedAt, validators: validators)
            return (inMemory, registerLocalWrite(key, .refresh(storedAt: storedAt, validators: validators), at: storedAt, setAt: storedAt))
        }
        await send(actions)
        // Whether either tier has the entry: L2 may hold one L1 let go.
        if inMemory { return true }
        return (try? await shared.retrieve(key)) != nil
    }

    /// The memory tier's entry for `key`, without suspending when the tier can answer so.
    private func memoryEntry(_ key: Key) async throws -> CacheEntry<Value>? {
        if let held = memory.immediateEntry(for: key) { return held }
        return try await memory.retrieve(key)
    }

    /// Registers this node's write of `key` (in its turn, after the memory tier has it): reads of
    /// the shared tier that started before it never fill the memory tier, and the write is on
    /// its way to the shared tier. The actions carry it there.
    private func registerLocalWrite(_ key: Key, _ write: Write, at: Date?, setAt: Date? = nil) -> [SharedTierWrites<Key, Write>.Action] {
        let (actions, unsent) = state.withLock { state in
            state.coherence.changeReceived(key, at: at, setAt: setAt)
            let actions = state.writes.handle(.written(key, write))
            state.unsentWaiters.resumeSatisfied(by: state.writes.unsent)
            return (actions, state.writes.unsent)
        }
        metrics?.unsentWrites.record(unsent)
        return actions
    }

    /// Carries out the actions of a write: before returning, or in the background
    /// (``SharedTierWriting``).
    private func send(_ actions: [SharedTierWrites<Key, Write>.Action]) async {
        guard !actions.isEmpty else { return }
        switch sharedTierWriting {
        case .awaited: await perform(actions)
        case .inBackground: Task { await self.perform(actions) }
        }
    }

    // MARK: Turns

    /// Runs `body` in `key`'s turn: no other change of `key`'s memory entry runs meanwhile.
    /// - Throws: `CancellationError` when the task is cancelled while it waits for the turn
    ///   (nothing was done), or what `body` throws.
    private func withTurn<T>(_ key: Key, cancellable: Bool = true, _ body: () async throws -> T) async throws -> T {
        let ticket = cancellable ? try await takeTurn(key) : await takeTurnUncancellably(key)
        defer { passTurn(key, ticket) }
        return try await body()
    }

    private func takeTurn(_ key: Key) async throws -> UInt64 {
        let (ticket, holds) = state.withLock { $0.turns.request(key) }
        if holds { return ticket }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let resume = state.withLock { state -> Result<Void, any Error>? in
                    if state.turns.holds(key, ticket) { return .success(()) }
                    // Withdrawn by the cancellation handler before it got here.
                    guard state.turns.isQueued(key, ticket) else { return .failure(CancellationError()) }
                    state.turnWaiters[ticket] = continuation
                    return nil
                }
                if let resume { continuation.resume(with: resume) }
            }
        } onCancel: {
            let continuation = state.withLock { state -> CheckedContinuation<Void, any Error>? in
                guard state.turns.withdraw(key, ticket) else { return nil }
                return state.turnWaiters.removeValue(forKey: ticket)
            }
            continuation?.resume(throwing: CancellationError())
        }
        return ticket
    }

    /// A write's wait for its turn: a cancelled caller still writes (its invalidation or its value
    /// must not be lost because its task went away). The wait is bounded by the memory tier's
    /// operations on the key that come before it.
    private func takeTurnUncancellably(_ key: Key) async -> UInt64 {
        let (ticket, holds) = state.withLock { $0.turns.request(key) }
        if holds { return ticket }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let holdsNow = state.withLock { state -> Bool in
                if state.turns.holds(key, ticket) { return true }
                state.uncancellableTurnWaiters[ticket] = continuation
                return false
            }
            if holdsNow { continuation.resume() }
        }
        return ticket
    }

    private func passTurn(_ key: Key, _ ticket: UInt64) {
        let (waiter, uncancellable) = state.withLock { state
            -> (CheckedContinuation<Void, any Error>?, CheckedContinuation<Void, Never>?) in
            guard let next = state.turns.finish(key, ticket) else { return (nil, nil) }
            // Not registered yet: it finds that it holds the turn when it registers.
            return (state.turnWaiters.removeValue(forKey: next), state.uncancellableTurnWaiters.removeValue(forKey: next))
        }
        waiter?.resume()
        uncancellable?.resume()
    }

    /// Empties both tiers. Writes waiting for the shared tier are forgotten, and the ones on their
    /// way are let end first: arriving after the shared tier was emptied, they would put back what
    /// the call removed.
    public func removeAll() async throws {
        forgetWaitingWrites()
        try await waitForSendsOnTheirWay()
        try await memory.removeAll()
        try await shared.removeAll()
    }

    public var origin: Origin { shared.origin }

    /// Returns once the writes on their way to the shared tier now have ended (sent or failed);
    /// writes made meanwhile are not waited for, so a busy store cannot hold the caller forever.
    /// - Throws: `CancellationError` as soon as the waiting task is cancelled.
    /// A send that fails meanwhile is put back to wait for a retry: it is forgotten then, with
    /// every other write made before the call, so it does not land after the clear either.
    func waitForSendsOnTheirWay() async throws {
        let (onTheirWay, horizon) = state.withLock { state in
            let sending = state.writes.sending.mapValues(\.number)
            if !sending.isEmpty {
                state.sendWaits += 1
                state.sendWaitsWaiters.resumeSatisfied(by: state.sendWaits)
            }
            return (sending, state.writes.lastWriteNumber)
        }
        guard !onTheirWay.isEmpty else { return }
        try await state.wait(in: \.sentWaiters, current: { $0.writes }, until: { writes in
            onTheirWay.allSatisfy { key, number in writes.sending[key]?.number != number }
        })
        state.withLock { state in
            state.writes.forgetWaiting(numberedAtMost: horizon)
            state.unsentWaiters.resumeSatisfied(by: state.writes.unsent)
            state.sentWaiters.resumeSatisfied(by: state.writes)
        }
    }

    /// Returns once `count` calls have found writes on their way to the shared tier and waited for
    /// them (a test's probe).
    func waitForSendWaits(atLeast count: Int) async throws {
        try await state.wait(in: \.sendWaitsWaiters, current: { $0.sendWaits }, until: { $0 >= count })
    }

    /// Forgets the writes waiting for the shared tier, and their retry.
    func forgetWaitingWrites() {
        let retry = state.withLock { state -> Task<Void, Never>? in
            state.writes.forgetWaiting()
            state.unsentWaiters.resumeSatisfied(by: state.writes.unsent)
            state.sentWaiters.resumeSatisfied(by: state.writes)
            defer { state.retry = nil }
            return state.retry
        }
        retry?.cancel()
    }

    /// Keeps an entry read from the shared tier in memory, as stored (L1 serves it no longer than
    /// L2 would), unless a change of its key (another node's, or this node's own write) arrived
    /// while the read ran, a write of the key has not reached the shared tier yet, or the memory
    /// tier holds an entry stored later.
    private func fill(_ entry: CacheEntry<Value>, for key: Key, readStartedAt started: UInt64) async {
        func mayFill() -> Bool {
            state.withLock { state in
                let may = state.coherence.mayFill(key, readStartedAt: started, storedAt: entry.storedAt)
                    && state.writes.unsentWrite(of: key) == nil
                if !may { state.backplane.fillsSkipped += 1 }
                return may
            }
        }
        do {
            try await withTurn(key) {
                guard mayFill() else { return }
                if let held = try? await memoryEntry(key), held.storedAt >= entry.storedAt {
                    state.withLock { $0.backplane.fillsSkipped += 1 }
                    return
                }
                try await memory.insert(entry, for: key)
                // Every change of this key takes its turn: only a restart of listening (or the
                // coherence's memory filling up) can have come between the check and the insert.
                if !mayFill() { try? await memory.delete(key) }
            }
        } catch is CancellationError {
            return
        } catch {
            environment.logger.warning(
                "the memory tier could not keep a shared entry", metadata: ["key": "\(key)", "error": "\(error)"])
        }
    }

    // MARK: Carrying out the decisions

    private func handle(_ event: SharedTierWrites<Key, Write>.Event) -> [SharedTierWrites<Key, Write>.Action] {
        let (actions, unsent) = state.withLock { state in
            let actions = state.writes.handle(event)
            state.unsentWaiters.resumeSatisfied(by: state.writes.unsent)
            state.sentWaiters.resumeSatisfied(by: state.writes)
            return (actions, state.writes.unsent)
        }
        metrics?.unsentWrites.record(unsent)
        return actions
    }

    /// Carries out `actions`, and the actions their outcomes lead to, until none is left.
    private func perform(_ actions: [SharedTierWrites<Key, Write>.Action]) async {
        var actions = actions
        while !actions.isEmpty {
            let action = actions.removeFirst()
            switch action {
            case .send(let send):
                let succeeded = await self.send(send)
                actions += handle(.sent(send.key, number: send.number, succeeded: succeeded))
            case .scheduleRetry(let failures):
                scheduleRetry(afterFailures: failures)
            }
        }
    }

    /// Sends one write to the shared tier; `false` when it failed (logged).
    private func send(_ send: SharedTierWrites<Key, Write>.Send) async -> Bool {
        do {
            // A repair first reads the row: another process may have stored a later one meanwhile.
            // A shared tier that keeps the newest itself decides in its own statement.
            var current: CacheEntry<Value>?
            if send.isRepair, !sharedKeepsNewest { current = try await shared.retrieve(send.key) }
            switch send.write {
            case .insert(let entry):
                if let current, current.storedAt > entry.storedAt { return true }
                if let newest = shared as? any NewestStoreTimeWins<Key, Value> {
                    // Refused: another node stored a later entry. A copy this node kept of its own
                    // older write (one that came late, after the node forgot the later change) goes.
                    if try await !newest.insertUnlessNewer(entry, for: send.key) {
                        await dropRefused(send.key, storedAt: entry.storedAt)
                    }
                } else {
                    try await shared.insert(entry, for: send.key)
                }
            case .delete(let at):
                if let current, current.storedAt > at { return true }
                if send.isRepair, let newest = shared as? any NewestStoreTimeWins<Key, Value> {
                    // Sent again after the tier was away: a row another node stored meanwhile stays.
                    try await newest.delete(send.key, storedAtOrBefore: at)
                } else {
                    try await shared.delete(send.key)
                }
            case .refresh(let storedAt, let validators):
                if let current, current.storedAt > storedAt { return true }
                _ = try await shared.refresh(send.key, storedAt: storedAt, validators: validators)
            }
            return true
        } catch {
            metrics?.sharedWriteFailures.increment()
            environment.logger.warning(
                "the shared tier refused a write: it waits, and is sent again when the tier answers",
                metadata: ["store": "\(shared)", "key": "\(send.key)", "error": "\(error)"])
            return false
        }
    }

    /// Drops the memory tier's copy of `key` if it is still the write stored at `storedAt` that
    /// the shared tier refused: the next read takes the shared tier's later entry.
    private func dropRefused(_ key: Key, storedAt: Date) async {
        try? await withTurn(key) {
            guard let held = try? await memoryEntry(key), held.storedAt == storedAt else { return }
            state.withLock { $0.coherence.changeReceived(key) }
            try? await memory.delete(key)
        }
    }

    private func scheduleRetry(afterFailures failures: Int) {
        let delay = repairBackoff.delay(beforeRetry: failures, random: 0)
        let clock = environment.clock
        let task = Task { [weak self] in
            do { try await clock.sleep(for: delay) } catch { return }
            guard let self else { return }
            await self.perform(self.handle(.retryDue))
        }
        let previous = state.withLock { state -> Task<Void, Never>? in
            defer { state.retry = task }
            return state.retry
        }
        previous?.cancel()
    }
}

// MARK: - Invalidation

extension TieredStore: InvalidatingStore where Shared: InvalidatingStore {
    /// Expires or removes the selected entries of the shared tier (announced to the fleet by a
    /// shared store that announces), then empties this node's memory tier, which does not know its
    /// copies' tags: later reads fill it again from the shared tier. It also forgets the writes
    /// waiting for the shared tier and lets the ones on their way end first (which may be of
    /// selected entries: arriving later, they would undo the invalidation), as ``removeAll()`` does.
    /// - Throws: the shared tier's error when it cannot invalidate; the memory tier is then untouched.
    public func invalidate(_ selection: CacheSelection, as mode: InvalidationMode) async throws -> Int {
        forgetWaitingWrites()
        try await waitForSendsOnTheirWay()
        let count = try await shared.invalidate(selection, as: mode)
        state.withLock { $0.coherence.listeningStarted() }
        try await memory.removeAll()
        return count
    }
}

// MARK: - Other nodes' writes

extension TieredStore where Key == String {
    /// A store of `memory` in front of `shared` that follows `backplane`: another node's write
    /// drops this node's memory copy of its key; see ``TieredStore``.
    ///
    /// ```swift
    /// let shared = try PostgresStore<Feed>(url: url)
    /// let backplane = try PostgresBackplane(announcingFor: shared)
    /// let cache = TieredStore(memory: MemoryStore(countLimit: 10_000), shared: shared, backplane: backplane)
    /// ```
    ///
    /// The store follows the backplane from here on, in a task of its own that ends when the store
    /// is released; it keeps the backplane for as long as it lives. The other parameters are as in
    /// ``init(memory:shared:environment:firstRetryDelay:maxRetryDelay:sharedTierWriting:downProbeInterval:maxWaitingWrites:metricsFactory:metricsName:)``.
    public convenience init(
        memory: Memory, shared: Shared, backplane: some Backplane, environment: LoadEnvironment = .live,
        firstRetryDelay: Duration = .seconds(1), maxRetryDelay: Duration = .seconds(60),
        sharedTierWriting: SharedTierWriting = .awaited, downProbeInterval: Duration = .seconds(1),
        maxWaitingWrites: Int? = nil,
        metricsFactory: (any MetricsFactory)? = nil, metricsName: String = "tiered"
    ) {
        self.init(
            memory: memory, shared: shared, environment: environment, firstRetryDelay: firstRetryDelay,
            maxRetryDelay: maxRetryDelay, sharedTierWriting: sharedTierWriting, downProbeInterval: downProbeInterval,
            maxWaitingWrites: maxWaitingWrites, metricsFactory: metricsFactory, metricsName: metricsName)
        let identity = BackplaneIdentity(node: backplane.node, instance: backplane.instance)
        let events = backplane.events()
        let task = Task { [weak self] in
            for await event in events {
                guard let self else { return }
                await self.receive(event, as: identity)
            }
        }
        state.withLock { state in
            state.following = task
            state.followed = backplane
        }
    }

    /// What the store did with its backplane's events so far.
    public var backplaneStatistics: BackplaneStatistics { state.withLock { $0.backplane } }

    /// Returns once the store has handled at least `count` backplane events (changes, its own
    /// included, and starts of listening): a test's wait for a change to arrive.
    /// - Throws: `CancellationError` as soon as the waiting task is cancelled.
    public func waitForBackplaneEvents(atLeast count: Int) async throws {
        try await state.wait(in: \.backplaneWaiters, current: { $0.backplane.events }, until: { $0 >= count })
    }

    /// Handles one backplane event as the backplane `identity`.
    func receive(_ event: BackplaneEvent, as identity: BackplaneIdentity) async {
        let own = switch event {
        case .listening: false
        case .changed(let change): change.isOwn(instance: identity.instance, node: identity.node)
        case .changedAll(_, let sender, let instance): instance.map { $0 == identity.instance } ?? (sender == identity.node)
        case .invalidated(let invalidation): invalidation.isOwn(instance: identity.instance, node: identity.node)
        }
        if let metrics {
            let kind = switch event {
            case .listening: "listening"
            case .changed: own ? "own" : "change"
            case .changedAll: own ? "own" : "all"
            case .invalidated: own ? "own" : "invalidation"
            }
            metrics.backplaneEvents[kind]?.increment()
        }
        switch event {
        case .listening:
            await forgetMemory(because: "the backplane (re)started listening")
            counted { $0.listeningStarts += 1 }
        case .changed where own, .changedAll where own, .invalidated where own:
            counted { $0.ownChangesIgnored += 1 }
        case .changedAll:
            await forgetMemory(because: "another node changed every entry")
            counted { $0.copiesDropped += 1 }
        case .invalidated(let invalidation):
            // The memory tier does not know its copies' tags: it forgets them all and reads the
            // shared tier, which the invalidation already changed, again.
            await forgetMemory(because: "another node invalidated \(invalidation.selection)")
            counted { $0.invalidations += 1 }
        case .changed(let change):
            // In the key's turn: a local write or a fill of the key never interleaves with it. A
            // cancelled turn (the store is going away) still counts the change as received.
            let dropped = (try? await withTurn(change.key) { () async -> Bool in
                // A node whose clock runs ahead must not pin this node's writes of the key: its
                // time counts as no later than this node's now.
                let now = environment.now()
                // A read that returns the value the change wrote (or a later one) may still fill.
                state.withLock {
                    $0.coherence.changeReceived(change.key, at: min(change.at, now), setAt: change.action == .set ? change.at : nil)
                }
                let held = try? await memoryEntry(change.key)
                // Only a copy older than the change: a later one (this node's own write, or a read
                // that saw an even newer row) stays.
                guard let held, held.storedAt < change.at || (change.action != .set && held.storedAt == change.at) else {
                    return false
                }
                try? await memory.delete(change.key)
                return true
            }) ?? false
            if dropped { counted { $0.copiesDropped += 1 } } else { counted { _ in } }
        }
    }

    /// Empties the memory tier; reads running now do not fill it.
    private func forgetMemory(because reason: String) async {
        state.withLock { $0.coherence.listeningStarted() }
        do {
            try await memory.removeAll()
        } catch {
            environment.logger.error(
                "the memory tier could not be emptied: its copies may be stale",
                metadata: ["reason": "\(reason)", "error": "\(error)"])
        }
    }

    private func counted(_ update: (inout BackplaneStatistics) -> Void) {
        state.withLock { state in
            update(&state.backplane)
            state.backplane.events += 1
            state.backplaneWaiters.resumeSatisfied(by: state.backplane.events)
        }
    }
}

/// Who a backplane is: its node's name (for logs) and its instance (to recognise its own changes).
struct BackplaneIdentity: Sendable, Hashable {
    var node: String
    var instance: String
}

/// A store whose writes never replace an entry of a key stored later, decided in one step on the
/// store's side: an insert or refresh writes only over an entry whose store time is not later
/// than its own, and ``delete(_:storedAtOrBefore:)`` removes only an entry stored at or before
/// its time. Every node of a fleet then converges on the entry with the latest store time, as
/// each ``TieredStore``'s memory tier does, whatever order the writes commit in.
///
/// A ``TieredStore`` in front of such a store sends its repairs as they are, without reading the
/// row first. `PostgresStore` is one.
public protocol NewestStoreTimeWins<Key, Value>: Store {
    /// Removes `key`'s entry if it was stored at or before `time`; an entry stored later stays.
    /// Succeeds when there is none.
    func delete(_ key: Key, storedAtOrBefore time: Date) async throws

    /// Stores `entry` under `key` unless the store holds an entry of `key` stored later, as
    /// ``Store/insert(_:for:)`` does: `false` only when a later entry is there (a value the store
    /// declines for another reason, such as its size, is not a refusal).
    func insertUnlessNewer(_ entry: CacheEntry<Value>, for key: Key) async throws -> Bool
}
