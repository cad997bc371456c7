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
public final class LiveQuery<Value: Sendable & Equatable>: Observable, LiveSnapshotFields {
    /// The query's state, as last delivered to the main actor. Reading it observes every change;
    /// read the field a view needs (`value`, `phase`…) to observe only that one.
    public var snapshot: QuerySnapshot<Value> {
        registrar.access(self, keyPath: paths.snapshot)
        return storedSnapshot
    }
    /// The query observed (`switchTo(_:)` changes it).
    public private(set) var query: Query<Value>
    var storedSnapshot: QuerySnapshot<Value>
    let registrar = ObservationRegistrar()
    /// The key paths each field is observed by, built once per value type (see above).
    let paths: LiveFieldPaths<LiveQuery>
    /// This object's number among the query's observers.
    private var observer: UInt64
    /// Whether this observer wants loads (`true`, the default). A dependent screen whose key is
    /// not ready sets it to `false`: it still shows every snapshot, and starts no load. Setting it
    /// back to `true` loads a stale value, as a new observer would.
    public var isEnabled: Bool {
        didSet { if isEnabled != oldValue { query.setObserver(observer, enabled: isEnabled) } }
    }
    /// The value of the previous query, shown while the current one has none.
    private var placeholder: Value?
    private var version: UInt64
    private var task: Task<Void, Never>?
    private let catchingUp = CatchUpWaiters()

    init(query: Query<Value>, enabled: Bool = true) {
        self.paths = LiveFieldPaths<LiveQuery>.shared
        self.query = query
        self.isEnabled = enabled
        let (stream, observer) = query.subscribe(enabled: enabled)
        self.observer = observer
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
        let (stream, observer) = newQuery.subscribe(enabled: isEnabled)
        self.observer = observer
        let latest = newQuery.latest
        version = latest.version
        show(present(latest.snapshot))
        task = Self.follow(stream, of: newQuery, into: self)
        // Waits for the previous query's snapshots are over: it is not observed any more.
        catchingUp.resumeAll()
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
        catchingUp.cancelAll()
    }

    private func apply(_ published: Query<Value>.Published) {
        guard published.version > version else { return }
        version = published.version
        show(present(published.snapshot))
        catchingUp.resume(upTo: version)
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
        try await catchingUp.wait(for: query.latest.version, shown: version)
    }
}

/// The waits for a main-actor object to show a version of a query (``LiveQuery/settled()``).
@MainActor
final class CatchUpWaiters {
    private var waiters: [(id: UInt64, version: UInt64, continuation: CheckedContinuation<Void, any Error>)] = []
    private var nextWaiter: UInt64 = 0

    /// Suspends until `resume(upTo:)` reaches `target` (at once if `shown` has).
    func wait(for target: UInt64, shown: UInt64) async throws {
        guard target > shown else { return }
        nextWaiter += 1
        let id = nextWaiter
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                if Task.isCancelled {
                    continuation.resume(throwing: CancellationError())
                } else {
                    waiters.append((id, target, continuation))
                }
            }
        } onCancel: {
            Task { @MainActor [weak self] in self?.withdraw(id) }
        }
    }

    /// Resumes the waits for `version` or before.
    func resume(upTo version: UInt64) {
        guard !waiters.isEmpty else { return }
        waiters.removeAll { waiter in
            guard waiter.version <= version else { return false }
            waiter.continuation.resume()
            return true
        }
    }

    /// Ends every wait: what they waited for is not observed any more.
    func resumeAll() {
        for waiter in waiters { waiter.continuation.resume() }
        waiters = []
    }

    /// Ends every wait with `CancellationError` (the object is going).
    func cancelAll() {
        for waiter in waiters { waiter.continuation.resume(throwing: CancellationError()) }
        waiters = []
    }

    private func withdraw(_ id: UInt64) {
        guard let index = waiters.firstIndex(where: { $0.id == id }) else { return }
        waiters.remove(at: index).continuation.resume(throwing: CancellationError())
    }
}

extension Query {
    /// This query observed from the main actor (see ``LiveQuery``). `enabled: false` makes an
    /// observer that wants no loads yet (``LiveQuery/isEnabled``).
    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @MainActor
    public func observed(enabled: Bool = true) -> LiveQuery<Value> {
        LiveQuery(query: self, enabled: enabled)
    }
}

/// What an observable object showing a query's snapshot has: the fields a view reads, each observed
/// on its own (``LiveQuery``, ``LiveSelection``).
@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
@MainActor
protocol LiveSnapshotFields: AnyObject, Observable {
    associatedtype Shown: Sendable & Equatable
    var snapshot: QuerySnapshot<Shown> { get }
    var value: Shown? { get }
    var provenance: Provenance? { get }
    var status: QuerySnapshot<Shown>.Status { get }
    var phase: QueryPhase { get }
    var isStale: Bool { get }
    var lastError: QueryError? { get }
    var storedSnapshot: QuerySnapshot<Shown> { get set }
    var registrar: ObservationRegistrar { get }
    var paths: LiveFieldPaths<Self> { get }
}

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
extension LiveSnapshotFields {
    /// Shows `new`: each field that differs is changed under its own key path (the snapshot's too),
    /// so an observer of one field hears only of its changes.
    func show(_ new: QuerySnapshot<Shown>) {
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
    private func mutation<Member>(_ path: KeyPath<Self, Member>) -> (willSet: () -> Void, didSet: () -> Void) {
        ({ self.registrar.willSet(self, keyPath: path) }, { self.registrar.didSet(self, keyPath: path) })
    }
}

/// The key paths a ``LiveQuery`` (or ``LiveSelection``) of one type is observed by, built once per
/// type: building a key path of a generic class demangles its type (see ``LiveQuery``), so each is
/// made the first time an `Owner` is, and shared by every later one.
@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
@MainActor
final class LiveFieldPaths<Owner: LiveSnapshotFields> {
    typealias Value = Owner.Shown
    let snapshot: KeyPath<Owner, QuerySnapshot<Value>>
    let value: KeyPath<Owner, Value?>
    let provenance: KeyPath<Owner, Provenance?>
    let status: KeyPath<Owner, QuerySnapshot<Value>.Status>
    let phase: KeyPath<Owner, QueryPhase>
    let isStale: KeyPath<Owner, Bool>
    let lastError: KeyPath<Owner, QueryError?>

    private init() {
        snapshot = \.snapshot
        value = \.value
        provenance = \.provenance
        status = \.status
        phase = \.phase
        isStale = \.isStale
        lastError = \.lastError
    }

    /// The key paths of `Owner`: made the first time, then looked up by type.
    static var shared: LiveFieldPaths {
        let type = ObjectIdentifier(Owner.self)
        if let made = liveQueryKeyPaths[type] as? LiveFieldPaths { return made }
        let made = LiveFieldPaths()
        liveQueryKeyPaths[type] = made
        return made
    }
}

/// Every owner type's `LiveFieldPaths`, by the owner type.
@MainActor private var liveQueryKeyPaths: [ObjectIdentifier: AnyObject] = [:]
