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
@MainActor
@Observable
public final class LiveQuery<Value: Sendable & Equatable> {
    /// The query's state, as last delivered to the main actor.
    public private(set) var snapshot: QuerySnapshot<Value>
    /// The query observed.
    @ObservationIgnored public let query: Query<Value>
    @ObservationIgnored private var version: UInt64
    @ObservationIgnored private var task: Task<Void, Never>?
    @ObservationIgnored private var catchingUp: [(id: UInt64, version: UInt64, continuation: CheckedContinuation<Void, any Error>)] = []
    @ObservationIgnored private var nextWaiter: UInt64 = 0

    init(query: Query<Value>) {
        self.query = query
        let stream = query.subscribe()
        let latest = query.latest
        self.snapshot = latest.snapshot
        self.version = latest.version
        self.task = Task { @MainActor [weak self] in
            for await published in stream {
                guard let self else { return }
                self.apply(published)
            }
        }
    }

    isolated deinit {
        task?.cancel()
        for waiter in catchingUp { waiter.continuation.resume(throwing: CancellationError()) }
    }

    private func apply(_ published: Query<Value>.Published) {
        guard published.version > version else { return }
        version = published.version
        if published.snapshot != snapshot { snapshot = published.snapshot }
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
    @MainActor
    public func observed() -> LiveQuery<Value> {
        LiveQuery(query: self)
    }
}
