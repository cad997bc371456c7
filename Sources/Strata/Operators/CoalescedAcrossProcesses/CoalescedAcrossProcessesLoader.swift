import Foundation

/// A remote called once per fleet for a key that every process misses at once; built by
/// `coalescedAcrossProcesses(in:key:freshness:lock:timeout:pollInterval:)`.
///
/// Put it where the chain goes to the remote after its cache tiers missed. Each load:
/// 1. tries to take the key's ``FleetLock`` without waiting;
/// 2. when it holds it, reads the shared store once more (another process may have written the
///    key just before), answers from it if the entry is fresh, else loads from the base loader,
///    writes the answer to the store, and releases the lock (also when the load fails or is
///    cancelled);
/// 3. when another process holds it, waits `pollInterval`, reads the store for an entry the holder
///    wrote and serves it if it is fresh, else tries the lock again (a holder that died released
///    it), and so on;
/// 4. `timeout` after it began (asking the lock and reading the store count too), loads anyway: the lock is about efficiency, never
///    correctness. A lock that cannot be asked (its database unreachable) is a load without it.
///
/// In one process, put `coalesced()` around it (or around the whole chain), so that the
/// process's concurrent misses of one key make one load here. A store read that fails counts as
/// no entry. The wait honours cancellation, on the environment's clock.
public struct CoalescedAcrossProcessesLoader<Base: Loader, S: Store, Lock: FleetLock>: Loader where S.Value == Base.Output {
    public typealias Input = Base.Input
    public typealias Output = Base.Output

    public let base: Base
    public let store: S
    public let lock: Lock
    /// Which store entries answer without a load: the chain's freshness for the store.
    public let freshness: FreshnessPolicy
    /// How long a load waits for another process's answer before it loads anyway.
    public let timeout: Duration
    /// How often a waiting load reads the store and tries the lock again.
    public let pollInterval: Duration
    let key: @Sendable (Input) -> S.Key

    init(
        base: Base, store: S, lock: Lock, key: @escaping @Sendable (Input) -> S.Key, freshness: FreshnessPolicy,
        timeout: Duration, pollInterval: Duration
    ) {
        precondition(timeout >= .zero, "coalescedAcrossProcesses: timeout must not be negative")
        precondition(pollInterval > .zero, "coalescedAcrossProcesses: pollInterval must be positive")
        self.base = base
        self.store = store
        self.lock = lock
        self.key = key
        self.freshness = freshness
        self.timeout = timeout
        self.pollInterval = pollInterval
    }

    public func load(_ input: Input) async throws -> Output {
        try await load(input, in: .current)
    }

    public func load(_ input: Input, in context: LoadContext) async throws -> Output {
        try await load(input, in: context, clock: context.environment.clock)
    }

    /// The load, on the environment's clock opened to its concrete type, so the wait runs to a
    /// deadline on it (the time spent asking the lock and reading the store counts too): one
    /// ``FleetLockTurn``.
    private func load<C: Clock>(_ input: Input, in context: LoadContext, clock: C) async throws -> Output where C.Duration == Duration {
        let key = key(input)
        let lockName = "\(key)"
        let environment = context.environment
        let turn = FleetLockTurn(lock: lock, clock: clock, timeout: timeout, pollInterval: pollInterval)
        /// The wait's event, recorded before what follows it (the value read back, or the load).
        let pendingWait = Locked<(Duration, FleetLockWait)?>(nil)
        func recordPendingWait() {
            if let (waited, outcome) = pendingWait.withLock({ $0.take() }) {
                context.record(.waitedForFleetLock(key: lockName, waited: waited, outcome: outcome))
            }
        }
        let result = try await turn.run(
            lockName,
            readBack: { await freshEntry(key, in: context).map(TurnResult.stored) },
            work: {
                recordPendingWait()
                return .loaded(try await loadAndStore(input, key: key, in: context))
            },
            event: { event in
                switch event {
                case .lockUnavailable(let error):
                    environment.logger.warning(
                        "the fleet lock could not be asked: loading without it",
                        metadata: ["key": "\(key)", "error": "\(error)"])
                case .waited(let waited, let outcome):
                    if outcome == .timedOut {
                        environment.logger.info(
                            "waited for another process's load past the fleet lock's timeout: loading anyway",
                            metadata: ["key": "\(key)", "timeout": "\(timeout.formattedAge)"])
                    }
                    pendingWait.withLock { $0 = (waited, outcome) }
                case .waiting, .acquiredAtOnce:
                    break
                }
            })
        switch result {
        case .loaded(let value):
            return value
        case .stored(let cached):
            recordPendingWait()
            let now = environment.now()
            context.record(.served(Provenance(
                origin: store.origin, tier: context.tierName(default: "\(store.storeDescription) [coalesced across processes]"),
                storedAt: cached.storedAt, age: max(.zero, .between(cached.storedAt, now)))))
            return cached.value
        }
    }

    private enum TurnResult: Sendable {
        case stored(CacheEntry<Output>)
        case loaded(Output)
    }

    /// The store's entry for `key` when the freshness accepts it, else `nil`.
    private func freshEntry(_ key: S.Key, in context: LoadContext) async -> CacheEntry<Output>? {
        guard let cached = try? await store.retrieve(key) else { return nil }
        guard freshness.accepts(cached, now: context.environment.now()) else { return nil }
        return cached
    }

    private func loadAndStore(_ input: Input, key: S.Key, in context: LoadContext) async throws -> Output {
        let value = try await base.load(input, in: context)
        try Task.checkCancellation()
        await store.insertReportingFailure(value, for: key, in: context)
        return value
    }
}

extension CoalescedAcrossProcessesLoader: LoaderDescribing {
    public var loaderNode: LoaderNode {
        LoaderNode(
            label: "coalescedAcrossProcesses(\(store.storeDescription), \(freshness), timeout \(timeout.formattedAge))",
            children: [base.chainNode])
    }
}

extension Loader {
    /// Loads a key once per fleet: the process that takes the key's ``FleetLock`` loads it and
    /// writes the answer to `store`; the others read it from there.
    ///
    /// ```swift
    /// let remote = HTTPLoader(url: feedURL).decoding(Feed.self)
    ///     .coalescedAcrossProcesses(in: cache, key: "feed", freshness: .maxAge(.seconds(5 * 60)), lock: fleetLock)
    /// let feed = cache.loader(key: "feed", freshness: .maxAge(.seconds(5 * 60)))
    ///     .fallingBack(to: remote)
    ///     .coalesced()
    /// ```
    ///
    /// - Parameters:
    ///   - store: the store every process shares (a `TieredStore` over `PostgresStore`), read again
    ///     once the lock is held and while another process holds it, and written with the answer.
    ///   - key: the store key of an input; its description names the lock.
    ///   - freshness: which entries answer without a load (the chain's freshness for the store).
    ///   - lock: the lock every process sees (`PostgresFleetLock`).
    ///   - timeout: how long to wait for another process's answer before loading anyway (5 s).
    ///   - pollInterval: how often a waiting load reads the store and tries the lock (50 ms).
    public func coalescedAcrossProcesses<S: Store, Lock: FleetLock>(
        in store: S, key: @escaping @Sendable (Input) -> S.Key, freshness: FreshnessPolicy, lock: Lock,
        timeout: Duration = .seconds(5), pollInterval: Duration = .milliseconds(50)
    ) -> CoalescedAcrossProcessesLoader<Self, S, Lock> where S.Value == Output {
        CoalescedAcrossProcessesLoader(
            base: self, store: store, lock: lock, key: key, freshness: freshness, timeout: timeout, pollInterval: pollInterval)
    }

    /// `coalescedAcrossProcesses(in:key:freshness:lock:timeout:pollInterval:)` with one key for every input.
    public func coalescedAcrossProcesses<S: Store, Lock: FleetLock>(
        in store: S, key: S.Key, freshness: FreshnessPolicy, lock: Lock,
        timeout: Duration = .seconds(5), pollInterval: Duration = .milliseconds(50)
    ) -> CoalescedAcrossProcessesLoader<Self, S, Lock> where S.Value == Output {
        coalescedAcrossProcesses(
            in: store, key: { _ in key }, freshness: freshness, lock: lock, timeout: timeout, pollInterval: pollInterval)
    }
}
