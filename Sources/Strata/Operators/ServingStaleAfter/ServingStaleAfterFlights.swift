/// What a ``ServingStaleAfterLoader`` decides about its loads: one load per key, the callers that
/// wait for it, and which of them get their stale copy when the soft timeout passes.
///
/// Pure: no tasks, no clock, no store. Tests drive it alone through seeded random interleavings.
/// `strata proxy` runs its flights (misses, revalidations, refreshes ahead) on it too, so the
/// package has one implementation of a flight.
@_spi(StrataInternals)
public struct ServingStaleAfterFlights<Key: Hashable & Sendable>: Sendable {
    public typealias FlightID = UInt64
    public typealias WaiterID = UInt64

    public struct Flight: Sendable {
        public var id: FlightID
        /// The soft timeout passed: callers with a copy are answered with it at once.
        public var softTimedOut = false
        /// The callers waiting for the load, and whether each has a stale copy to fall back on.
        public var waiters: [WaiterID: Bool] = [:]
    }

    public private(set) var flights: [Key: Flight] = [:]
    private var lastID: UInt64 = 0

    public init() {}

    public enum Arrival: Equatable, Sendable {
        /// No load runs for the key: start flight `id` (and its soft timeout); the caller waits.
        case start(FlightID)
        /// A load runs: the caller waits for it.
        case join(FlightID)
        /// A load runs and its soft timeout has passed: answer the caller's copy now.
        case answerCopy
    }

    /// A caller `waiter` arrives for `key`, with a stale copy or not.
    public mutating func arrived(_ key: Key, waiter: WaiterID, hasCopy: Bool) -> Arrival {
        if var flight = flights[key] {
            if flight.softTimedOut, hasCopy { return .answerCopy }
            flight.waiters[waiter] = hasCopy
            flights[key] = flight
            return .join(flight.id)
        }
        lastID += 1
        flights[key] = Flight(id: lastID, waiters: [waiter: hasCopy])
        return .start(lastID)
    }

    /// A new waiter number.
    public mutating func nextWaiter() -> WaiterID {
        lastID += 1
        return lastID
    }

    /// Flight `id`'s soft timeout passed: the waiters with a copy to answer with it (they stop waiting).
    public mutating func softTimeoutPassed(_ key: Key, flight id: FlightID) -> [WaiterID] {
        guard var flight = flights[key], flight.id == id else { return [] }
        flight.softTimedOut = true
        let early = flight.waiters.filter(\.value).map(\.key).sorted()
        for waiter in early { flight.waiters[waiter] = nil }
        flights[key] = flight
        return early
    }

    /// Flight `id` ended (answered, failed or passed its hard timeout): the waiters to answer with
    /// its outcome. The key has no flight afterwards.
    public mutating func ended(_ key: Key, flight id: FlightID) -> [WaiterID] {
        guard let flight = flights[key], flight.id == id else { return [] }
        flights[key] = nil
        return flight.waiters.keys.sorted()
    }

    /// Waiter `waiter` of flight `id` was cancelled; `true` when it was still waiting (it must be
    /// answered with `CancellationError` by the caller).
    public mutating func withdrawn(_ key: Key, flight id: FlightID, waiter: WaiterID) -> Bool {
        guard var flight = flights[key], flight.id == id, flight.waiters[waiter] != nil else { return false }
        flight.waiters[waiter] = nil
        flights[key] = flight
        return true
    }
}
