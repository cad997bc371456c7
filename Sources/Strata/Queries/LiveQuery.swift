import Observation

/// A ``Query`` observed from the main actor: an `@Observable` object a view model holds and a
/// view reads, with the query's ``QuerySnapshot`` as its state.
///
/// Its first read already holds the cached value when the chain can answer at once (a memory hit),
/// read synchronously when it is made: no empty frame, no hop. Later snapshots arrive on the main
/// actor in the order the query published them. It observes the query as long as it lives:
/// releasing it (the view model going away) removes the observer, and cancels a load only it
/// wanted.
///
/// ```swift
/// @MainActor @Observable final class FeedModel {
///     let feed: LiveQuery<[FeedItem]>
///     init(queries: QueryClient) { feed = queries.query(["feed"], chain: feedChain).observed() }
/// }
/// // in the view: if let items = model.feed.value { List(items) … }; model.feed.phase …
/// ```
///
/// It is `Observable` by hand rather than with the `@Observable` macro: the macro names the observed
/// property by a key path literal on every read, and for a generic class the runtime builds that key
/// path anew each time (demangling its type: about 20,000 instructions per read, measured with
/// callgrind). This class builds it once.
@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
@MainActor
public final class LiveQuery<Value: Sendable & Equatable>: Observable {
    /// The query's state, as last delivered to the main actor.
    public private(set) var snapshot: QuerySnapshot<Value> {
        get {
            registrar.access(self, keyPath: snapshotKeyPath)
            return storedSnapshot
        }
        set {
            registrar.withMutation(of: self, keyPath: snapshotKeyPath) { storedSnapshot = newValue }
        }
    }
    /// The query observed (``switchTo(_:)`` changes it).
    public private(set) var query: Query<Value>
    private var storedSnapshot: QuerySnapshot<Value>
    private let registrar = ObservationRegistrar()
    /// `\.snapshot`, built once (see above).
    private let snapshotKeyPath: KeyPath<LiveQuery, QuerySnapshot<Value>> = \.snapshot
    /// The value of the previous query, shown while the current one has none.
    private var placeholder: Value?
    private var version: UInt64
    private var task: Task<Void, Never>?
    private var catchingUp: [(id: UInt64, version: UInt64, continuation: CheckedContinuation<Void, any Error>)] = []
    private var nextWaiter: UInt64 = 0

    init(query: Query<Value>) {
        self.query = query
        let stream = query.subscribe()
        let latest = query.latest
        self.storedSnapshot = latest.snapshot
        self.version = latest.version
        self.task = Self.follow(stream, of: query, into: self)
    }

    /// Delivers `stream`'s snapshots (of `query`) to `live` on the main actor, in order, while it
    /// lives and observes that query: after ``switchTo(_:)``, what the old stream still holds is
    /// dropped.
    private static func follow(_ stream: AsyncStream<Query<Value>.Published>, of query: Query<Value>, into live: LiveQuery) -> Task<Void, Never> {
        // The query is held weakly too: a live query released (and its query with it) leaves
        // nothing behind while this task winds down.
        Task { @MainActor [weak live, weak query] in
            for await published in stream {
                guard let live, let query, live.query === query else { return }
                live.apply(published)
            }
        }
    }

    /// Observes `newQuery` instead (the screen's key changed: another post, another page, a search
    /// term). Until the new query has a value, the previous value stays shown, marked
    /// ``QuerySnapshot/isPlaceholder``: the screen never goes blank in between. The previous query
    /// loses this observer.
    public func switchTo(_ newQuery: Query<Value>) {
        guard newQuery !== query else { return }
        task?.cancel()
        placeholder = snapshot.value
        query = newQuery
        let stream = newQuery.subscribe()
        let latest = newQuery.latest
        version = latest.version
        let shown = present(latest.snapshot)
        if shown != snapshot { snapshot = shown }
        task = Self.follow(stream, of: newQuery, into: self)
        // Waits for the previous query's snapshots are over: it is not observed any more.
        for waiter in catchingUp { waiter.continuation.resume() }
        catchingUp = []
    }

    /// `snapshot` as shown: with the placeholder's value while it has none.
    private func present(_ snapshot: QuerySnapshot<Value>) -> QuerySnapshot<Value> {
        guard let placeholder else { return snapshot }
        guard snapshot.value == nil else {
            self.placeholder = nil
            return snapshot
        }
        var shown = snapshot
        shown.value = placeholder
        shown.isPlaceholder = true
        return shown
    }

    isolated deinit {
        task?.cancel()
        for waiter in catchingUp { waiter.continuation.resume(throwing: CancellationError()) }
    }

    private func apply(_ published: Query<Value>.Published) {
        guard published.version > version else { return }
        version = published.version
        let shown = present(published.snapshot)
        if shown != snapshot { snapshot = shown }
        resumeCaughtUp()
    }

    private func resumeCaughtUp() {
        catchingUp.removeAll { waiter in
            guard waiter.version <= version else { return false }
            waiter.continuation.resume()
            return true
        }
    }

    /// The value shown, if any.
    public var value: Value? { snapshot.value }
    /// Where the value came from.
    public var provenance: Provenance? { snapshot.provenance }
    /// Whether there is a value, or an error instead.
    public var status: QuerySnapshot<Value>.Status { snapshot.status }
    /// Whether a load runs, waits, or nothing happens.
    public var phase: QueryPhase { snapshot.phase }
    /// Whether the value is stale.
    public var isStale: Bool { snapshot.isStale }

    /// Suspends until the query has settled (``Query/settled()``) and this object shows the
    /// snapshot it settled with.
    ///
    /// - Throws: `CancellationError` when the waiting task is cancelled.
    public func settled() async throws {
        try await query.settled()
        let target = query.latest.version
        guard target > version else { return }
        nextWaiter += 1
        let id = nextWaiter
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                if Task.isCancelled {
                    continuation.resume(throwing: CancellationError())
                } else {
                    catchingUp.append((id, target, continuation))
                }
            }
        } onCancel: {
            Task { @MainActor [weak self] in self?.withdraw(id) }
        }
    }

    private func withdraw(_ id: UInt64) {
        guard let index = catchingUp.firstIndex(where: { $0.id == id }) else { return }
        catchingUp.remove(at: index).continuation.resume(throwing: CancellationError())
    }
}

extension Query {
    /// This query observed from the main actor (see ``LiveQuery``).
    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @MainActor
    public func observed() -> LiveQuery<Value> {
        LiveQuery(query: self)
    }
}
