import Foundation
@_spi(StrataInternals) import Strata
import StrataOutbox

/// The decisions of one live query, without tasks or clocks: what is stale, what a trigger does,
/// when a load starts, pauses, continues or is dropped. ``Query`` feeds it events, under its lock,
/// and runs the actions it returns; the tests drive it directly.
///
/// Invariants (checked after every step by the seeded interleaving tests):
/// - at most one load per query: `startLoad` is never returned while another load runs, unless the
///   same step cancels it;
/// - the value shown is never replaced by an older one (by the time its tier stored it);
/// - `phase` is `fetching` exactly while a load runs, and never while the query is disabled;
/// - an unobserved query with nothing running always has its drop scheduled;
/// - a dropped query holds no value; any event but `dropDue` wakes it (`Action/revive` first).
/// - an invalidation holds until a load started after it answers with a value stored after it
///   (an answer rejected as older, or a stale tier's copy from before it, leaves it standing);
/// - a write is shown from when it is queued until it is refused, or until a load started after
///   its delivery answers with a value stored after it (so the value never drops it before the
///   server's copy has it: a refetch that falls back to a stale tier keeps showing it);
/// - a dropped query is woken only by use: a late answer, retry or timer of a flight it abandoned
///   is ignored.
/// - a disabled observer never starts a load; a load a fetch waits for is never abandoned because
///   the observers left;
/// - a value set locally is shown as set; a restore puts back exactly what the query held before the
///   set, and only while the value shown is still the one set;
/// - an interval tick loads only in the foreground (unless the policy says otherwise), and only a
///   stale value unless the policy asks for every tick.
package struct QueryStateMachine<Value: Sendable & Equatable>: Sendable {
    package typealias Configuration = QueryPolicy

    /// What happened to the query.
    package enum Event: Sendable {
        /// The query was made (an unobserved query is dropped after a while, like one whose
        /// observers left).
        case created
        case observerAdded
        case observerRemoved
        /// An observer that does not want loads (per-observer `enabled: false`, a dependent query
        /// waiting for its key): it sees the snapshots, it never starts a load.
        case disabledObserverAdded
        case disabledObserverRemoved
        /// One observer is enabled (`true`: a disabled one wants loads now) or disabled.
        case observerEnabled(Bool)
        /// Code awaits a value (``Query/fetch()``, ``Query/ensureValue()``): `force` loads whatever
        /// the staleness. The load it starts or joins is not abandoned while it waits.
        case fetchStarted(force: Bool)
        /// A fetch stopped waiting (answered, or its task cancelled: the load goes on).
        case fetchEnded
        /// Load now if stale, unobserved (``Query/prefetch()``).
        case prefetchRequested
        /// A value set by code (``Query/setValue(_:)``): shown at once, stored now. A load running
        /// was asked for before it: abandoned, so its answer cannot undo the value set.
        case valueSet(Served<Value>)
        /// Put back what the query held before a value was set (a failed mutation's rollback), if
        /// the value shown is still that one.
        case restored(QueryRestorePoint<Value>)
        /// A paged query's previous page is asked for (``Query/fetchPreviousPage()``).
        case previousPageRequested
        /// The app went to the background: interval ticks pause (unless the policy says otherwise).
        case background
        case enabled(Bool)
        case connectivity(online: Bool)
        case foreground
        case intervalElapsed
        case invalidated
        case refetchRequested
        /// A paged query's next page is asked for (``Query/fetchNextPage()``).
        case nextPageRequested
        /// A value read without a load (the chain's immediate answer): shown if nothing is.
        case seeded(Served<Value>)
        case loadSucceeded(flight: Int, Served<Value>)
        case loadFailed(flight: Int, QueryError)
        case retryDue(flight: Int)
        case dropDue
        /// The value shown just went stale by age (`freshUntil`): the snapshot says so.
        case staleDue
        /// These writes of the query's scope wait for delivery now (the outbox was read, or the query
        /// came back to life): they replace the pending ones shown; delivered ones stay until a load
        /// started after their delivery answers.
        case writesPending([OutboxEntry])
        /// A write of the query's scope waits for delivery (new, retried, or changed).
        case writeQueued(OutboxEntry)
        /// The server has the write: still shown until a load that started after now answers.
        case writeDelivered(UUID)
        /// The server refused the write for good: no longer shown.
        case writeRefused(UUID)
        /// A newer caller's policy and `enabled` (``QueryClient/query(_:tags:policy:cached:enabled:pendingWrites:chain:)``
        /// for a key that has a query): they apply from now. It does not wake a dropped query.
        case reconfigured(QueryPolicy, enabled: Bool)
    }

    /// What the query must do (not generic: the decisions about flights and timers do not depend on
    /// the value's type, and a type nested in this generic one would cost a metadata lookup at every
    /// use from the unspecialised code that runs it).
    package typealias Action = QueryAction
    typealias ShownWrite = QueryShownWrite
    typealias Delivery = QueryWriteDelivery
    typealias Flight = QueryFlight

    package private(set) var configuration: Configuration
    /// The value shown, boxed: a class reference has the same layout whatever `Value` is, so the
    /// machine's layout is fixed, and the query's unspecialised code reads and copies its fields at
    /// offsets known when it is compiled, without looking the machine's metadata up on each access.
    private var shownBox: ShownValue<Value>?
    private(set) var shown: Served<Value>? {
        get { shownBox?.served }
        set { shownBox = newValue.map(ShownValue.init) }
    }
    /// Whether a value is shown (no look at the generic optional).
    var hasShown: Bool { shownBox != nil }
    /// The value shown, without its provenance (no copy of the generic `Served`).
    var shownValue: Value? { shownBox?.served.value }
    /// When the shown value was stored by its tier (its provenance's `storedAt`, or when it was
    /// served minus its age).
    private(set) var storedAt: Date?
    private(set) var updatedAt: Date?
    private(set) var lastError: QueryError?
    private(set) var failureCount = 0
    private(set) var isInvalidated = false
    /// When the standing invalidation came: only a value stored after it clears it.
    private(set) var invalidatedAt: Date?
    private(set) var observers = 0
    /// Observers that do not want loads (counted in `observers` too).
    private(set) var disabledObservers = 0
    /// Fetches waiting for an answer.
    private(set) var fetchers = 0
    private(set) var isInForeground = true
    /// Counts every change of the value shown: a restore applies only if nothing changed it since
    /// the value it undoes was set.
    private(set) var valueStamp: UInt64 = 0
    /// The stamp the value shown had when it was first shown, if a restore put it back (so the
    /// restore point of the value set before it applies too: rolled back in reverse order, a stack
    /// of values set comes off whole).
    private var restoredStamp: UInt64?
    private(set) var isEnabled: Bool
    private(set) var isOnline: Bool
    private(set) var flight: Flight?
    private(set) var lastFetchReason: FetchReason?
    private(set) var isDropped = false
    private(set) var isDropScheduled = false
    /// The writes shown in the value, oldest first.
    private(set) var writes: [ShownWrite] = []
    private var lastForegroundFetch: Date?
    private var nextFlightID = 1
    /// How many attempts were started (`startLoad` actions), ever: what a delivered write is
    /// measured against.
    private var starts = 0

    package init(configuration: Configuration, enabled: Bool = true, online: Bool = true) {
        self.configuration = configuration
        self.isEnabled = enabled
        self.isOnline = online
    }

    /// Observers that want loads.
    package var activeObservers: Int { observers - disabledObservers }

    /// What a restore puts back: the query as it is now.
    func restorePoint() -> QueryRestorePoint<Value> {
        QueryRestorePoint(
            shown: shownBox, storedAt: storedAt, updatedAt: updatedAt, lastError: lastError, failureCount: failureCount,
            invalidatedAt: isInvalidated ? (invalidatedAt ?? .distantPast) : nil, stamp: valueStamp,
            stampBefore: restoredStamp ?? valueStamp)
    }

    /// Whether `point` may be restored now: the value it was taken for is still the one shown (or
    /// was put back by the restore of a value set after it).
    func canRestore(_ point: QueryRestorePoint<Value>) -> Bool {
        point.stamp == valueStamp || point.stamp == restoredStamp
    }

    /// The value shown changed: a new stamp.
    private mutating func bumpStamp() {
        valueStamp += 1
        restoredStamp = nil
    }

    /// The flight that runs now, if any.
    package var runningFlight: Int? {
        guard let flight, flight.state == .running else { return nil }
        return flight.id
    }

    /// Whether nothing runs or waits on a timer: a load, or a retry's delay (a load paused offline
    /// or a disabled query waits on the world, not on work, and counts as settled).
    package var isSettled: Bool {
        guard let flight else { return true }
        return flight.state == .pausedOffline
    }

    /// Whether the shown value should be refetched by the next trigger.
    package func isStale(now: Date) -> Bool {
        // `storedAt` is set exactly when a value is shown (and, unlike `shown`, is not generic: no
        // metadata lookup in the unspecialised code that asks this on every step).
        guard let storedAt else { return true }
        return isInvalidated || now.timeIntervalSince(storedAt) >= configuration.staleAfter.seconds
    }

    package var phase: QueryPhase {
        if !isEnabled { return .paused(.disabled) }
        guard let flight else { return .idle }
        return switch flight.state {
        case .running: .fetching(flight.reason)
        case .pausedOffline: .paused(.offline)
        case .backingOff: .paused(.backingOff)
        }
    }

    /// The writes to apply to the shown value, oldest first: pending, and delivered ones the value
    /// may not have yet.
    package var shownWrites: [OutboxEntry] { writes.map(\.entry) }

    /// When the shown value goes stale by age, if it is fresh now and observed (an observer is told
    /// when it goes stale: `Event/staleDue`); `nil` otherwise.
    package func freshUntil(now: Date) -> Date? {
        guard observers > 0, !isInvalidated, let storedAt, configuration.staleAfter > .zero else { return nil }
        let due = storedAt.addingTimeInterval(configuration.staleAfter.seconds)
        return due > now ? due : nil
    }

    /// The query as its observers see it at `now`.
    package func snapshot(now: Date) -> QuerySnapshot<Value> {
        // One look at the generic optional, not two.
        var value: Value?
        var provenance: Provenance?
        if let shown {
            value = shown.value
            provenance = shown.provenance
        }
        return QuerySnapshot(
            value: value, provenance: provenance,
            status: storedAt != nil ? .value : (lastError != nil ? .failed : .empty),
            phase: phase, isStale: isStale(now: now), storedAt: storedAt, updatedAt: updatedAt,
            lastError: lastError, failureCount: failureCount, isPlaceholder: false,
            lastFetchReason: lastFetchReason)
    }

    /// Whether `event` wakes a dropped query: any use does; its own timers firing late, late answers
    /// of flights it abandoned (a dropped query runs no flight, so any flight's event is late), the
    /// client-wide signals (the network, the foreground, an interval tick), an invalidation and a
    /// newer caller's options do not: it keeps the network's state, the invalidation and the options
    /// for when it wakes.
    package static func wakes(_ event: Event) -> Bool {
        switch event {
        case .dropDue, .staleDue, .loadSucceeded, .loadFailed, .retryDue, .reconfigured, .connectivity, .foreground,
             .intervalElapsed, .invalidated, .background, .restored, .fetchEnded, .observerEnabled, .disabledObserverRemoved:
            false
        default: true
        }
    }

    /// Applies `event` at `now` and returns what to do, in order.
    package mutating func handle(_ event: Event, now: Date) -> [Action] {
        var actions: [Action] = []
        if isDropped {
            guard Self.wakes(event) else {
                // Asleep, it takes a newer caller's options for when it wakes.
                switch event {
                case .reconfigured(let policy, let enabled):
                    configuration = policy
                    isEnabled = enabled
                case .connectivity(let online):
                    isOnline = online
                case .foreground:
                    isInForeground = true
                case .background:
                    isInForeground = false
                case .invalidated:
                    // Whatever it shows when it wakes (a memory tier's copy from before now) is
                    // stale: the invalidation stands until a copy stored after it answers.
                    isInvalidated = true
                    invalidatedAt = now
                default:
                    break
                }
                return []
            }
            // Used again (an app kept the query and observes it anew): awake, without its value.
            isDropped = false
            actions.append(.revive)
        }
        actions += apply(event, now: now)
        // An unobserved query with nothing running is dropped after a while.
        if !isDropped, observers == 0, fetchers == 0, flight == nil, !isDropScheduled {
            isDropScheduled = true
            actions.append(.scheduleDrop(after: configuration.dropAfter))
        }
        return actions
    }

    private mutating func apply(_ event: Event, now: Date) -> [Action] {
        switch event {
        case .created:
            return []
        case .reconfigured(let policy, let enabled):
            configuration = policy
            // Staleness may have moved with `staleAfter`: the snapshot says so.
            return apply(.enabled(enabled), now: now) + [.publish]
        case .observerAdded:
            observers += 1
            isDropScheduled = false
            var actions: [Action] = [.publish]
            if isStale(now: now) {
                actions += requestLoad(activeObservers == 1 ? .firstObserver : .newObserver, now: now)
            }
            return actions
        case .observerRemoved:
            guard activeObservers > 0 else { return [] }
            observers -= 1
            return abandonIfUnwanted() + [.publish]
        case .disabledObserverAdded:
            observers += 1
            disabledObservers += 1
            isDropScheduled = false
            return [.publish]
        case .disabledObserverRemoved:
            guard disabledObservers > 0 else { return [] }
            observers -= 1
            disabledObservers -= 1
            return [.publish]
        case .observerEnabled(let enabled):
            if enabled {
                guard disabledObservers > 0 else { return [] }
                disabledObservers -= 1
                guard isStale(now: now) else { return [] }
                return requestLoad(activeObservers == 1 ? .firstObserver : .newObserver, now: now)
            }
            guard activeObservers > 0 else { return [] }
            disabledObservers += 1
            return abandonIfUnwanted() + [.publish]
        case .fetchStarted(let force):
            fetchers += 1
            isDropScheduled = false
            guard force || isStale(now: now) else { return [] }
            return requestLoad(.fetch, now: now)
        case .fetchEnded:
            guard fetchers > 0 else { return [] }
            fetchers -= 1
            return []
        case .prefetchRequested:
            guard isStale(now: now) else { return [] }
            return requestLoad(.fetch, now: now)
        case .valueSet(var served):
            // Stored now (or when the caller says it was set), never before the value it replaces.
            let at = max(served.provenance.storedAt ?? now, storedAt ?? .distantPast)
            served.provenance.storedAt = at
            served.provenance.age = .zero
            shown = served
            storedAt = at
            updatedAt = now
            bumpStamp()
            // A load running was asked for before the value was set: its answer must not undo it
            // (a mutation's optimistic value would flicker away). The invalidation standing stays:
            // only the source's answer clears it.
            return abandonFlight() + [.publish]
        case .restored(let point):
            guard canRestore(point) else { return [] }
            shownBox = point.shown
            storedAt = point.storedAt
            updatedAt = point.updatedAt
            lastError = point.lastError
            failureCount = point.failureCount
            // An invalidation that came since stands; one the point held stands again.
            if let held = point.invalidatedAt, !isInvalidated {
                isInvalidated = true
                invalidatedAt = held
            }
            bumpStamp()
            restoredStamp = point.stampBefore
            // The value set abandoned a load someone wanted: if what is back is stale, load again.
            guard flight == nil, activeObservers > 0 || fetchers > 0, isStale(now: now) else { return [.publish] }
            return [.publish] + requestLoad(isInvalidated ? .invalidated : .refetch, now: now)
        case .background:
            isInForeground = false
            return []
        case .enabled(let enabled):
            guard enabled != isEnabled else { return [] }
            isEnabled = enabled
            if !enabled {
                return abandonFlight() + [.publish]
            }
            guard activeObservers > 0 || fetchers > 0, isStale(now: now) else { return [.publish] }
            return [.publish] + requestLoad(.firstObserver, now: now)
        case .connectivity(let online):
            guard online != isOnline else { return [] }
            isOnline = online
            guard online else { return [] }
            if let paused = flight, paused.state == .pausedOffline, paused.reason.isPage,
               configuration.refetchOnReconnect, activeObservers > 0, isStale(now: now) {
                // A stale query refetches on reconnect; the paused next page gives way to it.
                return requestLoad(.reconnect, now: now)
            }
            if var flight, flight.state == .pausedOffline || flight.state == .backingOff {
                // The paused load continues at once: the same flight, the same reason (a retry's
                // delay is cut short: the network it waited for is back).
                var actions: [Action] = []
                if flight.state == .backingOff { actions.append(.cancelRetry(flight: flight.id)) }
                flight.state = .running
                starts += 1
                flight.startedAt = starts
                self.flight = flight
                return actions + [.startLoad(flight: flight.id, reason: flight.reason), .publish]
            }
            guard configuration.refetchOnReconnect, activeObservers > 0, isStale(now: now) else { return [] }
            return requestLoad(.reconnect, now: now)
        case .foreground:
            isInForeground = true
            guard configuration.refetchOnForeground, activeObservers > 0, isStale(now: now) else { return [] }
            if let last = lastForegroundFetch, now.timeIntervalSince(last) < configuration.foregroundThrottle.seconds {
                return []
            }
            lastForegroundFetch = now
            return requestLoad(.foreground, now: now)
        case .intervalElapsed:
            guard activeObservers > 0, isInForeground || configuration.refetchIntervalInBackground,
                  configuration.refetchIntervalWhenFresh || isStale(now: now) else { return [] }
            // A page asked for is not cut short by a tick (a poll shorter than a page's load would
            // never let it finish).
            if let flight, flight.reason.isPage { return [] }
            return requestLoad(.interval, now: now)
        case .invalidated:
            isInvalidated = true
            invalidatedAt = now
            // An observed query refetches; a load that runs (an unobserved prefetch too) restarts,
            // so the answer that clears the invalidation was asked for after it.
            guard activeObservers > 0 || fetchers > 0 || runningFlight != nil else { return [.publish] }
            return requestLoad(.invalidated, now: now)
        case .refetchRequested:
            return requestLoad(.refetch, now: now)
        case .nextPageRequested:
            // Appended to the value shown, by one load at a time: not while another runs or waits.
            guard hasShown, flight == nil else { return [] }
            return requestLoad(.nextPage, now: now)
        case .previousPageRequested:
            guard hasShown, flight == nil else { return [] }
            return requestLoad(.previousPage, now: now)
        case .seeded(let served):
            guard !hasShown else { return [] }
            accept(served, now: now)
            return [.publish]
        case .loadSucceeded(let id, let served):
            guard let flight, flight.id == id, flight.state == .running else { return [] }
            self.flight = nil
            let servedStoredAt = Self.storedAt(of: served, now: now)
            let accepted = accept(served, now: now)
            updatedAt = now
            lastError = nil
            failureCount = 0
            // A next page's answer reloads none of the pages shown (where the writes are), and does
            // not make the pages before it current. An answer rejected as older than the value
            // shown, or stored before the write's delivery or the invalidation (a stale tier's copy
            // a refetch fell back to), cannot hold what they wait for: they stand.
            if !flight.reason.isPage, accepted {
                // The server's copy was asked for after these were delivered, and stored after: it has them.
                writes.removeAll { write in
                    guard let delivery = write.delivered else { return false }
                    return delivery.starts < flight.startedAt && servedStoredAt >= delivery.at
                }
                if let invalidatedAt, servedStoredAt >= invalidatedAt {
                    isInvalidated = false
                    self.invalidatedAt = nil
                }
            }
            return [.publish]
        case .loadFailed(let id, let error):
            guard var flight, flight.id == id, flight.state == .running else { return [] }
            lastError = error
            failureCount += 1
            flight.attempts += 1
            if !isOnline, configuration.networkMode != .always {
                flight.state = .pausedOffline
                self.flight = flight
                return [.publish]
            }
            if let retry = configuration.retry, flight.attempts < retry.maxAttempts, retry.shouldRetry(error.underlying) {
                flight.state = .backingOff
                self.flight = flight
                return [.publish, .scheduleRetry(flight: id, after: retry.delay(beforeRetry: flight.attempts))]
            }
            self.flight = nil
            return [.publish]
        case .retryDue(let id):
            guard var flight, flight.id == id, flight.state == .backingOff else { return [] }
            if !isOnline, configuration.networkMode != .always {
                flight.state = .pausedOffline
                self.flight = flight
                return [.publish]
            }
            flight.state = .running
            starts += 1
            flight.startedAt = starts
            self.flight = flight
            return [.startLoad(flight: id, reason: flight.reason), .publish]
        case .staleDue:
            return [.publish]
        case .dropDue:
            isDropScheduled = false
            guard observers == 0, fetchers == 0, flight == nil else { return [] }
            isDropped = true
            bumpStamp()
            shown = nil
            storedAt = nil
            updatedAt = nil
            lastError = nil
            failureCount = 0
            lastFetchReason = nil
            // An invalidation stands (a copy read when it wakes may be from before it), as a
            // delivered write does. The pending ones come back with the outbox's list when the query is used again; a
            // delivered one is kept, so a stale copy shown then still shows it.
            writes = writes.filter { $0.delivered != nil }
            // Published before it goes: the snapshot kept for observers holds no value either, and
            // an observer that comes later starts from empty, never from the value let go.
            return [.publish, .drop]
        case .writesPending(let entries):
            let delivered = writes.filter { $0.delivered != nil }
            let known = Set(delivered.map(\.entry.id))
            let pending = entries.filter { !known.contains($0.id) }.map { ShownWrite(entry: $0, delivered: nil) }
            return updateWrites((delivered + pending).sorted { $0.entry.sequence < $1.entry.sequence })
        case .writeQueued(let entry):
            var updated = writes.filter { $0.entry.id != entry.id }
            updated.append(ShownWrite(entry: entry, delivered: nil))
            return updateWrites(updated.sorted { $0.entry.sequence < $1.entry.sequence })
        case .writeDelivered(let id):
            guard let index = writes.firstIndex(where: { $0.entry.id == id && $0.delivered == nil }) else { return [] }
            // Any attempt started from now on starts after the delivery.
            writes[index].delivered = Delivery(starts: starts, at: now)
            return []
        case .writeRefused(let id):
            return updateWrites(writes.filter { $0.entry.id != id })
        }
    }

    private mutating func updateWrites(_ updated: [ShownWrite]) -> [Action] {
        guard updated != writes else { return [] }
        writes = updated
        return [.publish]
    }

    /// A load is wanted for `reason`: start one, join the one running (a single flight per
    /// query), or pause until the network returns.
    private mutating func requestLoad(_ reason: FetchReason, now: Date) -> [Action] {
        guard isEnabled else { return [] }
        var actions: [Action] = []
        if let flight {
            // An invalidation restarts a running load, so its answer reflects the invalidation; a
            // next page gives way to any other load (the first page is what a refetch reloads);
            // every other trigger joins the flight there is.
            // A next page waiting (backing off, paused offline) gives way too: joined, the trigger
            // would be lost, as its answer reloads no page the trigger asked for.
            // A retry's delay is cut short by an explicit refetch, a reconnect or an invalidation:
            // whoever asked wants an answer now, not after the backoff.
            let givesWay = flight.reason.isPage && !reason.isPage
            let cutsBackoff = flight.state == .backingOff && (reason == .refetch || reason == .reconnect || reason == .invalidated)
            let restarts = reason == .invalidated || givesWay || cutsBackoff
            guard restarts, flight.state == .running || givesWay || cutsBackoff else { return actions }
            actions += abandonFlight()
        }
        let id = nextFlightID
        nextFlightID += 1
        lastFetchReason = reason
        // Offline, what needs the network waits; what may not does not: `offlineFirst` runs a load
        // while nothing is shown (the chain's local tiers may answer it), and pauses a refetch of
        // a value shown (only the network can make it newer).
        let pauses = !isOnline && (configuration.networkMode == .online || (configuration.networkMode == .offlineFirst && hasShown))
        if pauses {
            flight = Flight(id: id, reason: reason, state: .pausedOffline, attempts: 0)
            return actions + [.publish]
        }
        starts += 1
        flight = Flight(id: id, reason: reason, state: .running, attempts: 0, startedAt: starts)
        return actions + [.startLoad(flight: id, reason: reason), .publish]
    }

    /// Abandons the flight when no observer wants loads and no fetch waits for one (the last wanting
    /// observer went, or was disabled).
    private mutating func abandonIfUnwanted() -> [Action] {
        guard activeObservers == 0, fetchers == 0 else { return [] }
        return abandonFlight()
    }

    /// Ends the current flight, if any: cancels its load if it runs, its retry timer if it waits
    /// for one.
    private mutating func abandonFlight() -> [Action] {
        guard let flight else { return [] }
        self.flight = nil
        switch flight.state {
        case .running: return [.cancelLoad(flight: flight.id)]
        case .backingOff: return [.cancelRetry(flight: flight.id)]
        case .pausedOffline: return []
        }
    }

    /// When `served` was stored by its tier: its provenance's `storedAt`, or `now` minus its age.
    static func storedAt(of served: Served<Value>, now: Date) -> Date {
        served.provenance.storedAt ?? now.addingTimeInterval(-(served.provenance.age ?? .zero).seconds)
    }

    /// Shows `served` unless the value shown was stored later (an older answer never replaces a
    /// newer one); returns whether it did.
    @discardableResult
    private mutating func accept(_ served: Served<Value>, now: Date) -> Bool {
        let servedStoredAt = Self.storedAt(of: served, now: now)
        if let current = shown, let storedAt {
            if servedStoredAt < storedAt { return false }
            // Structural sharing, as Swift has it: an answer equal to the value shown keeps the
            // value shown (a class inside keeps its identity; an observer sees no change of value).
            if current.value == served.value {
                var kept = served
                kept.value = current.value
                shown = kept
                self.storedAt = servedStoredAt
                bumpStamp()
                return true
            }
        }
        shown = served
        storedAt = servedStoredAt
        bumpStamp()
        return true
    }
}

/// What the query must do.
package enum QueryAction: Sendable, Equatable {
    /// Run the chain; report its answer as `loadSucceeded`/`loadFailed` with this flight.
    case startLoad(flight: Int, reason: FetchReason)
    /// Cancel that flight's task (its answer, if it comes, is ignored).
    case cancelLoad(flight: Int)
    /// Report `retryDue(flight)` after `after`.
    case scheduleRetry(flight: Int, after: Duration)
    /// The retry of that flight is not wanted any more (a refetch or a reconnect cut its
    /// delay short, or the flight was abandoned): cancel its timer.
    case cancelRetry(flight: Int)
    /// Report `dropDue` after `after` (an earlier schedule is superseded).
    case scheduleDrop(after: Duration)
    /// Forget the query: nobody observes it and nothing runs. Its value is released (the
    /// `publish` before it says so).
    case drop
    /// A dropped query is used again: keep it with the live ones.
    case revive
    /// The snapshot changed: send it to the observers.
    case publish
}

/// A write shown in the value.
struct QueryShownWrite: Sendable, Equatable {
    var entry: OutboxEntry
    /// Delivered: shown until a load whose attempt started after the delivery answers (its
    /// start count above this one) with a value stored after the delivery. `nil`: pending.
    var delivered: QueryWriteDelivery?
}

/// When a write was delivered: the attempts started by then, and the time.
struct QueryWriteDelivery: Sendable, Equatable {
    var starts: Int
    var at: Date
}

/// A load that runs or waits to.
struct QueryFlight: Sendable, Equatable {
    enum State: Sendable, Equatable { case running, pausedOffline, backingOff }
    var id: Int
    var reason: FetchReason
    var state: State
    /// Failed attempts of this flight so far.
    var attempts: Int
    /// `QueryStateMachine/starts` when its latest attempt started (a flight that continues
    /// after a pause or a retry's delay starts again).
    var startedAt = 0
}

/// What a query held before a value was set (``Query/setValue(_:)``): ``Query/restore(_:)`` puts it
/// back, if the value shown is still the one set.
public struct QueryRestorePoint<Value: Sendable>: Sendable {
    /// Boxed, as the machine keeps it: the point's layout is fixed whatever `Value` is.
    let shown: ShownValue<Value>?
    let storedAt: Date?
    let updatedAt: Date?
    let lastError: QueryError?
    let failureCount: Int
    let invalidatedAt: Date?
    /// The query's value stamp once the value was set.
    var stamp: UInt64
    /// The stamp of the value the point holds, as it was first shown.
    let stampBefore: UInt64

    /// The value the query showed before the set (before its pending writes), if any.
    public var value: Value? { shown?.served.value }
}

extension FetchReason {
    /// Whether it loads a page beside the ones shown (reloading none of them).
    var isPage: Bool { self == .nextPage || self == .previousPage }
}

/// The value a query shows, in a box of fixed layout (``QueryStateMachine``).
final class ShownValue<Value: Sendable>: Sendable {
    let served: Served<Value>
    init(_ served: Served<Value>) { self.served = served }
}
