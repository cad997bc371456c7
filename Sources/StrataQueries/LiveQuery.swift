import Observation
@_spi(StrataInternals) import Strata
import StrataOutbox

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
/// **A view re-renders only for what it reads.** Each of `value`, `status`, `phase`,
/// `isStale`, `lastError` and `provenance` is observed on its own and changes only when it
/// differs: a view that reads `value` is not re-rendered when a refresh starts or the value ages.
/// Reading `snapshot` observes every change.
///
/// It is `Observable` by hand rather than with the `@Observable` macro: the macro names the observed
/// property by a key path literal on every read, and for a generic class the runtime builds that key
/// path anew each time (demangling its type on every read: see docs/BENCHMARKS.md). This class builds
/// them once per value type.
@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
@MainActor
public final class LiveQuery<Value: Sendable & Equatable>: Observable {
    /// The query's state, as last delivered to the main actor. Reading it observes every change;
    /// read the field a view needs (`value`, `phase`…) to observe only that one.
    public var snapshot: QuerySnapshot<Value> {
        registrar.access(self, keyPath: paths.snapshot)
        return storedSnapshot
    }
    /// The query observed (`switchTo(_:)` changes it).
    public private(set) var query: Query<Value>
    private var storedSnapshot: QuerySnapshot<Value>
    private let registrar = ObservationRegistrar()
    /// The key paths each field is observed by, built once per value type (see above).
    private let paths: LiveQueryKeyPaths<Value>
    /// The value of the previous query, shown while the current one has none.
    private var placeholder: Value?
    private var version: UInt64
    private var task: Task<Void, Never>?
    private var catchingUp: [(id: UInt64, version: UInt64, continuation: CheckedContinuation<Void, any Error>)] = []
    private var nextWaiter: UInt64 = 0

    init(query: Query<Value>) {
        self.paths = LiveQueryKeyPaths<Value>.shared
        self.query = query
        let stream = query.subscribe()
        let latest = query.latest
        self.storedSnapshot = latest.snapshot
        self.version = latest.version
        self.task = Self.follow(stream, of: query, into: self)
    }

    /// Delivers `stream`'s snapshots (of `query`) to `live` on the main actor, in order, while it
    /// lives and observes that query: after `switchTo(_:)`, what the old stream still holds is
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
        show(present(latest.snapshot))
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
        show(present(published.snapshot))
        resumeCaughtUp()
    }

    /// Shows `new`: each field that differs is changed under its own key path (the snapshot's too),
    /// so an observer of one field hears only of its changes.
    private func show(_ new: QuerySnapshot<Value>) {
        let old = storedSnapshot
        guard new != old else { return }
        var changed = [mutation(paths.snapshot)]
        if new.value != old.value { changed.append(mutation(paths.value)) }
        if new.provenance != old.provenance { changed.append(mutation(paths.provenance)) }
        if new.status != old.status { changed.append(mutation(paths.status)) }
        if new.phase != old.phase { changed.append(mutation(paths.phase)) }
        if new.isStale != old.isStale { changed.append(mutation(paths.isStale)) }
        if new.lastError != old.lastError { changed.append(mutation(paths.lastError)) }
        for field in changed { field.willSet() }
        storedSnapshot = new
        for field in changed { field.didSet() }
    }

    /// The registrar's two calls around a change of the field at `path`.
    private func mutation<Member>(_ path: KeyPath<LiveQuery, Member>) -> (willSet: () -> Void, didSet: () -> Void) {
        ({ self.registrar.willSet(self, keyPath: path) }, { self.registrar.didSet(self, keyPath: path) })
    }

    private func resumeCaughtUp() {
        catchingUp.removeAll { waiter in
            guard waiter.version <= version else { return false }
            waiter.continuation.resume()
            return true
        }
    }

    /// The value shown, if any (observed on its own: it changes only when the value does).
    public var value: Value? {
        registrar.access(self, keyPath: paths.value)
        return storedSnapshot.value
    }
    /// Where the value came from (observed on its own).
    public var provenance: Provenance? {
        registrar.access(self, keyPath: paths.provenance)
        return storedSnapshot.provenance
    }
    /// Whether there is a value, or an error instead (observed on its own).
    public var status: QuerySnapshot<Value>.Status {
        registrar.access(self, keyPath: paths.status)
        return storedSnapshot.status
    }
    /// Whether a load runs, waits, or nothing happens (observed on its own).
    public var phase: QueryPhase {
        registrar.access(self, keyPath: paths.phase)
        return storedSnapshot.phase
    }
    /// Whether the value is stale (observed on its own).
    public var isStale: Bool {
        registrar.access(self, keyPath: paths.isStale)
        return storedSnapshot.isStale
    }
    /// The error of the last load, until one succeeds (observed on its own).
    public var lastError: QueryError? {
        registrar.access(self, keyPath: paths.lastError)
        return storedSnapshot.lastError
    }

    /// Suspends until the query has settled (``Query/settled()``) and this object shows the
    /// snapshot it settled with.
    ///
    /// - Throws: `CancellationError` when the waiting task is cancelled.
    public func settled() async throws {
        try await query.settled()
        try await caughtUp()
    }

    /// Suspends until this object shows the snapshot the query has published last.
    ///
    /// - Throws: `CancellationError` when the waiting task is cancelled.
    package func caughtUp() async throws {
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

/// The key paths a ``LiveQuery`` of one value type is observed by, built once per type: building a
/// key path of a generic class demangles its type (see ``LiveQuery``), so each is made the first time
/// a `LiveQuery<Value>` is, and shared by every later one.
@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
@MainActor
final class LiveQueryKeyPaths<Value: Sendable & Equatable> {
    let snapshot: KeyPath<LiveQuery<Value>, QuerySnapshot<Value>>
    let value: KeyPath<LiveQuery<Value>, Value?>
    let provenance: KeyPath<LiveQuery<Value>, Provenance?>
    let status: KeyPath<LiveQuery<Value>, QuerySnapshot<Value>.Status>
    let phase: KeyPath<LiveQuery<Value>, QueryPhase>
    let isStale: KeyPath<LiveQuery<Value>, Bool>
    let lastError: KeyPath<LiveQuery<Value>, QueryError?>

    private init() {
        snapshot = \.snapshot
        value = \.value
        provenance = \.provenance
        status = \.status
        phase = \.phase
        isStale = \.isStale
        lastError = \.lastError
    }

    /// The key paths of `LiveQuery<Value>`: made the first time, then looked up by type.
    static var shared: LiveQueryKeyPaths {
        let type = ObjectIdentifier(Value.self)
        if let made = liveQueryKeyPaths[type] as? LiveQueryKeyPaths { return made }
        let made = LiveQueryKeyPaths()
        liveQueryKeyPaths[type] = made
        return made
    }
}

/// Every value type's `LiveQueryKeyPaths`, by the value type.
@MainActor private var liveQueryKeyPaths: [ObjectIdentifier: AnyObject] = [:]
