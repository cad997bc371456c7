import Foundation
@_spi(StrataInternals) import Strata
import StrataOutbox

/// The live queries of an app (or a server): one ``Query`` per key, however many screens observe
/// it, and the signals that refetch them — the network coming back, the app coming to the
/// foreground, invalidations by key prefix, tag or predicate.
///
/// ```swift
/// let queries = QueryClient(environment: LoadEnvironment(logger: Logger(label: "app.queries")))
/// let feed = queries.query(["feed"], policy: QueryPolicy(staleAfter: .seconds(5 * 60)), chain: feedChain)
///
/// for await snapshot in feed.snapshots() { render(snapshot) }   // a server, a test
/// let live = feed.observed()                                    // a view model (main actor)
///
/// queries.invalidate(prefix: ["posts"])   // observed posts refetch once each, others go stale
/// ```
///
/// Time and logging come from `environment` (a test passes a manual clock's). The signals are
/// injected: call `setOnline(_:)` and `enteredForeground()` from the platform's own (a path
/// monitor, the scene phase), or from a test.
public final class QueryClient: Sendable {
    /// The environment every query's loads run in.
    public let environment: LoadEnvironment
    private let state: Locked<State>
    /// What an inspector follows: the load timeline and its subscribers.
    private let inspection = Locked(InspectionFeed())

    struct State: Sendable {
        var queries: [QueryKey: any AnyQuery] = [:]
        /// Dropped queries an app may still hold: the same object comes back for their key, so a key
        /// never has two.
        var dropped: [QueryKey: WeakQuery] = [:]
        var isOnline: Bool
        /// Numbers each `query(…)` call, so a query takes the newest call's options (``Query/update``).
        var calls: UInt64 = 0
        var countWaiters = ConditionWaiters<Int>()
        /// The outboxes whose writes the queries follow, with the writes each has waiting, by scope.
        var outboxes: [ObjectIdentifier: FollowedOutbox] = [:]
        /// Values set for keys that had no query (``QueryClient/setValue(for:as:_:)``), waiting for one.
        var seeds: [QueryKey: QuerySeed] = [:]
        var seedNumbers: UInt64 = 0
        var isInForeground = true
        /// What an inspector reads: the recent loads, and who wants to hear of changes. Empty (and
        /// nothing recorded) until an inspector asks (`changes()`).
    }

    struct FollowedOutbox: Sendable {
        /// Held, so its identifier is never another outbox's (the outbox holds the client weakly).
        var outbox: Outbox
        var observation: OutboxWriteObservation
        var pending: [String: [OutboxEntry]] = [:]
    }

    /// A client whose loads run in `environment`, starting `online` or not.
    public init(environment: LoadEnvironment = .live, online: Bool = true) {
        self.environment = environment
        self.state = Locked(State(isOnline: online))
    }

    deinit {
        // The outboxes it follows stop reporting to it.
        for followed in state.withLock({ Array($0.outboxes.values) }) { followed.observation.cancel() }
    }

    /// Whether the client believes the network reachable (`setOnline(_:)`).
    public var isOnline: Bool { state.withLock { $0.isOnline } }

    /// The query for `key`: the one there is, or a new one loading through `chain`.
    ///
    /// Every call for a key returns the same query, so every screen showing a key shares one state
    /// and one load. **The newest call's options win**: its `chain`, `cached`, `tags`, `policy` and
    /// `enabled` replace the query's from now on (a load already running finishes; the next one
    /// runs the new chain), so a chain that captured the previous user's credentials is not kept.
    /// `pendingWrites` is the first call's (the writes shown come from one outbox scope; a later
    /// call naming another is logged). A key must keep one value type. A query nobody observes is
    /// dropped after its ``QueryPolicy/dropAfter`` (its value released, its stores keep their
    /// copies); one the app still holds comes back to life when used.
    ///
    /// - Parameters:
    ///   - key: the query's key (`["posts", 42]`); invalidating a prefix of it reaches it.
    ///   - tags: names an invalidation can reach it by (`invalidate(tag:)`).
    ///   - policy: staleness, refetch triggers, network mode, retries, lifetime (``QueryPolicy``).
    ///   - cached: where a copy of any age is read while the query shows nothing, shown at once
    ///     while the chain loads (stale-while-revalidate), e.g. `store.loader(key: "feed")`. A
    ///     memory store answers in the first frame; another store is read at the start of the load.
    ///     `nil`: the first frame holds the chain's immediate answer, if any.
    ///   - enabled: `false` for a dependent query whose key is not known yet: it is
    ///     `paused(disabled)`, never fetching, until ``Query/setEnabled(_:)`` or a newer call
    ///     passes `true`.
    ///   - pendingWrites: an outbox's writes to show in the value until the server has them
    ///     (``PendingWrites``); the client follows that outbox (`follow(_:)`).
    ///   - chain: what a load runs.
    public func query<Value: Sendable & Equatable>(
        _ key: QueryKey, tags: Set<String> = [], policy: QueryPolicy = QueryPolicy(),
        cached: (any Loader<Void, Value>)? = nil, enabled: Bool = true,
        pendingWrites: PendingWrites<Value>? = nil, chain: some Loader<Void, Value>
    ) -> Query<Value> {
        makeQuery(
            key, tags: tags, policy: policy, cached: cached.map { AnyLoader($0) }, enabled: enabled,
            pendingWrites: pendingWrites, paging: nil, chain: chain)
    }

    /// The query for `key`, made with these parts if there is none.
    func makeQuery<Value: Sendable & Equatable>(
        _ key: QueryKey, tags: Set<String>, policy: QueryPolicy, cached: AnyLoader<Void, Value>?, enabled: Bool,
        pendingWrites: PendingWrites<Value>?, paging: QueryPaging<Value>?, chain: some Loader<Void, Value>
    ) -> Query<Value> {
        if let pendingWrites { follow(pendingWrites.outbox) }
        let chain = AnyLoader(chain)
        let (query, isNew, stamp) = state.withLock { state -> (Query<Value>, Bool, UInt64) in
            state.calls += 1
            // A dropped query the app still holds is the key's (it stays asleep until used).
            if let existing = state.queries[key] ?? state.dropped[key]?.query {
                guard let query = existing as? Query<Value> else {
                    preconditionFailure("query \(key) holds \(existing.valueType), asked for \(Value.self)")
                }
                return (query, false, state.calls)
            }
            let query = Query(
                key: key, tags: tags, chain: chain, cached: cached,
                pendingWrites: pendingWrites, paging: paging, environment: environment,
                configuration: policy, online: state.isOnline, enabled: enabled, link: link,
                // The outbox's writes as the client knows them now, applied before the query is
                // reachable by the outbox's later reports.
                initialWrites: pendingWrites.flatMap { state.pending(in: WriteScope(outbox: ObjectIdentifier($0.outbox), name: $0.scope)) },
                initialValue: state.seeds.removeValue(forKey: key).flatMap { seed in
                    // Stamped when it was set: fresh from then, not from now.
                    guard let value = seed.value as? Value, environment.now().timeIntervalSince(seed.at) < policy.dropAfter.seconds else { return nil }
                    var provenance = Provenance.setLocally
                    provenance.storedAt = seed.at
                    return Served(value: value, provenance: provenance, events: [])
                },
                foreground: state.isInForeground)
            state.queries[key] = query
            state.countWaiters.resumeSatisfied(by: state.queries.count)
            return (query, true, state.calls)
        }
        guard !isNew else { return query }
        // Outside the client's lock: a query's lock is never taken under it.
        if let pendingWrites, query.writeScope.map({ $0.outbox != ObjectIdentifier(pendingWrites.outbox) || $0.name != pendingWrites.scope }) ?? true {
            environment.logger.warning(
                "a query keeps the outbox scope it was made with; this call's pendingWrites are not shown",
                metadata: ["query": "\(key)", "outbox.scope": "\(Redaction.redactingSecrets(inPath: pendingWrites.scope))"])
        }
        query.update(tags: tags, chain: chain, cached: cached, paging: paging, policy: policy, enabled: enabled, stamp: stamp)
        return query
    }

    /// How this client's queries reach it (held weakly: a query outliving its client registers nowhere).
    private var link: QueryClientLink {
        QueryClientLink(
            register: { [weak self] query, awake in self?.register(query, awake: awake) },
            isOnline: { [weak self] in self?.isOnline },
            record: { [weak self] activity in self?.record(activity) },
            isInspected: { [weak self] in self?.isInspected ?? false })
    }

    /// The keys of the queries in memory now.
    public var keys: [QueryKey] { state.withLock { Array($0.queries.keys) } }

    /// Tells every query the network is reachable or not. Coming back, a load paused offline
    /// continues, a retry's delay is cut short, and a stale, observed query refetches (once).
    ///
    /// Each query reads the client's state when it is told, so concurrent calls leave every query
    /// in the state of the last one.
    public func setOnline(_ online: Bool) {
        let queries = state.withLock { state -> [any AnyQuery] in
            state.isOnline = online
            return Array(state.queries.values)
        }
        for query in queries { query.connectivityChanged() }
    }

    /// Tells every query the app came to the foreground: a stale, observed query refetches, at most
    /// once per its foreground throttle, and refetch intervals tick again.
    public func enteredForeground() {
        state.withLock { $0.isInForeground = true }
        for query in all() { query.cameToForeground() }
    }

    /// Tells every query the app went to the background: refetch intervals pause (unless a query's
    /// policy says ``QueryPolicy/refetchIntervalInBackground``) until `enteredForeground()`.
    public func enteredBackground() {
        state.withLock { $0.isInForeground = false }
        for query in all() { query.wentToBackground() }
    }

    /// The query for `key` in memory (awake, or dropped and still held), if any.
    func heldQuery(_ key: QueryKey) -> (any AnyQuery)? {
        state.withLock { state in state.queries[key] ?? state.dropped[key]?.query }
    }

    /// The query for `key` in memory, if it holds `Value`s (a check of the value type and a
    /// downcast: a dynamic cast of the existential costs a conformance lookup on every call).
    func heldQuery<Value: Sendable & Equatable>(_ key: QueryKey, as type: Value.Type) -> Query<Value>? {
        guard let held = heldQuery(key), held.valueType == Value.self else { return nil }
        // The only `AnyQuery` is `Query<V>`, whose `valueType` is `V`: the class is `Query<Value>`.
        return unsafeDowncast(held, to: Query<Value>.self)
    }

    /// The value the query for `key` shows (with its pending writes), if it is in memory and has one.
    public func value<Value: Sendable & Equatable>(for key: QueryKey, as type: Value.Type = Value.self) -> Value? {
        return heldQuery(key, as: Value.self)?.value
    }

    /// Sets the value of the query for `key` from code (``Query/setValue(_:)``): a socket's push, a
    /// list seeding the detail screen of one of its items. When no query for `key` is in memory,
    /// the value waits for it: the next `query(…)` for the key starts showing it (set locally, fresh
    /// from when it was set), unless `dropAfter` of that query's policy passed in between. At most
    /// 256 keys wait; the oldest go first.
    ///
    /// - Returns: what the query held before, for ``Query/restore(_:)``; `nil` when there was no
    ///   query (the value waits) or `update` returned `nil`.
    @discardableResult
    public func setValue<Value: Sendable & Equatable>(
        for key: QueryKey, as type: Value.Type = Value.self, _ update: (Value?) throws -> Value?
    ) rethrows -> QueryRestorePoint<Value>? {
        let held = state.withLock { state in state.queries[key] ?? state.dropped[key]?.query }
        if let held {
            guard let query = held as? Query<Value> else {
                preconditionFailure("query \(key) holds \(held.valueType), set as \(Value.self)")
            }
            return try query.setValue(update)
        }
        let now = environment.now()
        let (waiting, seen) = state.withLock { ($0.seeds[key]?.value as? Value, $0.seeds[key]?.number) }
        guard let value = try update(waiting) else { return nil }
        let seeded = state.withLock { state -> Bool in
            // Made meanwhile, or another value set meanwhile: try again (on the query, or from the
            // newer value).
            guard state.queries[key] == nil, state.dropped[key]?.query == nil, state.seeds[key]?.number == seen else { return false }
            state.seedNumbers += 1
            state.seeds[key] = QuerySeed(value: value, at: now, number: state.seedNumbers)
            if state.seeds.count > 256, let oldest = state.seeds.min(by: { $0.value.at < $1.value.at })?.key {
                state.seeds[oldest] = nil
            }
            return true
        }
        if seeded { return nil }
        return try setValue(for: key, as: type, update)
    }

    /// Invalidates every query whose key starts with `prefix` (`["posts"]` covers `["posts", 1]`,
    /// not `["users"]`): an observed one refetches once, an unobserved one is only marked stale.
    public func invalidate(prefix: QueryKey) {
        invalidate { key, _ in key.hasPrefix(prefix) }
    }

    /// Invalidates every query carrying `tag`.
    public func invalidate(tag: String) {
        invalidate { _, tags in tags.contains(tag) }
    }

    /// Invalidates every query for whose key and tags `predicate` holds.
    public func invalidate(where predicate: (QueryKey, Set<String>) -> Bool) {
        // Dropped queries the app still holds too: they do not wake, and what they show when they
        // do (a memory tier's copy from before now) is stale.
        let held = state.withLock { state in
            // A value waiting for a query that is not made yet is let go: it is older than now.
            state.seeds = state.seeds.filter { key, _ in !predicate(key, []) }
            return Array(state.queries.values) + state.dropped.values.compactMap(\.query)
        }
        for query in held where predicate(query.key, query.tags) { query.invalidate() }
    }

    private func all() -> [any AnyQuery] {
        state.withLock { Array($0.queries.values) }
    }

    /// Puts `query` in the list of awake queries or of dropped ones, as the query says, and returns
    /// what a woken query must learn. Called by the query under its own lock, so the list follows
    /// the query's drops and wakings in their order (see `QueryClientLink`).
    private func register(_ query: any AnyQuery, awake: Bool) -> QueryClientView {
        state.withLock { state in
            let key = query.key
            if awake {
                if state.dropped[key]?.query === query { state.dropped[key] = nil }
                // A key the inspector removed and made again belongs to the new query.
                if state.queries[key] == nil { state.queries[key] = query }
            } else if let held = state.queries[key], held === query {
                state.queries[key] = nil
                state.dropped[key] = WeakQuery(query: query)
            }
            if !awake { state.dropped = state.dropped.filter { $0.value.query != nil } }
            state.countWaiters.resumeSatisfied(by: state.queries.count)
            return QueryClientView(
                online: state.isOnline, foreground: state.isInForeground, pending: query.writeScope.flatMap { state.pending(in: $0) })
        }
    }

    // MARK: Writes

    /// Follows `outbox`'s writes (once however often called): a delivered write invalidates every
    /// query it names (`OutboxEntry/invalidates`: a tag, or a key prefix written as its parts
    /// joined by `/`) and every query that showed it; queries with ``PendingWrites`` on this outbox
    /// show its writes as they are queued, delivered and refused. It follows for as long as the
    /// client lives (the outbox does not keep the client: keep it, as an app keeps its client).
    public func follow(_ outbox: Outbox) {
        let id = ObjectIdentifier(outbox)
        let isNew = state.withLock { state -> Bool in
            guard state.outboxes[id] == nil else { return false }
            // A placeholder until the observation exists: `observeWrites` may report before it returns.
            state.outboxes[id] = FollowedOutbox(outbox: outbox, observation: OutboxWriteObservation(id: UUID(), outbox: nil))
            return true
        }
        guard isNew else { return }
        let observation = outbox.observeWrites { [weak self] event in self?.outbox(id, reported: event) }
        state.withLock { $0.outboxes[id]?.observation = observation }
        // The writes of an outbox not read yet come with its `loaded` report.
        if !outbox.status.isLoaded {
            let logger = environment.logger
            Task {
                do {
                    try await outbox.ensureLoaded()
                } catch {
                    // Its pending writes show once a later call reads the storage (any enqueue or drain).
                    logger.warning(
                        "the outbox could not be read: its pending writes are not shown yet",
                        metadata: ["outbox": "\(outbox.name)", "error": "\(error)"])
                }
            }
        }
    }

    private func outbox(_ id: ObjectIdentifier, reported event: OutboxWriteEvent) {
        let (targets, invalidated) = state.withLock { state -> ([any AnyQuery], [any AnyQuery]) in
            guard var followed = state.outboxes[id] else { return ([], []) }
            followed.apply(event)
            state.outboxes[id] = followed
            let overlaying = state.queries.values.filter { query in
                guard let scope = query.writeScope, scope.outbox == id else { return false }
                if case .loaded = event { return true }
                return event.entries.contains { $0.scope == scope.name }
            }
            guard case .delivered(let entry) = event else { return (overlaying, []) }
            let named = state.queries.values.filter { query in
                entry.invalidates.contains { query.tags.contains($0) || query.key.isUnder(label: $0) }
            }
            return (overlaying, overlaying + named.filter { query in !overlaying.contains { $0 === query } })
        }
        for query in targets { query.writesChanged(event) }
        for query in invalidated { query.invalidate() }
    }

    /// Suspends until the client holds `count` queries (a test waits for one to be dropped).
    ///
    /// - Throws: `CancellationError` when the waiting task is cancelled.
    package func awaitQueryCount(_ count: Int) async throws {
        try await state.wait(in: \.countWaiters, current: { $0.queries.count }, until: { $0 == count })
    }
}

extension QueryClient.State {
    /// The writes `scope` has waiting, if the client follows its outbox.
    func pending(in scope: WriteScope) -> [OutboxEntry]? {
        outboxes[scope.outbox].map { $0.pending[scope.name] ?? [] }
    }
}

extension QueryClient.FollowedOutbox {
    /// Keeps the mirror of the outbox's waiting writes in step with `event`.
    mutating func apply(_ event: OutboxWriteEvent) {
        switch event {
        case .loaded(let entries):
            pending = Dictionary(grouping: entries, by: \.scope)
        case .queued(let entry):
            var writes = pending[entry.scope, default: []].filter { $0.id != entry.id }
            writes.append(entry)
            pending[entry.scope] = writes.sorted { $0.sequence < $1.sequence }
        case .delivered(let entry), .refused(let entry), .discarded(let entry):
            pending[entry.scope]?.removeAll { $0.id == entry.id }
        }
    }
}

extension OutboxWriteEvent {
    /// The writes the event is about.
    var entries: [OutboxEntry] {
        switch self {
        case .loaded(let entries): entries
        case .queued(let entry), .delivered(let entry), .refused(let entry), .discarded(let entry): [entry]
        }
    }
}

extension QueryKey {
    /// Whether `label` (an outbox write's `OutboxEntry/invalidates`: parts joined by `/`) names
    /// this key or a prefix of it, part by part (`posts` covers `["posts", 42]`, not
    /// `["posts/archive"]`; a part that holds a `/` cannot be named by a label).
    func isUnder(label: String) -> Bool {
        let names = label.split(separator: "/", omittingEmptySubsequences: false)
        return parts.count >= names.count && zip(parts, names).allSatisfy { $0.description == $1 }
    }
}

/// The outbox and scope whose writes a query shows.
struct WriteScope: Sendable {
    var outbox: ObjectIdentifier
    var name: String
}


extension QueryClient {
    /// Every query in memory as an inspector shows it, by key.
    public func inspect() -> [QueryInspection] {
        let queries = state.withLock { Array($0.queries.values) }
        return queries.map { $0.inspection() }.sorted { $0.key < $1.key }
    }

    /// Whether an inspector follows the client (`changes()`).
    var isInspected: Bool { inspection.withLock { $0.isOn } }

    /// How many loads the timeline's bookkeeping holds as possibly running (a test's bound).
    var runningRecordCount: Int { inspection.withLock { $0.runningCount } }

    /// The last loads of every query (at most 200), oldest first, with why each ran, how long it
    /// took and how it ended. Recorded only while an inspector follows `changes()`.
    public var recentLoads: [QueryLoadRecord] { inspection.withLock { $0.loads } }

    /// A signal for each change an inspector shows (a snapshot published, a load started or
    /// ended); changes that come faster than the reader are merged. Subscribing turns the load
    /// timeline on. Ends when the reader's task is cancelled.
    public func changes() -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let id = UUID()
        inspection.withLock { $0.subscribers[id] = continuation }
        continuation.onTermination = { [weak self] _ in
            self?.inspection.withLock { feed in
                feed.subscribers[id] = nil
                // The last inspector left: nothing is recorded until the next one comes.
                if !feed.isOn { feed = InspectionFeed() }
            }
        }
        return stream
    }

    /// The query in memory whose key reads `description` (`posts/42`), if any: how an inspector
    /// names a query in a URL.
    public func query(described description: String) -> (any InspectableQuery)? {
        // The description is injective (``QueryKey/description``): one key at most reads so.
        guard let key = QueryKey(described: description) else { return nil }
        return state.withLock { $0.queries[key] } as? any InspectableQuery
    }

    /// Forgets the query for `key` now (an inspector's "remove"), unless a screen observes it:
    /// the next `query(...)` for the key makes a new one. Its stores keep their copies. Returns
    /// whether it was forgotten (`false`: there was none, or it is observed — a query removed while
    /// observed would no longer hear the network, invalidations or the outbox).
    @discardableResult
    public func remove(_ key: QueryKey) -> Bool {
        let held = state.withLock { state in state.queries[key] ?? state.dropped[key]?.query }
        // Its observer count read outside the client's lock (a query's lock is never taken under it).
        guard let held, held.observerCount == 0 else { return false }
        return state.withLock { state in
            guard (state.queries[key] ?? state.dropped[key]?.query) === held else { return false }
            state.queries[key] = nil
            state.dropped[key] = nil
            state.countWaiters.resumeSatisfied(by: state.queries.count)
            return true
        }
    }

    fileprivate func record(_ activity: QueryActivity) {
        // Its own lock, never the client's or a query's: a query reports from under its own lock
        // (so its reports keep its order).
        let subscribers = inspection.withLock { feed -> [AsyncStream<Void>.Continuation] in
            guard feed.isOn else { return [] }
            feed.record(activity)
            return Array(feed.subscribers.values)
        }
        // From a new task: a query reports from under its own lock, and a reader of `changes()`
        // whose child task observes a query would, cancelled, remove that observer under it while
        // the runtime holds the reader's lock, which this yield takes (docs/ARCHITECTURE.md,
        // "Concurrency"). The signals carry nothing: their order does not matter.
        guard !subscribers.isEmpty else { return }
        Task { for subscriber in subscribers { subscriber.yield() } }
    }
}

/// A value set for a key before its query was made.
struct QuerySeed: Sendable {
    var value: any Sendable
    var at: Date
    /// Tells two values set for the key apart (a concurrent `setValue(for:)` starts over).
    var number: UInt64
}

/// A dropped query, held only by the app if at all.
struct WeakQuery: Sendable {
    weak var query: (any AnyQuery)?
}

/// A query of any value type, as the client holds it.
protocol AnyQuery: AnyObject, Sendable {
    var key: QueryKey { get }
    var tags: Set<String> { get }
    var valueType: Any.Type { get }
    var observerCount: Int { get }
    func invalidate()
    /// The outbox scope whose writes it shows, if any.
    var writeScope: WriteScope? { get }
    /// The client's network state changed: the query reads it (under its lock) and follows.
    func connectivityChanged()
    func cameToForeground()
    func wentToBackground()
    /// Shows the outbox's change to the writes of its scope.
    func writesChanged(_ event: OutboxWriteEvent)
    /// The query as an inspector shows it.
    func inspection() -> QueryInspection
}

extension Query: AnyQuery {
    var valueType: Any.Type { Value.self }
    func connectivityChanged() {
        send { [link] _ in link.isOnline().map { .connectivity(online: $0) } }
    }
    func cameToForeground() { send(.foreground) }
    func wentToBackground() { send(.background) }

    var writeScope: WriteScope? {
        pendingWrites.map { WriteScope(outbox: ObjectIdentifier($0.outbox), name: $0.scope) }
    }

    func writesChanged(_ event: OutboxWriteEvent) {
        guard let scope = pendingWrites?.scope else { return }
        switch event {
        case .loaded(let entries): send(.writesPending(entries.filter { $0.scope == scope }))
        case .queued(let entry) where entry.scope == scope: send(.writeQueued(entry))
        case .delivered(let entry) where entry.scope == scope: send(.writeDelivered(entry.id))
        case .refused(let entry) where entry.scope == scope: send(.writeRefused(entry.id))
        default: break
        }
    }
}
