import Foundation
@_spi(StrataInternals) import Strata
import StrataOutbox

/// One live query: the state a screen shows for one key, shared by every observer of that key
/// (made by ``QueryClient/query(_:tags:policy:cached:enabled:pendingWrites:chain:)``).
///
/// A query runs its chain when an observer comes to a stale value, when the network returns, when
/// the app comes to the foreground, on an interval, when its key is invalidated, or when asked
/// (`refetch()`): one load at a time however many triggers fire together. Its state is one
/// ``QuerySnapshot``, observed as an `AsyncSequence` (`snapshots(bufferingNewest:)`) or, on the main actor, as an
/// `@Observable` ``LiveQuery`` (`observed()`). The decisions are `QueryStateMachine`'s; this
/// class runs them: it starts and cancels the loads, sleeps on the environment's clock, and
/// publishes each new snapshot to the observers, in order.
public final class Query<Value: Sendable & Equatable>: Sendable {
    /// The query's key.
    public let key: QueryKey
    /// Names an invalidation can reach it by, besides its key (the newest
    /// ``QueryClient/query(_:tags:policy:cached:enabled:pendingWrites:chain:)`` call's).
    public var tags: Set<String> { options.withLock { $0.tags } }
    /// The chain a load runs (the newest `query(…)` call's).
    public var chain: AnyLoader<Void, Value> { options.withLock { $0.chain } }
    /// Where a copy of any age is read while the query shows nothing (stale-while-revalidate's
    /// first frame, and what an observer sees offline), if given.
    public var cached: AnyLoader<Void, Value>? { options.withLock { $0.cached } }
    /// The outbox writes shown in the value, if any (``PendingWrites``).
    public let pendingWrites: PendingWrites<Value>?
    /// How the query pages, if it is paged (``QueryClient/pagedQuery(_:tags:policy:paging:store:pendingWrites:page:)``).
    var paging: QueryPaging<Value>? { options.withLock { $0.paging } }
    let environment: LoadEnvironment
    /// The client, as the query reaches it (under the query's lock).
    let link: QueryClientLink
    /// What the newest caller passed: a leaf lock (it never takes another), so the client may read
    /// the tags under its own.
    let options: Locked<Options>
    let state: Locked<State>
    /// Publishes not handed to their observers yet, oldest first, queued under `state`'s lock (this
    /// one is a leaf) and handed over after it, never under it: handing one to a stream resumes its
    /// reader, which takes that task's runtime lock, and the reader's cancellation, holding that
    /// lock, removes the observer under `state`'s (the two would deadlock). One
    /// thread hands them over at a time, in order, so every observer sees the versions rise. Not
    /// generic, and not in `state`: handing over costs no lookup of the value type's metadata.
    let deliveries = Locked(DeliveryQueue())
    /// This query's number in the process, never reused (an inspector's timeline tells queries
    /// apart by it: an object's address is reused once it is freed).
    let serial = nextQuerySerial.withLock { serial in
        serial += 1
        return serial
    }

    /// What the newest `query(…)` call for the key passed, besides its policy and `enabled`.
    struct Options: Sendable {
        var tags: Set<String>
        var chain: AnyLoader<Void, Value>
        var cached: AnyLoader<Void, Value>?
        var paging: QueryPaging<Value>?
    }

    /// One published snapshot, numbered so an observer can tell it has caught up.
    /// A class, not a struct: a publish handed over after the lock captures one reference, not a
    /// value of the value type's layout (whose closure context costs metadata lookups).
    @usableFromInline
    final class Published: Sendable {
        @usableFromInline let version: UInt64
        @usableFromInline let snapshot: QuerySnapshot<Value>

        init(version: UInt64, snapshot: QuerySnapshot<Value>) {
            self.version = version
            self.snapshot = snapshot
        }
    }

    struct State: Sendable {
        var machine: QueryStateMachine<Value>
        /// Each observer's way to receive a published snapshot (it yields to its stream).
        /// Each observer's delivery, made where its stream's element type is known (for a
        /// ``QuerySnapshots`` iteration, in the caller's module: its yield is specialised there).
        var observers: [UInt64: @Sendable (Published) -> Void] = [:]
        /// The observers that do not want loads (per-observer `enabled: false`).
        var disabledObserverIDs: Set<UInt64> = []
        var nextObserverID: UInt64 = 0
        /// Fetches waiting for the load they started or joined to end (`true`: no flight).
        var fetchWaiters = ConditionWaiters<Bool>()
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
        /// Whether `previousValue` holds one (a `Bool`: asking the generic optional costs a type
        /// metadata lookup on every publish).
        var hasPreviousValue = false
        /// The read of the cached copy (``Query/cached``) while the query shows nothing: one per
        /// waking, started when an observer comes or a load starts, awaited by the load.
        var cacheRead: Task<Void, Never>?
        /// Whether this waking's read of the cached copy is over (a drop starts a new waking).
        var cacheReadDone = false
        /// Counts the wakings, so a cache read of an earlier one is not taken for this one's.
        var waking: UInt64 = 0
        /// The refetch interval the `interval` task ticks at.
        var intervalEvery: Duration?
        /// Counts the drop timers: one that fired after a later one replaced it is not the drop due.
        var dropTimers: UInt64 = 0
        /// The newest `query(…)` call's number whose options the query took: an older call's,
        /// arriving late, does not undo a newer one's.
        var optionsStamp: UInt64 = 0
        /// The error the next load fails with, if an inspector asked for one.
        var injectedFailure: InjectedFailure?
        /// A paged query's last save to its store, and how many were asked for: saves run one
        /// after another, and one superseded before it began is skipped.
        var saving: Task<Void, Never>?
        var saves: UInt64 = 0

        /// The value shown before the last change (for an inspector's diff): kept only while an
        /// inspector follows the client, and let go with the value when the query is dropped. The
        /// last stored property, the only one whose layout depends on `Value`: every other one is at
        /// an offset known when the query's unspecialised code is compiled.
        var previousValue: Value?

        /// Whether no load runs, no retry waits and no read of the cached copy is under way.
        var isSettled: Bool { machine.isSettled && cacheRead == nil }
    }

    init(
        key: QueryKey, tags: Set<String>, chain: AnyLoader<Void, Value>, cached: AnyLoader<Void, Value>?,
        pendingWrites: PendingWrites<Value>? = nil, paging: QueryPaging<Value>? = nil, environment: LoadEnvironment,
        configuration: QueryPolicy, online: Bool, enabled: Bool = true, link: QueryClientLink = .detached,
        initialWrites: [OutboxEntry]? = nil, initialValue: Served<Value>? = nil, foreground: Bool = true
    ) {
        self.key = key
        self.options = Locked(Options(tags: tags, chain: chain, cached: cached, paging: paging))
        self.pendingWrites = pendingWrites
        self.environment = environment
        self.link = link
        let machine = QueryStateMachine<Value>(configuration: configuration, enabled: enabled, online: online)
        self.state = Locked(State(machine: machine, published: Published(version: 0, snapshot: machine.snapshot(now: environment.now()))))
        send(.created)
        // Before the client lets anyone else reach it: no later report of the outbox can be
        // overwritten by this older list.
        if let initialWrites { send(.writesPending(initialWrites)) }
        if !foreground { send(.background) }
        if let initialValue { send(.valueSet(initialValue)) }
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
    /// the last one is not sent again). Iterating it makes an observer, counted when the iteration
    /// starts (`makeAsyncIterator()`, the first step of a `for await` loop); ending the iteration
    /// (its task cancelled, the loop left) removes it, and a load only that observer wanted is
    /// cancelled.
    ///
    /// Up to `limit` changes wait for a reader that falls behind (a test that reads them in time
    /// reads the exact sequence); past it the oldest go. Each is the whole state, so the newest is
    /// always current.
    public func snapshots(bufferingNewest limit: Int = QuerySnapshots<Value>.defaultLimit) -> QuerySnapshots<Value> {
        QuerySnapshots(query: self, limit: limit)
    }

    /// An observer's stream of published snapshots with their numbers, the current one first (only
    /// the latest is kept while the reader is behind: each is the whole state).
    func subscribe(enabled: Bool = true) -> (stream: AsyncStream<Published>, observer: UInt64) {
        let (stream, continuation) = AsyncStream.makeStream(of: Published.self, bufferingPolicy: .bufferingNewest(1))
        let id = observe(enabled: enabled) { continuation.yield($0) }
        continuation.onTermination = { [weak self] _ in self?.removeObserver(id) }
        return (stream, id)
    }

    /// Makes `deliver` an observer: it gets the current snapshot, then each published one, until
    /// `removeObserver(_:)` with the number returned. A disabled observer (`enabled: false`) sees
    /// every snapshot and never starts a load.
    @usableFromInline
    func observe(enabled: Bool = true, _ deliver: @escaping @Sendable (Published) -> Void) -> UInt64 {
        seedFromCache()
        var id: UInt64 = 0
        // The observer and the event that counts it in one critical section: a drop due in between
        // would drop a query that has an observer. It is counted before the event runs (a woken
        // query publishes empty first), and handed the snapshot after it: its first element is
        // what the query shows once it has it, never the value a drop let go.
        send(enabled ? .observerAdded : .disabledObserverAdded, prepare: { state in
            state.nextObserverID += 1
            id = state.nextObserverID
            if !enabled { state.disabledObserverIDs.insert(id) }
        }, then: { state in
            state.observers[id] = deliver
            let published = state.published
            self.deliveries.withLock { $0.append { deliver(published) } }
        })
        return id
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
        try await state.wait(in: \.settledWaiters, current: { $0.isSettled }, until: { $0 })
    }

    /// Suspends until the query has `count` observers (a test waits for an observer's stream to end).
    ///
    /// - Throws: `CancellationError` when the waiting task is cancelled.
    package func awaitObserverCount(_ count: Int) async throws {
        try await state.wait(in: \.observerWaiters, current: { $0.machine.observers }, until: { $0 == count })
    }

    /// Shows an immediate answer if the query shows nothing yet — the cached copy's (any age), or
    /// the chain's — so the first frame holds the cached value, with no load and no hop.
    func seedFromCache() {
        guard state.withLock({ !$0.machine.hasShown }) else { return }
        let context = LoadContext(environment: environment)
        let (cached, chain) = options.withLock { ($0.cached, $0.chain) }
        guard let served = cached?.loadServedImmediately((), in: context) ?? chain.loadServedImmediately((), in: context) else { return }
        send(.seeded(served))
    }

    /// The newest `query(…)` call's parts: its chain, cached copy, tags and paging replace the
    /// query's; its policy and `enabled` apply from now (a load running goes on; the next uses the
    /// new chain). A dropped query takes them without waking.
    ///
    /// `stamp` orders the calls (taken under the client's lock): two calls racing for one key end
    /// with every option of the later one, never a mix, whichever reaches the query first.
    func update(
        tags: Set<String>, chain: AnyLoader<Void, Value>, cached: AnyLoader<Void, Value>?, paging: QueryPaging<Value>?,
        policy: QueryPolicy, enabled: Bool, stamp: UInt64
    ) {
        send { [options] state in
            guard stamp > state.optionsStamp else { return nil }
            state.optionsStamp = stamp
            // The options lock is a leaf: taken under the query's, it never waits on another.
            options.withLock { $0 = Options(tags: tags, chain: chain, cached: cached, paging: paging) }
            return .reconfigured(policy, enabled: enabled)
        }
    }

    @usableFromInline
    func removeObserver(_ id: UInt64) {
        send { state in
            guard state.observers.removeValue(forKey: id) != nil else { return nil }
            return state.disabledObserverIDs.remove(id) != nil ? .disabledObserverRemoved : .observerRemoved
        }
    }

    /// Enables or disables one observer's wish for loads (a dependent screen whose key is not
    /// ready): a disabled observer still sees every snapshot.
    func setObserver(_ id: UInt64, enabled: Bool) {
        send { state in
            guard state.observers[id] != nil, state.disabledObserverIDs.contains(id) == enabled else { return nil }
            if enabled { state.disabledObserverIDs.remove(id) } else { state.disabledObserverIDs.insert(id) }
            return .observerEnabled(enabled)
        }
    }

    /// Applies `event` (after `prepare`, in the same critical section; `then` after it) and runs
    /// what the state machine decides: under the lock, it starts tasks, registers the query with
    /// its client (woken or dropped, so the client's list follows the query's state in the query's
    /// own order), tells an inspector and queues what publishes; after it, the cancellations (a
    /// task's cancellation handlers run in `cancel()`) and the publishes, handed to observers in
    /// order (`deliver(_:)`).
    func send(
        _ event: QueryStateMachine<Value>.Event, prepare: ((inout State) -> Void)? = nil, then: ((inout State) -> Void)? = nil
    ) {
        var cancelled: [Task<Void, Never>] = []
        let batch = state.withLock { state in
            prepare?(&state)
            step(event, in: &state, cancelled: &cancelled)
            then?(&state)
            settle(&state)
            return deliveries.withLock { $0.take() }
        }
        for task in cancelled { task.cancel() }
        if !batch.isEmpty { deliver(batch) }
    }

    /// Sends what `makeEvent` returns (read under the lock; `nil`: no event, only the bookkeeping),
    /// then runs `then` in the same critical section.
    func send(_ makeEvent: (inout State) -> QueryStateMachine<Value>.Event?, then: ((inout State) -> Void)? = nil) {
        var cancelled: [Task<Void, Never>] = []
        let batch = state.withLock { state in
            if let event = makeEvent(&state) { step(event, in: &state, cancelled: &cancelled) }
            then?(&state)
            settle(&state)
            return deliveries.withLock { $0.take() }
        }
        for task in cancelled { task.cancel() }
        if !batch.isEmpty { deliver(batch) }
    }

    /// Hands `first` to their observers, outside the lock, then whatever was queued meanwhile,
    /// until nothing is left.
    private func deliver(_ first: DeliveryQueue.Batch) {
        DeliveryQueue.hand(first, thenWhatIsQueuedIn: deliveries)
    }

    /// One step, under the lock: `event` and what follows from it.
    private func step(_ event: QueryStateMachine<Value>.Event, in state: inout State, cancelled: inout [Task<Void, Never>]) {
        // One reading of the clock for the whole step: every decision sees the same moment.
        let now = environment.now()
        let observersBefore = state.machine.observers
        let tickingBefore = (state.machine.activeObservers, state.machine.isInForeground)
        // What the moment the value goes stale depends on: its timer is looked at again only when
        // one of these changes (or the timer fired, or the policy changed).
        let freshnessBefore = (observersBefore > 0, state.machine.storedAt, state.machine.isInvalidated)
        // Woken: registered with the client before anything runs, and told what the client knows
        // now (the network, the writes waiting in its scope), in the same critical section, so no
        // later signal can arrive before this older news.
        if state.machine.isDropped, QueryStateMachine<Value>.wakes(event), let view = link.register(self, true) {
            handle(.connectivity(online: view.online), at: now, in: &state, cancelled: &cancelled)
            if view.foreground != state.machine.isInForeground {
                handle(view.foreground ? .foreground : .background, at: now, in: &state, cancelled: &cancelled)
            }
            if let pending = view.pending { handle(.writesPending(pending), at: now, in: &state, cancelled: &cancelled) }
        }
        handle(event, at: now, in: &state, cancelled: &cancelled)
        // (`storedAt` is set exactly when a value is shown: a `Date?`, not the generic `shown`.)
        if state.machine.storedAt == nil, state.machine.observers > 0 || state.machine.runningFlight != nil { readCachedCopy(&state) }
        // The ticking changes only with the observers or the policy.
        if tickingBefore != (state.machine.activeObservers, state.machine.isInForeground)
            || { if case .reconfigured = event { true } else { false } }() {
            updateInterval(&state, cancelled: &cancelled)
        }
        let freshnessAfter = (state.machine.observers > 0, state.machine.storedAt, state.machine.isInvalidated)
        let timerDue: Bool = switch event {
        case .staleDue, .reconfigured: true
        default: freshnessAfter != freshnessBefore
        }
        if timerDue, let stale = updateStaleTimer(&state, now: now) { cancelled.append(stale) }
    }

    /// Applies one event and runs its actions, under the lock.
    private func handle(_ event: QueryStateMachine<Value>.Event, at now: Date, in state: inout State, cancelled: inout [Task<Void, Never>]) {
        if case .retryDue(let flight) = event { state.timers[flight] = nil }
        // Fired (perhaps early, by a wall clock slewed against the sleep's): scheduled anew below
        // if the value is still fresh.
        if case .staleDue = event { state.staleTimer = nil }
        let actions = state.machine.handle(event, now: now)
        for action in actions {
            switch action {
            case .startLoad(let flight, let reason):
                let injected = state.injectedFailure
                state.injectedFailure = nil
                state.flightStartedAt = now
                // Nothing shown yet: the cached copy first (a disk read), shown while the chain loads.
                if !state.machine.hasShown { readCachedCopy(&state) }
                state.loads[flight] = startLoad(
                    flight: flight, reason: reason, staleAfter: state.machine.configuration.staleAfter,
                    invalidatedAt: state.machine.invalidatedAt, injected: injected, cacheRead: state.cacheRead)
                link.record(.loadStarted(key: key, query: serial, flight: flight, reason: reason, at: now))
            case .cancelLoad(let flight):
                if let load = state.loads.removeValue(forKey: flight) { cancelled.append(load) }
                link.record(.loadEnded(key: key, query: serial, flight: flight, outcome: .cancelled, tier: nil, error: nil, at: now))
            case .scheduleRetry(let flight, let delay):
                state.timers[flight] = after(delay) { $0.send(.retryDue(flight: flight)) }
            case .cancelRetry(let flight):
                if let timer = state.timers.removeValue(forKey: flight) { cancelled.append(timer) }
                link.record(.loadEnded(key: key, query: serial, flight: flight, outcome: .cancelled, tier: nil, error: nil, at: now))
            case .scheduleDrop(let delay):
                if let drop = state.drop { cancelled.append(drop) }
                state.dropTimers += 1
                let timer = state.dropTimers
                // Checked under the lock: a timer that fired just as a later one replaced it (its
                // cancellation not seen yet) is not the drop due.
                state.drop = after(delay) { query in query.send { $0.dropTimers == timer ? .dropDue : nil } }
            case .drop:
                state.drop = nil
                if let interval = state.interval { cancelled.append(interval) }
                state.interval = nil
                state.intervalEvery = nil
                cancelled += state.timers.values
                state.timers = [:]
                if let read = state.cacheRead { cancelled.append(read) }
                state.cacheRead = nil
                state.cacheReadDone = false
                state.waking += 1
                state.previousValue = nil
                state.hasPreviousValue = false
                state.flightStartedAt = nil
                _ = link.register(self, false)
            case .revive:
                // Registered with the client before the event ran (`send`).
                break
            case .publish:
                publish(&state, at: now)
            }
        }
        switch event {
        case .loadSucceeded(let flight, let served):
            link.record(.loadEnded(key: key, query: serial, flight: flight, outcome: .value, tier: served.provenance.tier, error: nil, at: now))
        case .loadFailed(let flight, let error):
            link.record(.loadEnded(key: key, query: serial, flight: flight, outcome: .failed, tier: nil, error: error.description, at: now))
        default:
            break
        }
    }

    /// Resumes the waits the state now satisfies.
    private func settle(_ state: inout State) {
        // Read only when someone waits: most steps have nobody waiting.
        if !state.settledWaiters.isEmpty { state.settledWaiters.resumeSatisfied(by: state.isSettled) }
        if !state.observerWaiters.isEmpty { state.observerWaiters.resumeSatisfied(by: state.machine.observers) }
        if !state.fetchWaiters.isEmpty { state.fetchWaiters.resumeSatisfied(by: state.machine.flight == nil) }
    }

    /// Starts this waking's read of the cached copy if the query shows nothing and has one: an
    /// observer sees what is on disk whatever the network (a load paused offline, a disabled
    /// query), and a load shows it while the chain runs.
    private func readCachedCopy(_ state: inout State) {
        guard !state.machine.hasShown, !state.cacheReadDone, state.cacheRead == nil, let cached = options.withLock({ $0.cached }) else { return }
        let waking = state.waking
        let context = LoadContext(environment: environment)
        state.cacheRead = Task { [weak self] in
            let served = try? await cached.loadServed((), in: context)
            self?.send { state in
                guard state.waking == waking else { return nil }
                state.cacheRead = nil
                state.cacheReadDone = true
                return Task.isCancelled ? nil : served.map { .seeded($0) }
            }
        }
    }

    /// Publishes the machine's snapshot if it changed: to every observer, and to an inspector if one
    /// follows (which alone keeps the value shown before, for its diff).
    private func publish(_ state: inout State, at now: Date) {
        var snapshot = state.machine.snapshot(now: now)
        if let pendingWrites {
            do {
                snapshot = try pendingWrites.applied(state.machine.shownWrites, to: snapshot)
            } catch {
                environment.logger.warning(
                    "pending writes not shown: applying them failed",
                    metadata: ["query": "\(key)", "outbox.scope": "\(Redaction.redactingSecrets(inPath: pendingWrites.scope))", "error": "\(Redaction.redactingSecrets(in: "\(error)"))"])
            }
        }
        guard snapshot != state.published.snapshot else { return }
        let inspected = link.isInspected()
        if inspected {
            if snapshot.value != state.published.snapshot.value {
                state.previousValue = state.published.snapshot.value
                state.hasPreviousValue = true
            }
        } else if state.hasPreviousValue {
            state.previousValue = nil
            state.hasPreviousValue = false
        }
        let published = Published(version: state.published.version + 1, snapshot: consume snapshot)
        state.published = published
        // (`count`, not the generic `isEmpty`: no metadata lookup.)
        if state.observers.count > 0 {
            let observers = state.observers
            deliveries.withLock { $0.append { for deliver in observers.values { deliver(published) } } }
        }
        if inspected { link.record(.published(key: key)) }
    }

    /// Keeps one timer for the moment the shown value goes stale by age (observed queries only), so
    /// observers see `isStale` turn without an event; returns a timer to cancel.
    private func updateStaleTimer(_ state: inout State, now: Date) -> Task<Void, Never>? {
        let due = state.machine.freshUntil(now: now)
        guard due != state.staleTimer?.due else { return nil }
        let old = state.staleTimer?.task
        state.staleTimer = due.map { due in (due, after(.between(now, due)) { $0.send(.staleDue) }) }
        return old
    }

    /// An observed query with a refetch interval ticks on the environment's clock; the ticking stops
    /// with its last observer.
    private func updateInterval(_ state: inout State, cancelled: inout [Task<Void, Never>]) {
        let machine = state.machine
        let ticks = machine.activeObservers > 0 && (machine.isInForeground || machine.configuration.refetchIntervalInBackground)
        let wanted = ticks ? machine.configuration.refetchInterval : nil
        guard wanted != state.intervalEvery else { return }
        // Cancelled after the lock is released, as every task is: its handler is the clock's sleep,
        // which may be an app's own clock.
        if let interval = state.interval { cancelled.append(interval) }
        state.interval = nil
        state.intervalEvery = wanted
        guard let interval = wanted else { return }
        let clock = environment.clock
        state.interval = Task { [weak self] in
            while !Task.isCancelled {
                do { try await clock.sleep(for: interval) } catch { return }
                guard let self else { return }
                self.send(.intervalElapsed)
            }
        }
    }

    private func startLoad(
        flight: Int, reason: FetchReason, staleAfter: Duration, invalidatedAt: Date?, injected: InjectedFailure?,
        cacheRead: Task<Void, Never>?
    ) -> Task<Void, Never> {
        var context = LoadContext(environment: environment)
        // The chain's fresh tiers must not answer with the copy this load is to replace: after an
        // invalidation or an explicit refetch, nothing stored before now; otherwise nothing the
        // query would call stale, nor anything from before an invalidation that still stands (one
        // that came while the query was dropped, or that a stale fallback did not clear).
        let now = environment.now()
        var since = switch reason {
        case .invalidated, .refetch: now
        default: now.addingTimeInterval(-staleAfter.seconds)
        }
        if let invalidatedAt, invalidatedAt > since { since = invalidatedAt }
        context.revalidatingSince = since
        let (chain, paging) = options.withLock { ($0.chain, $0.paging) }
        return Task {
            // Nothing shown yet: the cached copy first (a disk read), shown while the chain loads.
            if let cacheRead { await waitUnlessCancelled(cacheRead) }
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
        if reason.isPage, let (current, storedAt) = shown {
            let step = reason == .nextPage ? paging.next : paging.previous
            guard let appended = try await step(current.value, context) else { return current }
            served = appended
            // The value is as old as its oldest page: a page appended now does not make it fresh.
            served.provenance.storedAt = storedAt ?? served.provenance.storedAt
        } else if let window = try await paging.reloadWindow(shown?.0.value, context) {
            // A window that moved past the first page (`maxPages`) is refilled from its own first
            // page: a deep scroll keeps its place.
            served = window
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
        // A cancelled load does not wait for it (the save goes on, or is skipped when superseded).
        await waitUnlessCancelled(turn)
    }

    private func finishLoad(_ flight: Int, with event: QueryStateMachine<Value>.Event) {
        send(event, then: { state in
            if state.machine.runningFlight != flight { state.loads.removeValue(forKey: flight) }
        })
    }

    /// A query let go of (its client dropped it, and no one holds it) stops its timers: each is a
    /// task asleep on the clock until due (a retry's back-off, the drop, the staleness, which can be
    /// hours away), holding the clock and its closure, and nothing would be left for it to do (on a
    /// clock no one advances, they would never be freed).
    deinit {
        state.withLock { state in
            for timer in state.timers.values { timer.cancel() }
            state.drop?.cancel()
            state.staleTimer?.task.cancel()
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

/// How a query reaches its client. Each closure runs under the query's lock and may take the
/// client's: the client never takes a query's lock while it holds its own, so the two never wait
/// on each other.
struct QueryClientLink: Sendable {
    /// Registers the query with the client, awake (`true`) or dropped; returns what the client knows
    /// now that a woken query must learn (`nil` when the client is gone).
    var register: @Sendable (_ query: any AnyQuery, _ awake: Bool) -> QueryClientView?
    /// Whether the client believes the network reachable now (`nil` when it is gone).
    var isOnline: @Sendable () -> Bool?
    /// Tells an inspector what the query did, in the query's order.
    var record: @Sendable (QueryActivity) -> Void
    /// Whether an inspector follows the client (the previous value is kept for its diff only then).
    var isInspected: @Sendable () -> Bool

    /// No client: nothing registers, nothing is recorded.
    static let detached = QueryClientLink(register: { _, _ in nil }, isOnline: { nil }, record: { _ in }, isInspected: { false })
}

/// What a woken query learns from its client.
struct QueryClientView: Sendable {
    var online: Bool
    /// Whether the app is in the foreground (a dropped query hears no signal).
    var foreground: Bool
    /// The writes waiting in its outbox scope, if it shows one the client follows.
    var pending: [OutboxEntry]?
}

/// Every snapshot of a query, the current one first, then each change (``Query/snapshots(bufferingNewest:)``).
///
/// Iterating it makes an observer: the query counts it from the first `next()`'s iterator on
/// (`makeAsyncIterator()`), not from when the sequence was made, and forgets it when the iteration
/// ends (the loop left, its task cancelled). A reader that falls behind gets the newest snapshots
/// (at most `limit` waiting; each is the whole state, so the last one is always current).
public struct QuerySnapshots<Value: Sendable & Equatable>: AsyncSequence, Sendable {
    public typealias Element = QuerySnapshot<Value>
    /// How many snapshots wait for a slow reader by default.
    public static var defaultLimit: Int { 64 }

    @usableFromInline let query: Query<Value>
    @usableFromInline let limit: Int

    init(query: Query<Value>, limit: Int) {
        self.query = query
        self.limit = limit
    }

    /// One observer's iteration: made by `makeAsyncIterator()`, which counts the observer.
    ///
    /// Inlinable, as ``QuerySnapshots/makeAsyncIterator()`` is: the stream a publish yields to and
    /// the iteration are specialised for the caller's value type (a publish to many observers
    /// costs what a bare `AsyncStream` fan-out does per observer).
    public struct AsyncIterator: AsyncIteratorProtocol {
        @usableFromInline var base: AsyncStream<QuerySnapshot<Value>>.AsyncIterator

        @inlinable
        init(base: AsyncStream<QuerySnapshot<Value>>.AsyncIterator) { self.base = base }

        /// The next snapshot, waiting for a change; `nil` when the iteration is over.
        @inlinable
        public mutating func next() async -> QuerySnapshot<Value>? { await next(isolation: nil) }

        /// The next snapshot, waiting on `actor`; `nil` when the iteration is over.
        @inlinable
        public mutating func next(isolation actor: isolated (any Actor)?) async -> QuerySnapshot<Value>? {
            await base.next(isolation: actor)
        }
    }

    /// Starts an iteration: the query counts a new observer and hands it the current snapshot.
    @inlinable
    public func makeAsyncIterator() -> AsyncIterator {
        let (stream, continuation) = AsyncStream.makeStream(
            of: QuerySnapshot<Value>.self, bufferingPolicy: .bufferingNewest(Swift.max(1, limit)))
        let query = self.query
        let id = query.observe { continuation.yield($0.snapshot) }
        continuation.onTermination = { [weak query] _ in query?.removeObserver(id) }
        return AsyncIterator(base: stream.makeAsyncIterator())
    }
}

/// A query's publishes waiting to be handed to their observers after its lock, each a closure
/// (not generic: the queue costs no lookup of the value type's metadata). One thread hands them over
/// at a time: `take()` makes its caller that thread, `takeNext()` ends its turn when nothing is
/// left.
struct DeliveryQueue: Sendable {
    /// Publishes to hand over, oldest first: the first in a slot of its own (a send publishes
    /// once, mostly: no array).
    struct Batch: Sendable {
        var first: (@Sendable () -> Void)?
        var rest: [@Sendable () -> Void] = []

        var isEmpty: Bool { first == nil }

        func run() {
            first?()
            for delivery in rest { delivery() }
        }
    }

    private var pending = Batch()
    private var delivering = false

    mutating func append(_ delivery: @escaping @Sendable () -> Void) {
        if pending.first == nil { pending.first = delivery } else { pending.rest.append(delivery) }
    }

    /// What is queued, for the caller to hand over, unless another thread is handing some over
    /// now (it takes these too, after its own: the order holds).
    mutating func take() -> Batch {
        guard !delivering, !pending.isEmpty else { return Batch() }
        delivering = true
        defer { pending = Batch() }
        return pending
    }

    /// Runs `first` (taken with `take()`), then what is queued in `queue` meanwhile, until nothing
    /// is left: the handing-over thread's turn (a query's publishes, a mutation's changes).
    static func hand(_ first: Batch, thenWhatIsQueuedIn queue: Locked<DeliveryQueue>) {
        var batch = first
        while !batch.isEmpty {
            batch.run()
            batch = queue.withLock { $0.takeNext() }
        }
    }

    /// For the thread handing over: what was queued meanwhile, or nothing (its turn ends).
    mutating func takeNext() -> Batch {
        guard !pending.isEmpty else {
            delivering = false
            return Batch()
        }
        defer { pending = Batch() }
        return pending
    }
}

/// Waits until `task` ends or the calling task is cancelled, whichever comes first (`task` goes on).
func waitUnlessCancelled(_ task: Task<Void, Never>) async {
    let waiting = Locked<CheckedContinuation<Void, Never>?>(nil)
    await withTaskCancellationHandler {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            waiting.withLock { $0 = continuation }
            // Cancelled before the continuation was stored: the handler found nothing to resume.
            if Task.isCancelled {
                waiting.withLock { $0.take() }?.resume()
                return
            }
            Task {
                await task.value
                waiting.withLock { $0.take() }?.resume()
            }
        }
    } onCancel: {
        waiting.withLock { $0.take() }?.resume()
    }
}

/// The serial number of the last query made in this process.
private let nextQuerySerial = Locked<UInt64>(0)
