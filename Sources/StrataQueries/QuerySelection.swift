import Observation
@_spi(StrataInternals) import Strata

extension QuerySnapshot {
    /// This snapshot with `value` in place of its value (a selection of it).
    func replacingValue<Other>(with value: Other?) -> QuerySnapshot<Other> {
        QuerySnapshot<Other>(
            value: value, provenance: provenance, status: status.as(Other.self), phase: phase, isStale: isStale, storedAt: storedAt,
            updatedAt: updatedAt, lastError: lastError, failureCount: failureCount, isPlaceholder: isPlaceholder,
            lastFetchReason: lastFetchReason)
    }
}

extension QuerySnapshot.Status {
    /// The same status of a snapshot of another value type.
    func `as`<Other>(_: Other.Type) -> QuerySnapshot<Other>.Status {
        switch self {
        case .empty: .empty
        case .value: .value
        case .failed: .failed
        }
    }
}

extension Query {
    /// The snapshots of what `select` derives from the value (a count, one item, a sorted view): the
    /// current one first, then one each time **the selected value changes** (by `==`) or the query's
    /// status or error does (a failed first load is news), whatever else happens to the query — a
    /// refresh starting or ending, the value aging, a refetch that changed another item. Each
    /// element's other fields (phase, staleness) are the query's at that moment.
    /// Observers with different selections share the query's one load.
    ///
    /// ```swift
    /// for await count in feed.snapshots(select: { $0.items.count }) { badge(count.value) }
    /// ```
    ///
    /// `select` runs once per snapshot the query publishes, on the publishing thread: keep it cheap
    /// and pure. Iterating makes an observer, as ``snapshots(bufferingNewest:)`` does; `enabled:
    /// false` makes one that starts no load (a dependent query waiting for its key).
    public func snapshots<Selected: Sendable & Equatable>(
        select: @escaping @Sendable (Value) -> Selected, enabled: Bool = true,
        bufferingNewest limit: Int = QuerySnapshots<Value>.defaultLimit
    ) -> SelectedSnapshots<Value, Selected> {
        SelectedSnapshots(query: self, select: select, enabled: enabled, limit: limit)
    }

    /// This query's selected value observed from the main actor (see ``LiveSelection``).
    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @MainActor
    public func observed<Selected: Sendable & Equatable>(
        select: @escaping @Sendable (Value) -> Selected, enabled: Bool = true
    ) -> LiveSelection<Value, Selected> {
        LiveSelection(query: self, select: select, enabled: enabled)
    }

    /// Makes an observer that is handed every published snapshot with its value replaced by its
    /// selection (an unchanged selection keeps the value selected before), with its version, and
    /// whether the selected value, the status or the error changed; returns its number.
    func observeSelection<Selected: Sendable & Equatable>(
        select: @escaping @Sendable (Value) -> Selected, enabled: Bool,
        _ deliver: @escaping @Sendable (_ version: UInt64, _ snapshot: QuerySnapshot<Selected>, _ changed: Bool) -> Void
    ) -> UInt64 {
        // Publishes reach one observer one at a time (``DeliveryQueue``), but not always on one
        // thread: the last selection is kept under a lock no one else takes.
        let last = Locked<QuerySnapshot<Selected>?>(nil)
        return observe(enabled: enabled) { published in
            var selected = published.snapshot.value.map(select)
            let changed = last.withLock { last -> Bool in
                defer { last = published.snapshot.replacingValue(with: selected) }
                guard let held = last else { return true }
                if held.value == selected { selected = held.value }
                return held.value != selected || held.status != published.snapshot.status.as(Selected.self)
                    || held.lastError != published.snapshot.lastError
            }
            deliver(published.version, published.snapshot.replacingValue(with: selected), changed)
        }
    }
}

/// The snapshots of a selection of a query's value (``Query/snapshots(select:enabled:bufferingNewest:)``):
/// one each time the selected value changes.
public struct SelectedSnapshots<Value: Sendable & Equatable, Selected: Sendable & Equatable>: AsyncSequence, Sendable {
    public typealias Element = QuerySnapshot<Selected>

    let query: Query<Value>
    let select: @Sendable (Value) -> Selected
    let enabled: Bool
    let limit: Int

    /// One observer's iteration.
    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncStream<QuerySnapshot<Selected>>.AsyncIterator

        /// The next selected snapshot, waiting for the selected value to change; `nil` when the
        /// iteration is over.
        public mutating func next() async -> QuerySnapshot<Selected>? { await base.next(isolation: nil) }

        /// The next selected snapshot, waiting on `actor`.
        public mutating func next(isolation actor: isolated (any Actor)?) async -> QuerySnapshot<Selected>? {
            await base.next(isolation: actor)
        }
    }

    /// Starts an iteration: the query counts a new observer.
    public func makeAsyncIterator() -> AsyncIterator {
        let (stream, continuation) = AsyncStream.makeStream(
            of: QuerySnapshot<Selected>.self, bufferingPolicy: .bufferingNewest(Swift.max(1, limit)))
        let query = self.query
        let id = query.observeSelection(select: select, enabled: enabled) { _, snapshot, changed in
            if changed { continuation.yield(snapshot) }
        }
        continuation.onTermination = { [weak query] _ in query?.removeObserver(id) }
        return AsyncIterator(base: stream.makeAsyncIterator())
    }
}

/// What a screen shows of a query, derived by a `select` (a count, one item, a sorted view), observed
/// from the main actor (``Query/observed(select:enabled:)``).
///
/// Like ``LiveQuery``, each field is observed on its own, and `value` is the selection: it changes
/// only when the **selected value** changes, so a view that reads `value` (a badge showing a count)
/// is not re-rendered when another item of the list changes, a refresh runs or the value ages. The
/// other fields follow the query (a view that reads `phase` sees the refresh). Many selections of
/// one query share its one load.
///
/// ```swift
/// let unread = queries.query(["inbox"], chain: inboxChain).observed(select: { $0.filter(\.isUnread).count })
/// // in the view: Text("\(unread.value ?? 0)")
/// ```
@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
@MainActor
public final class LiveSelection<Value: Sendable & Equatable, Selected: Sendable & Equatable>: Observable, LiveSnapshotFields {
    /// The query observed.
    public let query: Query<Value>
    var storedSnapshot: QuerySnapshot<Selected>
    let registrar = ObservationRegistrar()
    let paths: LiveFieldPaths<LiveSelection>
    private let observer: UInt64
    private var version: UInt64
    private var task: Task<Void, Never>?
    private let catchingUp = CatchUpWaiters()

    /// Whether this observer wants loads (see ``LiveQuery/isEnabled``).
    public var isEnabled: Bool {
        didSet { if isEnabled != oldValue { query.setObserver(observer, enabled: isEnabled) } }
    }

    init(query: Query<Value>, select: @escaping @Sendable (Value) -> Selected, enabled: Bool) {
        self.paths = LiveFieldPaths<LiveSelection>.shared
        self.query = query
        self.isEnabled = enabled
        let (stream, continuation) = AsyncStream.makeStream(
            of: (UInt64, QuerySnapshot<Selected>).self, bufferingPolicy: .bufferingNewest(1))
        // The first frame: what the query shows now, selected, with no hop.
        let latest = query.latest
        storedSnapshot = latest.snapshot.replacingValue(with: latest.snapshot.value.map(select))
        version = latest.version
        observer = query.observeSelection(select: select, enabled: enabled) { version, snapshot, _ in
            continuation.yield((version, snapshot))
        }
        let id = observer
        continuation.onTermination = { [weak query] _ in query?.removeObserver(id) }
        task = Task { @MainActor [weak self] in
            for await (version, snapshot) in stream {
                guard let self else { return }
                guard version > self.version else { continue }
                self.version = version
                // Each field changes only when it differs: an unchanged selection leaves `value` alone.
                self.show(snapshot)
                self.catchingUp.resume(upTo: version)
            }
        }
    }

    isolated deinit {
        task?.cancel()
        catchingUp.cancelAll()
    }

    /// The selection's state, as last delivered. Reading it observes every change (of the
    /// selection, and of the query's other fields).
    public var snapshot: QuerySnapshot<Selected> {
        registrar.access(self, keyPath: paths.snapshot)
        return storedSnapshot
    }
    /// The selected value, if the query has a value (observed on its own: it changes only when the
    /// selection does).
    public var value: Selected? {
        registrar.access(self, keyPath: paths.value)
        return storedSnapshot.value
    }
    /// Where the query's value came from.
    public var provenance: Provenance? {
        registrar.access(self, keyPath: paths.provenance)
        return storedSnapshot.provenance
    }
    /// Whether there is a value, or an error instead.
    public var status: QuerySnapshot<Selected>.Status {
        registrar.access(self, keyPath: paths.status)
        return storedSnapshot.status
    }
    /// Whether a load runs, waits, or nothing happens.
    public var phase: QueryPhase {
        registrar.access(self, keyPath: paths.phase)
        return storedSnapshot.phase
    }
    /// Whether the value is stale.
    public var isStale: Bool {
        registrar.access(self, keyPath: paths.isStale)
        return storedSnapshot.isStale
    }
    /// The error of the last load, until one succeeds.
    public var lastError: QueryError? {
        registrar.access(self, keyPath: paths.lastError)
        return storedSnapshot.lastError
    }

    /// Suspends until the query has settled (``Query/settled()``) and this object shows the
    /// selection of the snapshot it settled with.
    ///
    /// - Throws: `CancellationError` when the waiting task is cancelled.
    public func settled() async throws {
        try await query.settled()
        try await caughtUp()
    }

    /// Suspends until this object has taken every snapshot the query published so far.
    ///
    /// - Throws: `CancellationError` when the waiting task is cancelled.
    package func caughtUp() async throws {
        try await catchingUp.wait(for: query.latest.version, shown: version)
    }
}
