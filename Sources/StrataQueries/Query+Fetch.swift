import Foundation
@_spi(StrataInternals) import Strata

/// Why a fetch of a live query has no value to give (``Query/fetch()``, ``Query/ensureValue()``).
public enum QueryFetchError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The query is disabled (``Query/setEnabled(_:)``): it never loads, and shows no value.
    case disabled(QueryKey)
    /// The query's load ended without a value (abandoned: the query was disabled while it ran and
    /// nothing was shown).
    case noValue(QueryKey)

    public var description: String {
        switch self {
        case .disabled(let key): "live query \(key): disabled, so it does not load"
        case .noValue(let key): "live query \(key): the load ended without a value"
        }
    }
}

extension Query {
    /// Loads now, even if the value is fresh, and returns the value the query shows once the load
    /// has answered (with its pending writes): for a pull-to-refresh that must await, or server code.
    /// Joins a load that runs (one load per query). The load is not abandoned while it waits, even if
    /// every observer leaves; cancelling the waiting task stops the wait, not the load. A value set
    /// by code meanwhile (``setValue(_:)``) ends the wait with that value.
    ///
    /// - Throws: the chain's error (as ``QueryError``) when the load fails (after the query's own
    ///   retries), ``QueryFetchError`` when the query is disabled, `CancellationError` when the
    ///   waiting task is cancelled.
    @discardableResult
    public func fetch() async throws -> Value {
        try await awaitValue(force: true)
    }

    /// The value shown when it is fresh (or the cached copy a memory tier answers at once, when fresh);
    /// otherwise loads and returns the answer: for a navigation that must not show an empty screen,
    /// and for server code that wants "the value, fresh enough".
    ///
    /// A disabled query returns what it shows, or throws ``QueryFetchError/disabled(_:)`` when it
    /// shows nothing.
    ///
    /// - Throws: as ``fetch()``.
    public func ensureValue() async throws -> Value {
        try await awaitValue(force: false)
    }

    /// Starts a load now if the value is stale (or nothing is shown), without waiting for it and
    /// without observing: the screen the user is about to open finds its value loaded. The query
    /// stays in memory for its ``QueryPolicy/dropAfter`` after the load, like any unobserved query.
    public func prefetch() {
        seedFromCache()
        send(.prefetchRequested)
    }

    private func awaitValue(force: Bool) async throws -> Value {
        try Task.checkCancellation()
        seedFromCache()
        var started = false
        var enabled = true
        var wanted = force
        let now = environment.now()
        send({ state in
            wanted = force || state.machine.isStale(now: now)
            return .fetchStarted(force: force)
        }, then: { state in
            // A fresh value needs no load: a flight there is (a page paused offline, a retry's
            // delay) is not this fetch's to wait for.
            started = wanted && state.machine.flight != nil
            enabled = state.machine.isEnabled
        })
        defer { send(.fetchEnded) }
        if started {
            // A load paused offline waits for the network, as an observer's does.
            try await state.wait(in: \.fetchWaiters, current: { $0.machine.flight == nil }, until: { $0 })
        }
        let (value, error) = state.withLock { state -> (Value?, QueryError?) in
            let failed = started && state.machine.failureCount > 0 ? state.machine.lastError : nil
            return (state.published.snapshot.value, failed)
        }
        if let error { throw error }
        if !enabled, force || value == nil { throw QueryFetchError.disabled(key) }
        guard let value else {
            if let error = state.withLock({ $0.machine.lastError }) { throw error }
            throw QueryFetchError.noValue(key)
        }
        return value
    }
}

extension Query {
    /// The value the query shows (with its pending writes), if any.
    public var value: Value? { current.value }

    /// Sets the query's value from code: a detail screen seeding a list's item, a socket pushing a
    /// change, a mutation's optimistic value. `update` gets the value held (before pending writes;
    /// `nil` when none) and returns the new one, or `nil` to leave the query as it is.
    ///
    /// The value is shown at once, to every observer, with a provenance that says it was set here
    /// (`Provenance.isSetLocally`) and stored now: it is fresh for the policy's `staleAfter`, like
    /// a value just loaded. A load running was asked for before the value was set, so it is
    /// abandoned (its answer cannot undo the value). An invalidation that stands keeps standing:
    /// only the source's answer clears it, so the next trigger refetches. The value lives in the
    /// query's memory: the chain's stores keep their copies.
    ///
    /// `update` may run more than once (if the value changes while it runs, it is called again
    /// with the newer one): make it a pure function of its argument.
    ///
    /// - Returns: what the query held before, for ``restore(_:)`` (a failed mutation's rollback);
    ///   `nil` when `update` returned `nil`.
    @discardableResult
    public func setValue(_ update: (Value?) throws -> Value?) rethrows -> QueryRestorePoint<Value>? {
        while true {
            let (held, stamp) = state.withLock { ($0.machine.shownValue, $0.machine.valueStamp) }
            guard let new = try update(held) else { return nil }
            var point: QueryRestorePoint<Value>?
            send({ state in
                guard state.machine.valueStamp == stamp else { return nil }
                point = state.machine.restorePoint()
                return .valueSet(Served(value: new, provenance: .setLocally, events: []))
            }, then: { state in point?.stamp = state.machine.valueStamp })
            if let point { return point }
        }
    }

    /// Puts back what the query held before the ``setValue(_:)`` that returned `point` — value,
    /// provenance, store time, error — if the value shown is still the one that call set (or was put
    /// back by restoring a value set after it: restored in reverse order, values set one on another
    /// come off whole). A load that answered since, or another value set since and not restored, is
    /// newer: it stays, and `false` says so (a mutation then invalidates the query). When the value
    /// put back is stale and observers or a fetch want one, it is loaded again (the value set had
    /// abandoned that load).
    ///
    /// - Returns: whether the query was put back.
    @discardableResult
    public func restore(_ point: QueryRestorePoint<Value>) -> Bool {
        var restored = false
        send({ state in
            guard state.machine.canRestore(point) else { return nil }
            restored = true
            return .restored(point)
        })
        return restored
    }

    /// Loads the page before the first one and puts it in front (a feed's "load newer"). Does
    /// nothing when the query is not paged, has no value yet, has no page before its first, or a
    /// load runs (call again when it has answered).
    public func fetchPreviousPage() {
        guard let paging, let value = current.value, paging.hasPrevious(value) else { return }
        send(.previousPageRequested)
    }
}

extension Provenance {
    /// The provenance of a value set by code (``Query/setValue(_:)``), before the query stamps it.
    static var setLocally: Provenance { Provenance(origin: .custom(setLocallyOrigin), tier: "set locally") }

    /// Whether the value was set by code (``Query/setValue(_:)``), not loaded.
    public var isSetLocally: Bool { origin == .custom(setLocallyOrigin) }
}

private let setLocallyOrigin = "set locally"
