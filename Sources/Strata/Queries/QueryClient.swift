import Foundation

/// The live queries of an app (or a server): one ``Query`` per key, however many screens observe
/// it, and the signals that refetch them — the network coming back, the app coming to the
/// foreground, invalidations by key prefix, tag or predicate.
///
/// ```swift
/// let queries = QueryClient(environment: LoadEnvironment(logger: Logger(label: "app.queries")))
/// let feed = queries.query(["feed"], policy: QueryPolicy(staleAfter: .minutes(5)), chain: feedChain)
///
/// for await snapshot in feed.snapshots() { render(snapshot) }   // a server, a test
/// let live = feed.observed()                                    // a view model (main actor)
///
/// queries.invalidate(prefix: ["posts"])   // observed posts refetch once each, others go stale
/// ```
///
/// Time and logging come from `environment` (a test passes a manual clock's). The signals are
/// injected: call ``setOnline(_:)`` and ``enteredForeground()`` from the platform's own (a path
/// monitor, the scene phase), or from a test.
public final class QueryClient: Sendable {
    /// The environment every query's loads run in.
    public let environment: LoadEnvironment
    private let state: Locked<State>

    private struct State: Sendable {
        var queries: [QueryKey: any AnyQuery] = [:]
        /// Dropped queries an app may still hold: the same object comes back for their key, so a key
        /// never has two.
        var dropped: [QueryKey: WeakQuery] = [:]
        var isOnline: Bool
        var countWaiters = ConditionWaiters<Int>()
    }

    /// A client whose loads run in `environment`, starting `online` or not.
    public init(environment: LoadEnvironment = .live, online: Bool = true) {
        self.environment = environment
        self.state = Locked(State(isOnline: online))
    }

    /// Whether the client believes the network reachable (``setOnline(_:)``).
    public var isOnline: Bool { state.withLock { $0.isOnline } }

    /// The query for `key`: the one there is, or a new one loading through `chain`.
    ///
    /// The first call for a key decides its chain and policy; later calls for the same key return
    /// that query (whatever they pass), so every screen showing a key shares one state and one load.
    /// A key must keep one value type. A query nobody observes is dropped after its
    /// ``QueryPolicy/dropAfter`` (its value released, its stores keep their copies); one the app
    /// still holds comes back to life when used.
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
    ///     `paused(disabled)`, never fetching, until ``Query/setEnabled(_:)``.
    ///   - chain: what a load runs.
    public func query<Value: Sendable & Equatable>(
        _ key: QueryKey, tags: Set<String> = [], policy: QueryPolicy = QueryPolicy(),
        cached: (any Loader<Void, Value>)? = nil, enabled: Bool = true, chain: some Loader<Void, Value>
    ) -> Query<Value> {
        state.withLock { state in
            if let held = state.dropped[key]?.query {
                state.dropped[key] = nil
                state.queries[key] = held
            }
            if let existing = state.queries[key] {
                guard let query = existing as? Query<Value> else {
                    preconditionFailure("query \(key) holds \(existing.valueType), asked for \(Value.self)")
                }
                return query
            }
            let query = Query(
                key: key, tags: tags, chain: AnyLoader(chain), cached: cached.map { AnyLoader($0) },
                environment: environment,
                configuration: policy, online: state.isOnline, enabled: enabled,
                onDrop: { [weak self] query in self?.remove(query) },
                onRevive: { [weak self] query in self?.revive(query) })
            state.queries[key] = query
            state.countWaiters.resumeSatisfied(by: state.queries.count)
            return query
        }
    }

    /// The keys of the queries in memory now.
    public var keys: [QueryKey] { state.withLock { Array($0.queries.keys) } }

    /// Tells every query the network is reachable or not. Coming back, a load paused offline
    /// continues and a stale, observed query refetches (once).
    public func setOnline(_ online: Bool) {
        let queries = state.withLock { state -> [any AnyQuery] in
            state.isOnline = online
            return Array(state.queries.values)
        }
        for query in queries { query.connectivityChanged(online: online) }
    }

    /// Tells every query the app came to the foreground: a stale, observed query refetches, at most
    /// once per its foreground throttle.
    public func enteredForeground() {
        for query in all() { query.cameToForeground() }
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
        for query in all() where predicate(query.key, query.tags) { query.invalidate() }
    }

    private func all() -> [any AnyQuery] {
        state.withLock { Array($0.queries.values) }
    }

    private func remove(_ query: any AnyQuery) {
        state.withLock { state in
            if let held = state.queries[query.key], held === query {
                state.queries[query.key] = nil
                state.dropped[query.key] = WeakQuery(query: query)
            }
            state.dropped = state.dropped.filter { $0.value.query != nil }
            state.countWaiters.resumeSatisfied(by: state.queries.count)
        }
    }

    /// A dropped query the app held is used again: it is live again, and learns the network's state.
    private func revive(_ query: any AnyQuery) {
        let online = state.withLock { state -> Bool in
            if state.dropped[query.key]?.query === query { state.dropped[query.key] = nil }
            if state.queries[query.key] == nil { state.queries[query.key] = query }
            state.countWaiters.resumeSatisfied(by: state.queries.count)
            return state.isOnline
        }
        query.connectivityChanged(online: online)
    }

    /// Suspends until the client holds `count` queries (a test waits for one to be dropped).
    ///
    /// - Throws: `CancellationError` when the waiting task is cancelled.
    @_spi(StrataInternals)
    public func waitForQueries(_ count: Int) async throws {
        try await state.wait(in: \.countWaiters, current: { $0.queries.count }, until: { $0 == count })
    }
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
    func invalidate()
    func connectivityChanged(online: Bool)
    func cameToForeground()
}

extension Query: AnyQuery {
    var valueType: Any.Type { Value.self }
    func connectivityChanged(online: Bool) { send(.connectivity(online: online)) }
    func cameToForeground() { send(.foreground) }
}
