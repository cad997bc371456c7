import Foundation

/// One live query: the state a screen shows for one key, shared by every observer of that key
/// (made by ``QueryClient/query(_:tags:policy:cached:enabled:pendingWrites:chain:)``).
///
/// A query runs its chain when an observer comes to a stale value, when the network returns, when
/// the app comes to the foreground, on an interval, when its key is invalidated, or when asked
/// (``refetch()``): one load at a time however many triggers fire together. Its state is one
/// ``QuerySnapshot``, observed as an `AsyncSequence` (``snapshots()``) or, on the main actor, as an
/// `@Observable` ``LiveQuery`` (``observed()``). The decisions are `QueryStateMachine`'s; this
/// class runs them: it starts and cancels the loads, sleeps on the environment's clock, and
/// publishes each new snapshot to the observers, in order.
public final class Query<Value: Sendable & Equatable>: Sendable {
    /// The query's key.
    public let key: QueryKey
    /// Names an invalidation can reach it by, besides its key.
    public let tags: Set<String>
    /// The chain a load runs.
    public let chain: AnyLoader<Void, Value>
    /// Where a copy of any age is read while the query shows nothing (stale-while-revalidate's
    /// first frame), if given.
    public let cached: AnyLoader<Void, Value>?
    /// The outbox writes shown in the value, if any (``PendingWrites``).
    public let pendingWrites: PendingWrites<Value>?
    /// How the query pages, if it is paged (``QueryClient/pagedQuery(_:tags:policy:paging:store:pendingWrites:page:)``).
    let paging: QueryPaging<Value>?
    let environment: LoadEnvironment
    let onDrop: @Sendable (Query) -> Void
    let onRevive: @Sendable (Query) -> Void
    /// Tells the client what the query did, for an inspector (loads started and ended, snapshots).
    let onActivity: @Sendable (QueryActivity) -> Void
    let state: Locked<State>

    /// One published snapshot, numbered so an observer can tell it has caught up.
    struct Published: Sendable {
        var version: UInt64
        var snapshot: QuerySnapshot<Value>
    }

    struct State: Sendable {
        var machine: QueryStateMachine<Value>
        /// Each observer's way to receive a published snapshot (it yields to its stream).
        var observers: [UInt64: @Sendable (Published) -> Void] = [:]
        var nextObserverID: UInt64 = 0
        var published: Published
        var loads: [Int: Task<Void, Never>] = [:]
        var timers: [Int: Task<Void, Never>] = [:]
        var drop: Task<Void, Never>?
        var interval: Task<Void, Never>?
        /// Publishes the value going stale by age, while it is observed.
        var staleTimer: (due: Date, task: Task<Void, Never>)?
        var settledWaiters = ConditionWaiters<Bool>()
        var observerWaiters = ConditionWaiters<Int>()
        /// When the running flight started (for an inspector's elapsed time).
        var flightStartedAt: Date?
        /// The value shown before the last change (for an inspector's diff).
        var previousValue: Value?
        /// The error the next load fails with, if an inspector asked for one.
        var injectedFailure: InjectedFailure?
        /// A paged query's last save to its store, and how many were asked for: saves run one
        /// after another, and one superseded before it began is skipped.
        var saving: Task<Void, Never>?
        var saves: UInt64 = 0
    }

    init(
        key: QueryKey, tags: Set<String>, chain: AnyLoader<Void, Value>, cached: AnyLoader<Void, Value>?,
        pendingWrites: PendingWrites<Value>? = nil, paging: QueryPaging<Value>? = nil, environment: LoadEnvironment,
        configuration: QueryPolicy, online: Bool, enabled: Bool = true,
        onDrop: @escaping @Sendable (Query) -> Void, onRevive: @escaping @Sendable (Query) -> Void,
        onActivity: @escaping @Sendable (QueryActivity) -> Void = { _ in },
        initialWrites: [OutboxEntry]? = nil
    ) {
        self.key = key
        self.tags = tags
        self.chain = chain
        self.cached = cached
        self.pendingWrites = pendingWrites
        self.paging = paging
        self.environment = environment
        self.onDrop = onDrop
        self.onRevive = onRevive
        self.onActivity = onActivity
        let machine = QueryStateMachine<Value>(configuration: configuration, enabled: enabled, online: online)
        self.state = Locked(State(machine: machine, published: Published(version: 0, snapshot: machine.snapshot(now: environment.now()))))
        send(.created)
        // Before the client lets anyone else reach it: no later report of the outbox can be
        // overwritten by this older list.
        if let initialWrites { send(.writesPending(initialWrites)) }
    }

    /// The query's policy.
    public var policy: QueryPolicy { state.withLock { $0.machine.configuration } }

    /// The snapshot as it is now. Holds the chain's immediate answer (a value a memory tier holds)
    /// when the query has shown nothing yet.
    public var current: QuerySnapshot<Value> {
        seedFromCache()
        return state.withLock { state in
            // Staleness moves with time, not with events: read at `now`.
            var snapshot = state.published.snapshot
            snapshot.isStale = state.machine.isStale(now: environment.now())
            return snapshot
        }
    }

    /// How many observers the query has (streams being iterated, live queries alive). Not part of
    /// the snapshot: an observer coming or going is not a change to show.
    public var observerCount: Int { state.withLock { $0.machine.observers } }

    /// The latest published snapshot with its number.
    var latest: Published { state.withLock { $0.published } }

    /// Every snapshot of this query, the current one first, then each change (a snapshot equal to
    /// the last one is not sent again). Iterating it makes an observer; ending the iteration (its
    /// task cancelled, the loop left) removes it, and a load only that observer wanted is cancelled.
    ///
    /// The sequence buffers every change, so a test reads the exact sequence; an observer that
    /// wants only the latest state reads ``current`` or uses ``observed()``.
    public func snapshots() -> AsyncStream<QuerySnapshot<Value>> {
        let (stream, continuation) = AsyncStream.makeStream(of: QuerySnapshot<Value>.self)
        observe(continuation) { $0.snapshot }
        return stream
    }

    /// An observer's stream of published snapshots with their numbers, the current one first.
    func subscribe() -> AsyncStream<Published> {
        let (stream, continuation) = AsyncStream.makeStream(of: Published.self)
        observe(continuation) { $0 }
        return stream
    }

    /// Makes `continuation` an observer: it gets the current snapshot, then each published one,
    /// until its stream ends.
    private func observe<Element>(_ continuation: AsyncStream<Element>.Continuation, _ element: @escaping @Sendable (Published) -> Element) {
        seedFromCache()
        var id: UInt64 = 0
        // The observer and the event that counts it in one critical section: a drop due in between
        // would drop a query that has an observer.
        send(.observerAdded) { state in
            state.nextObserverID += 1
            id = state.nextObserverID
            state.observers[id] = { continuation.yield(element($0)) }
            continuation.yield(element(state.published))
        }
        continuation.onTermination = { [weak self, id] _ in self?.removeObserver(id) }
    }

    /// Runs the chain now, even if the value is fresh (one load: joins the one running).
    public func refetch() {
        send(.refetchRequested)
    }

    /// Marks the value stale: an observed query refetches (restarting a load that runs, so its
    /// answer reflects the invalidation), an unobserved one refetches when next observed.
    public func invalidate() {
        send(.invalidated)
    }

    /// Enables or disables the query. A disabled query (a dependent query with no key yet) is
    /// `paused(disabled)`, never fetching; enabling it loads if it is observed and stale.
    public func setEnabled(_ enabled: Bool) {
        send(.enabled(enabled))
    }

    /// Suspends until no load runs and no retry waits for this query (a load paused offline, or a
    /// disabled query, counts as settled): the way a test waits for the current work, with the
    /// environment's clock driving the time.
    ///
    /// - Throws: `CancellationError` when the waiting task is cancelled.
    public func settled() async throws {
        try await state.wait(in: \.settledWaiters, current: { $0.machine.isSettled }, until: { $0 })
    }

    /// Suspends until the query has `count` observers (a test waits for an observer's stream to end).
    ///
    /// - Throws: `CancellationError` when the waiting task is cancelled.
    @_spi(StrataInternals)
    public func waitForObservers(_ count: Int) async throws {
        try await state.wait(in: \.observerWaiters, current: { $0.machine.observers }, until: { $0 == count })
    }

    /// Shows an immediate answer if the query shows nothing yet — the cached copy's (any age), or
    /// the chain's — so the first frame holds the cached value, with no load and no hop.
    func seedFromCache() {
        guard state.withLock({ $0.machine.shown == nil }) else { return }
        let context = LoadContext(environment: environment)
        guard let served = cached?.loadServedImmediately((), in: context) ?? chain.loadServedImmediately((), in: context) else { return }
        send(.seeded(served))
    }

    func removeObserver(_ id: UInt64) {
        let removed = state.withLock { $0.observers.removeValue(forKey: id) != nil }
        if removed { send(.observerRemoved) }
    }

    /// Applies `event` (after `prepare`, in the same critical section) and runs what the state
    /// machine decides: under the lock, what publishes (yielding to streams, in order) and starts
    /// tasks; after it, the cancellations (a task's cancellation handlers run in `cancel()`) and the
    /// client's bookkeeping.
    func send(_ event: QueryStateMachine<Value>.Event, prepare: ((inout State) -> Void)? = nil) {
        var dropped = false
        var revived = false
        var cancelled: [Task<Void, Never>] = []
        var activities: [QueryActivity] = []
        state.withLock { state in
            prepare?(&state)
            let observersBefore = state.machine.observers
            if case .retryDue(let flight) = event { state.timers[flight] = nil }
            // Fired (perhaps early, by a wall clock slewed against the sleep's): scheduled anew below
            // if the value is still fresh.
            if case .staleDue = event { state.staleTimer = nil }
            let actions = state.machine.handle(event, now: environment.now())
            for action in actions {
                switch action {
                case .startLoad(let flight, let reason):
                    let injected = state.injectedFailure
                    state.injectedFailure = nil
                    state.flightStartedAt = environment.now()
                    state.loads[flight] = startLoad(
                        flight: flight, reason: reason, staleAfter: state.machine.configuration.staleAfter, injected: injected)
                    activities.append(.loadStarted(key: key, query: ObjectIdentifier(self), flight: flight, reason: reason, at: environment.now()))
                case .cancelLoad(let flight):
                    if let load = state.loads.removeValue(forKey: flight) { cancelled.append(load) }
                    activities.append(.loadEnded(key: key, query: ObjectIdentifier(self), flight: flight, outcome: .cancelled, tier: nil, error: nil, at: environment.now()))
                case .scheduleRetry(let flight, let delay):
                    state.timers[flight] = after(delay) { $0.send(.retryDue(flight: flight)) }
                case .scheduleDrop(let delay):
                    if let drop = state.drop { cancelled.append(drop) }
                    state.drop = after(delay) { $0.send(.dropDue) }
                case .drop:
                    dropped = true
                    state.drop = nil
                    if let interval = state.interval { cancelled.append(interval) }
                    state.interval = nil
                    cancelled += state.timers.values
                    state.timers = [:]
                case .revive:
                    revived = true
                case .publish:
                    if publish(&state) { activities.append(.published(key: key)) }
                }
            }
            updateInterval(&state, observersBefore: observersBefore)
            if let stale = updateStaleTimer(&state) { cancelled.append(stale) }
            state.settledWaiters.resumeSatisfied(by: state.machine.isSettled)
            state.observerWaiters.resumeSatisfied(by: state.machine.observers)
        }
        for task in cancelled { task.cancel() }
        switch event {
        case .loadSucceeded(let flight, let served):
            activities.append(.loadEnded(key: key, query: ObjectIdentifier(self), flight: flight, outcome: .value, tier: served.provenance.tier, error: nil, at: environment.now()))
        case .loadFailed(let flight, let error):
            activities.append(.loadEnded(key: key, query: ObjectIdentifier(self), flight: flight, outcome: .failed, tier: nil, error: error.description, at: environment.now()))
        default:
            break
        }
        for activity in activities { onActivity(activity) }
        if revived { onRevive(self) }
        if dropped { onDrop(self) }
    }

    /// Publishes the machine's snapshot if it changed; returns whether it did.
    @discardableResult
    private func publish(_ state: inout State) -> Bool {
        var snapshot = state.machine.snapshot(now: environment.now())
        if let pendingWrites {
            do {
                snapshot = try pendingWrites.applied(state.machine.shownWrites, to: snapshot)
            } catch {
                environment.logger.warning(
                    "pending writes not shown: applying them failed",
                    metadata: ["query": "\(key)", "outbox.scope": "\(pendingWrites.scope)", "error": "\(error)"])
            }
        }
        guard snapshot != state.published.snapshot else { return false }
        if snapshot.value != state.published.snapshot.value { state.previousValue = state.published.snapshot.value }
        state.published = Published(version: state.published.version + 1, snapshot: snapshot)
        for deliver in state.observers.values { deliver(state.published) }
        return true
    }

    /// Keeps one timer for the moment the shown value goes stale by age (observed queries only), so
    /// observers see `isStale` turn without an event; returns a timer to cancel.
    private func updateStaleTimer(_ state: inout State) -> Task<Void, Never>? {
        let now = environment.now()
        let due = state.machine.freshUntil(now: now)
        guard due != state.staleTimer?.due else { return nil }
        let old = state.staleTimer?.task
        state.staleTimer = due.map { due in (due, after(.between(now, due)) { $0.send(.staleDue) }) }
        return old
    }

    /// An observed query with a refetch interval ticks on the environment's clock; the ticking stops
    /// with its last observer.
    private func updateInterval(_ state: inout State, observersBefore: Int) {
        let observers = state.machine.observers
        guard let interval = state.machine.configuration.refetchInterval, observers != observersBefore else { return }
        if observers > 0, state.interval == nil {
            let clock = environment.clock
            state.interval = Task { [weak self] in
                while !Task.isCancelled {
                    do { try await clock.sleep(for: interval) } catch { return }
                    guard let self else { return }
                    self.send(.intervalElapsed)
                }
            }
        } else if observers == 0 {
            // Cancelled here, under the lock: the task's only handler is the clock's sleep, which
            // does not call back into this query.
            state.interval?.cancel()
            state.interval = nil
        }
    }

    private func startLoad(flight: Int, reason: FetchReason, staleAfter: Duration, injected: InjectedFailure?) -> Task<Void, Never> {
        var context = LoadContext(environment: environment)
        // The chain's fresh tiers must not answer with the copy this load is to replace: after an
        // invalidation or an explicit refetch, nothing stored before now; otherwise nothing the
        // query would call stale.
        let now = environment.now()
        context.revalidatingSince = switch reason {
        case .invalidated, .refetch: now
        default: now.addingTimeInterval(-staleAfter.seconds)
        }
        return Task { [chain, cached, paging] in
            // Nothing shown yet: the cached copy first (a disk read), shown while the chain loads.
            if let cached, state.withLock({ $0.machine.shown == nil }),
               let served = try? await cached.loadServed((), in: context), !Task.isCancelled {
                self.send(.seeded(served))
            }
            let event: QueryStateMachine<Value>.Event
            do {
                if let injected { throw injected }
                event = .loadSucceeded(flight: flight, try await self.run(reason, flight: flight, chain: chain, paging: paging, in: context))
            } catch {
                // A cancelled load was abandoned by the machine: its answer would be ignored. (A
                // `CancellationError` the chain throws on its own, its task not cancelled, is a
                // failure like any other: the flight must end.)
                if Task.isCancelled { return }
                event = .loadFailed(flight: flight, QueryError(error))
            }
            self.finishLoad(flight, with: event)
        }
    }

    /// One load: the chain (a paged query's first page, and the pages after it a refetch reloads),
    /// or a paged query's next page appended to the value shown.
    private func run(
        _ reason: FetchReason, flight: Int, chain: AnyLoader<Void, Value>, paging: QueryPaging<Value>?, in context: LoadContext
    ) async throws -> Served<Value> {
        guard let paging else { return try await chain.loadServed((), in: context) }
        let shown = state.withLock { state in state.machine.shown.map { ($0, state.machine.storedAt) } }
        var served: Served<Value>
        if reason == .nextPage, let (current, storedAt) = shown {
            guard let appended = try await paging.next(current.value, context) else { return current }
            served = appended
            // The value is as old as its oldest page: a page appended now does not make it fresh.
            served.provenance.storedAt = storedAt ?? served.provenance.storedAt
        } else {
            served = try await chain.loadServed((), in: context)
            served.value = try await paging.refill(served.value, shown?.0.value, context)
        }
        try Task.checkCancellation()
        // Saved only while this flight is the query's own (an abandoned one must not write older
        // pages over newer), stamped with the value's store time (its oldest page's), so a copy
        // read back later is as stale as the value was. Before the answer is shown: a settled
        // query's pages are in its store.
        if let save = paging.save, state.withLock({ $0.machine.runningFlight == flight }) {
            await saveInOrder(served.value, storedAt: served.provenance.storedAt ?? environment.now(), with: save)
        }
        return served
    }

    /// Runs `save` after every save asked for before it, and not at all when a later one was asked
    /// for before its turn: a flight abandoned during its save never writes over a later flight's.
    private func saveInOrder(_ value: Value, storedAt: Date, with save: @escaping @Sendable (Value, Date) async -> Void) async {
        let state = self.state
        let turn = state.withLock { current -> Task<Void, Never> in
            current.saves += 1
            let number = current.saves
            let previous = current.saving
            let turn = Task {
                await previous?.value
                guard state.withLock({ $0.saves == number }) else { return }
                await save(value, storedAt)
            }
            current.saving = turn
            return turn
        }
        await turn.value
    }

    private func finishLoad(_ flight: Int, with event: QueryStateMachine<Value>.Event) {
        send(event)
        state.withLock { state in
            if state.machine.runningFlight != flight { state.loads.removeValue(forKey: flight) }
        }
    }

    /// Runs `body` after `delay` on the environment's clock, unless cancelled first.
    private func after(_ delay: Duration, _ body: @escaping @Sendable (Query) -> Void) -> Task<Void, Never> {
        let clock = environment.clock
        return Task { [weak self] in
            do { try await clock.sleep(for: delay) } catch { return }
            guard let self, !Task.isCancelled else { return }
            body(self)
        }
    }
}

extension Query: CustomStringConvertible {
    public var description: String { "Query(\(key))" }
}
