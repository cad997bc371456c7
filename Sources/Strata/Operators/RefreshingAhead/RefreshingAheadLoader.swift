import Foundation

/// Refresh ahead: a cached copy in the last part of its life answers at once and starts one
/// background refresh for its key, so a key read often is refreshed before it expires and no reader
/// waits for the remote; built by `refreshingAhead(_:in:key:)`.
///
/// - A copy younger than `refreshAfter` is served (a hit).
/// - A copy between `refreshAfter` and `maxAge` old is served too, and the first such read starts
///   a background load of this loader that writes its answer to the store. Reads trigger it, never
///   a timer; while it runs, further reads of the key are plain hits.
/// - An expired copy, or none, is loaded now from this loader (and written to the store), as
///   `writingThrough(in:key:)` does.
/// - After a background refresh fails (logged), the key is not refreshed in the background again
///   for `failSafe` (30 s by default): a failing remote is not called on every read. The copy
///   keeps its own store time, so it still expires at `maxAge` from when it was stored.
///
/// The background load runs in the environment of the read that started it (clock, logger), in a
/// task of its own that the reader's cancellation does not reach; it ends when the load does.
public struct RefreshingAheadLoader<Base: Loader, S: Store>: Loader where S.Value == Base.Output {
    public typealias Input = Base.Input
    public typealias Output = Base.Output

    public let base: Base
    public let store: S
    /// The age from which a copy is expired (loaded anew).
    public let maxAge: Duration
    /// The age from which a read also refreshes the copy in the background.
    public let refreshAfter: Duration
    /// How long a key is not refreshed in the background after its refresh failed.
    public let failSafe: Duration
    let key: @Sendable (Input) -> S.Key
    let decisions: Decisions

    /// The state machine, shared by every copy of the loader, and who waits for its refreshes.
    final class Decisions: Sendable {
        struct State: Sendable {
            var machine = RefreshingAheadStateMachine<S.Key>()
            var waiters = ConditionWaiters<Int>()
        }
        let state = Locked(State())

        func copyRead(_ key: S.Key, age: Duration, refreshAfter: Duration, maxAge: Duration, now: Date) -> RefreshingAheadStateMachine<S.Key>.Decision {
            state.withLock { $0.machine.copyRead(key, age: age, refreshAfter: refreshAfter, maxAge: maxAge, now: now) }
        }

        func refreshEnded(_ key: S.Key, succeeded: Bool, now: Date, failSafe: Duration) {
            state.withLock { state in
                state.machine.refreshEnded(key, succeeded: succeeded, now: now, failSafe: failSafe)
                state.waiters.resumeSatisfied(by: state.machine.refreshing.count)
            }
        }
    }

    /// Returns once no background refresh runs (a test's wait, or a shutdown's).
    /// - Throws: `CancellationError` as soon as the waiting task is cancelled.
    public func waitForBackgroundRefreshes() async throws {
        try await decisions.state.wait(in: \.waiters, current: { $0.machine.refreshing.count }, until: { $0 == 0 })
    }

    init(base: Base, store: S, key: @escaping @Sendable (Input) -> S.Key, maxAge: Duration, refreshAfter: Duration, failSafe: Duration) {
        precondition(refreshAfter >= .zero && refreshAfter < maxAge, "refreshingAhead: refreshAfter must be at least zero and less than maxAge")
        self.base = base
        self.store = store
        self.key = key
        self.maxAge = maxAge
        self.refreshAfter = refreshAfter
        self.failSafe = failSafe
        self.decisions = Decisions()
    }

    public func load(_ input: Input) async throws -> Output {
        try await load(input, in: .current)
    }

    public func load(_ input: Input, in context: LoadContext) async throws -> Output {
        let key = key(input)
        let cached: CacheEntry<Output>?
        do {
            cached = try await store.retrieve(key)
        } catch {
            try rethrowIfCancelled(error)
            cached = nil   // an unreadable copy is a miss: the base loader answers
        }
        let now = context.environment.now()
        // An entry an invalidation expired is loaded anew, as one past `maxAge` is.
        if let cached, !cached.isExpired, context.revalidatingSince.map({ cached.storedAt > $0 }) ?? true {
            let age = Duration.between(cached.storedAt, now)
            let decision = decisions.copyRead(key, age: max(.zero, age), refreshAfter: refreshAfter, maxAge: maxAge, now: now)
            if decision != .load {
                let tier = context.tierName(default: "\(store.storeDescription) [refreshing ahead]")
                if decision == .serveAndRefresh {
                    refreshInBackground(input, key: key, environment: context.environment)
                    context.record(.refreshStarted(tier: tier, key: "\(key)"))
                }
                context.record(.served(Provenance(origin: store.origin, tier: tier, storedAt: cached.storedAt, age: max(.zero, age))))
                return cached.value
            }
        }
        try Task.checkCancellation()
        let value = try await base.load(input, in: context)
        try Task.checkCancellation()
        await store.insertReportingFailure(value, for: key, in: context)
        return value
    }

    /// Loads `input` in a task of its own and writes the answer; reports the end to the machine.
    private func refreshInBackground(_ input: Input, key: S.Key, environment: LoadEnvironment) {
        let (base, store, decisions, failSafe) = (base, store, decisions, failSafe)
        Task {
            let context = LoadContext(environment: environment)
            var succeeded = false
            do {
                let value = try await base.load(input, in: context)
                // The remote answered: that is what the fail-safe is about (a failed write is logged
                // by the store call, and the next read past `refreshAfter` tries again).
                succeeded = true
                await store.insertReportingFailure(value, for: key, in: context)
            } catch {
                environment.logger.warning(
                    "a background refresh failed: the copy is served until it expires, and the key is not refreshed ahead for a while",
                    metadata: ["key": "\(key)", "store": "\(store.storeDescription)", "error": "\(error)", "failSafe": "\(failSafe)"])
            }
            decisions.refreshEnded(key, succeeded: succeeded, now: environment.now(), failSafe: failSafe)
        }
    }
}

extension RefreshingAheadLoader: LoaderDescribing {
    public var loaderNode: LoaderNode {
        LoaderNode(
            label: "refreshingAhead(\(store.storeDescription), after \(refreshAfter.formattedAge) of \(maxAge.formattedAge))",
            children: [base.chainNode])
    }
}

extension Loader {
    /// Serves a cached copy younger than the policy's `maxAge` at once and, once it is `refreshAfter`
    /// old (by default 80 % of `maxAge`), refreshes it in the background on the first read, one
    /// refresh per key; an expired copy, or none, is loaded from this loader and written to `store`.
    ///
    /// ```swift
    /// let feed = remote.refreshingAhead(.maxAge(.seconds(10 * 60)), in: store, key: { "feed-\($0)" })
    /// // 0–8 min: hits. 8–10 min: hits, and the first read refreshes in the background. 10 min: loads.
    /// ```
    ///
    /// - Parameters:
    ///   - policy: when a copy expires, when a read also refreshes it, and how long a failed refresh
    ///     holds the next one back.
    ///   - store: where the copies are read and the answers written.
    ///   - key: the store key of an input.
    public func refreshingAhead<S: Store>(
        _ policy: RefreshingAheadPolicy, in store: S, key: @escaping @Sendable (Input) -> S.Key
    ) -> RefreshingAheadLoader<Self, S> where S.Value == Output {
        RefreshingAheadLoader(
            base: self, store: store, key: key, maxAge: policy.maxAge, refreshAfter: policy.refreshAfter,
            failSafe: policy.failSafe)
    }

    /// `refreshingAhead(_:in:key:)` with one key for every input.
    public func refreshingAhead<S: Store>(
        _ policy: RefreshingAheadPolicy, in store: S, key: S.Key
    ) -> RefreshingAheadLoader<Self, S> where S.Value == Output {
        refreshingAhead(policy, in: store, key: { _ in key })
    }

    /// The former spelling of `refreshingAhead(_:in:key:)`, with the policy's parts as arguments.
    @available(*, deprecated, message: "use refreshingAhead(.maxAge(_:refreshAfter:failSafe:), in:key:)")
    public func refreshingAhead<S: Store>(
        in store: S, key: @escaping @Sendable (Input) -> S.Key, maxAge: Duration,
        refreshAfter: Duration? = nil, failSafe: Duration = .seconds(30)
    ) -> RefreshingAheadLoader<Self, S> where S.Value == Output {
        refreshingAhead(.maxAge(maxAge, refreshAfter: refreshAfter, failSafe: failSafe), in: store, key: key)
    }

    /// The former spelling of `refreshingAhead(_:in:key:)`, with the policy's parts as arguments.
    @available(*, deprecated, message: "use refreshingAhead(.maxAge(_:refreshAfter:failSafe:), in:key:)")
    public func refreshingAhead<S: Store>(
        in store: S, key: S.Key, maxAge: Duration, refreshAfter: Duration? = nil, failSafe: Duration = .seconds(30)
    ) -> RefreshingAheadLoader<Self, S> where S.Value == Output {
        refreshingAhead(.maxAge(maxAge, refreshAfter: refreshAfter, failSafe: failSafe), in: store, key: { _ in key })
    }
}
