/// The decisions of a ``LoadsInFlight``, as a value: no lock, no tasks, no continuations of its own.
///
/// Each event of a coalesced load (a caller arrives, a caller joins, the shared load finishes or
/// turns out to write, a joiner is cancelled) is a `mutating` method that returns what to do: whom to
/// resume. ``LoadsInFlight`` holds one under its lock, calls it there, and resumes after the lock is
/// released. The machine is generic over the waiter so that its tests drive it with plain tokens.
///
/// The shared load runs **in its leader's task** (the first caller's): no task is started for it. So
/// the machine has no work to hand over, cancel or escalate; the leader reports the end of its load
/// with ``finish(key:flight:)`` exactly once, and the callers that joined are the only waiters.
@usableFromInline
struct CoalescedStateMachine<Key: Hashable & Sendable, Waiter: Sendable>: Sendable {
    @usableFromInline init() {}

    /// One load in flight: the callers waiting for it.
    @usableFromInline
    struct Entry: Sendable {
        @usableFromInline var flight: UInt64
        /// Each caller that joined and waits, with its number, in the order they joined (an array: a
        /// join appends, with no hashing; only a cancellation searches it).
        @usableFromInline var waiters: [(id: Int, waiter: Waiter)] = []
        /// The load sent a non-idempotent request: it is its leader's alone, nobody joins it.
        @usableFromInline var isWrite = false

        @usableFromInline
        init(flight: UInt64) {
            self.flight = flight
        }
    }

    /// What a caller who arrives does.
    @usableFromInline
    enum Arrival: Sendable, Equatable {
        /// The load in flight is a write: send this one alone.
        case alone
        /// Wait for the load in flight, as waiter number `waiter`.
        case join(waiter: Int)
        /// Run the load, registered as `flight`, and report its end with ``finish(key:flight:)``.
        case lead(flight: UInt64)
    }

    /// What becomes of a joiner that asks to wait.
    @usableFromInline
    enum Registration: Sendable {
        /// Registered: it is resumed when the load ends (or when it is cancelled).
        case registered
        /// Resume it now with cancellation (it was cancelled before it got here).
        case cancelled(Waiter)
        /// Resume it now telling it to start over (the load ended, or turned out to write).
        case startOver(Waiter)
    }

    @usableFromInline var entries: [Key: Entry] = [:]
    @usableFromInline var nextWaiter = 0
    @usableFromInline var nextFlight: UInt64 = 0
    /// How many callers have led or registered with a load, ever (for `waitForWaiters(count:timeout:)`).
    @usableFromInline var registrations = 0

    /// The number of loads in flight (one per key).
    @usableFromInline var inFlightCount: Int { entries.count }

    /// A caller arrives for `key`.
    @inlinable
    mutating func arrive(_ key: Key) -> Arrival {
        if let entry = entries[key] {
            if entry.isWrite { return .alone }
            let waiter = nextWaiter
            nextWaiter += 1
            return .join(waiter: waiter)
        }
        let flight = nextFlight
        nextFlight += 1
        registrations += 1
        entries[key] = Entry(flight: flight)
        return .lead(flight: flight)
    }

    /// A caller that arrived as joiner `id` waits as `waiter`; `isCancelled` is its task's
    /// cancellation, read under the same lock as this call.
    ///
    /// No bookkeeping is needed for a cancellation that lands between arriving and joining: the
    /// runtime marks a task cancelled *before* it runs its cancellation handler. So either this call
    /// sees `isCancelled` and answers at once, or it registers the waiter first and the handler's
    /// ``cancel(_:key:)``, which comes after, finds it.
    @inlinable
    mutating func join(_ waiter: Waiter, id: Int, key: Key, isCancelled: Bool) -> Registration {
        if isCancelled { return .cancelled(waiter) }
        guard let index = entries.index(forKey: key), !entries.values[index].isWrite else { return .startOver(waiter) }
        registrations += 1
        // Mutated in place through its index: a copy of the entry held across the change would copy
        // the whole waiter list (quadratic in the number of waiters).
        entries.values[index].waiters.append((id, waiter))
        return .registered
    }

    /// The leader's load of `flight` ended: the callers waiting for it, to answer. A flight that is not
    /// the one in the table (already finished) has nobody left.
    @inlinable
    mutating func finish(key: Key, flight: UInt64) -> [(id: Int, waiter: Waiter)]? {
        guard let index = entries.index(forKey: key), entries.values[index].flight == flight else { return nil }
        let entry = entries.remove(at: index).value
        return entry.waiters.isEmpty ? nil : entry.waiters
    }

    /// `flight` sent a non-idempotent request: it stays its leader's; the callers that joined it are
    /// returned, to start over and send their own.
    @inlinable
    mutating func markWrite(key: Key, flight: UInt64) -> [Waiter] {
        guard let index = entries.index(forKey: key), entries.values[index].flight == flight,
              !entries.values[index].isWrite else { return [] }
        entries.values[index].isWrite = true
        let ejected = entries.values[index].waiters.map(\.waiter)
        entries.values[index].waiters = []
        return ejected
    }

    /// The joiner `id` waiting for `key` was cancelled: its waiter, to answer with cancellation, if it
    /// is waiting (one not registered yet sees its cancellation when it joins; one already answered
    /// needs nothing). The load goes on: it belongs to its leader's task.
    @inlinable
    mutating func cancel(_ id: Int, key: Key) -> Waiter? {
        guard let index = entries.index(forKey: key),
              let position = entries.values[index].waiters.lastIndex(where: { $0.id == id }) else { return nil }
        return entries.values[index].waiters.remove(at: position).waiter
    }
}
