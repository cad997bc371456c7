/// The decisions of a ``Coalescer``, as a value: no lock, no tasks, no continuations of its own.
///
/// Each event of a coalesced load (a caller arrives, the leader hands over its task or starts to wait,
/// a caller joins, the shared load finishes or turns out to write, a caller is cancelled) is a
/// `mutating` method that returns what to do: whom to resume with what, which task to cancel or
/// escalate. ``Coalescer`` holds one under its lock, calls it there, and carries out the action after
/// the lock is released. The machine is generic over the waiter and the work so that its tests drive
/// it with plain tokens, without tasks.
@usableFromInline
struct CoalescerStateMachine<Key: Hashable & Sendable, Outcome: Sendable, Waiter: Sendable, Work: Sendable>: Sendable {
    @usableFromInline init() {}

    /// One load in flight.
    @usableFromInline
    struct Entry: Sendable {
        @usableFromInline var flight: UInt64
        /// The shared load, once its leader has handed it over (`nil` while it runs inline).
        @usableFromInline var work: Work?
        /// The leader, until it waits (a load that finishes before then keeps its outcome in
        /// `finishedEarly` for the leader to take).
        @usableFromInline var pendingLeader: Int?
        /// Each waiter, and whether it joined a load another caller started.
        @usableFromInline var waiters: [Int: (waiter: Waiter, joined: Bool)] = [:]
        /// The load sent a non-idempotent request: it is its leader's alone, nobody joins it.
        @usableFromInline var isWrite = false
        /// The highest priority of a caller that joined before the work was handed over.
        @usableFromInline var wantedPriority: TaskPriority?

        @usableFromInline var isAbandoned: Bool { pendingLeader == nil && waiters.isEmpty }

        @usableFromInline
        init(flight: UInt64, pendingLeader: Int?) {
            self.flight = flight
            self.pendingLeader = pendingLeader
        }
    }

    /// What a caller who arrives does.
    @usableFromInline
    enum Arrival: Sendable, Equatable {
        /// The load in flight is a write: send this one alone.
        case alone
        /// Wait for the load in flight, as `waiter`.
        case join(waiter: Int)
        /// Start the load, registered as `flight`, as `waiter`.
        case lead(waiter: Int, flight: UInt64)
    }

    /// What the leader does once its work exists.
    @usableFromInline
    enum Handover: Sendable {
        /// The load already finished: take its outcome, wait for nothing.
        case finished(Outcome)
        /// Wait for it, escalating the work to this priority first (callers who joined early).
        case wait(escalateTo: TaskPriority?)
    }

    /// What becomes of a waiter that asks to wait.
    @usableFromInline
    enum Registration: Sendable {
        /// Registered: it is resumed later. Escalate `work` (when known) to the caller's priority.
        case registered(escalate: Work?)
        /// Resume it now with this outcome (the load finished before it could wait).
        case resume(Waiter, Outcome)
        /// Resume it now with cancellation (it was cancelled before it got here).
        case cancelled(Waiter)
        /// Resume it now telling it to start over (the load ended, or turned out to write).
        case startOver(Waiter)
    }

    @usableFromInline var entries: [Key: Entry] = [:]
    @usableFromInline var nextWaiter = 0
    @usableFromInline var nextFlight: UInt64 = 0
    /// Joiners between taking a number and registering; a cancellation in that window removes the
    /// number, so registration answers the waiter with cancellation at once.
    @usableFromInline var unregistered: Set<Int> = []
    /// Outcomes of loads that ended before their leader waited, by flight; empty between loads.
    @usableFromInline var finishedEarly: [UInt64: Outcome] = [:]
    /// How many callers have registered with a load, ever (for `waitForWaiters(count:)`).
    @usableFromInline var registrations = 0

    /// The number of loads in flight (one per key).
    @usableFromInline var inFlightCount: Int { entries.count }

    /// A caller arrives for `key`.
    @inlinable
    mutating func arrive(_ key: Key) -> Arrival {
        let waiter = nextWaiter
        nextWaiter += 1
        if let entry = entries[key] {
            if entry.isWrite { return .alone }
            unregistered.insert(waiter)
            return .join(waiter: waiter)
        }
        let flight = nextFlight
        nextFlight += 1
        entries[key] = Entry(flight: flight, pendingLeader: waiter)
        return .lead(waiter: waiter, flight: flight)
    }

    /// The leader of `flight` created its `work` (which may already have run to its end).
    @inlinable
    mutating func handOver(_ work: Work, key: Key, flight: UInt64) -> Handover {
        registrations += 1
        if let outcome = finishedEarly.removeValue(forKey: flight) { return .finished(outcome) }
        // Mutated in place through its index: a copy of the entry held across the change would copy
        // the whole waiter table (quadratic in the number of waiters).
        guard let index = entries.index(forKey: key), entries.values[index].flight == flight else {
            return .wait(escalateTo: nil)  // cancelled meanwhile: waiting will say so
        }
        entries.values[index].work = work
        return .wait(escalateTo: entries.values[index].wantedPriority)
    }

    /// The leader of `flight` waits as `waiter`.
    @inlinable
    mutating func leaderWaits(_ waiter: Waiter, id: Int, key: Key, flight: UInt64) -> Registration {
        if let outcome = finishedEarly.removeValue(forKey: flight) { return .resume(waiter, outcome) }
        guard let index = entries.index(forKey: key), entries.values[index].flight == flight,
              entries.values[index].pendingLeader == id else {
            // Cancelled before it could wait: the cancellation took it off the flight.
            return .cancelled(waiter)
        }
        entries.values[index].pendingLeader = nil
        entries.values[index].waiters[id] = (waiter, false)
        return .registered(escalate: nil)
    }

    /// A caller that arrived as a joiner waits as `waiter`, at `priority`.
    @inlinable
    mutating func join(_ waiter: Waiter, id: Int, key: Key, priority: TaskPriority) -> Registration {
        if unregistered.remove(id) == nil { return .cancelled(waiter) }  // cancelled before it got here
        guard let index = entries.index(forKey: key), !entries.values[index].isWrite else { return .startOver(waiter) }
        registrations += 1
        entries.values[index].waiters[id] = (waiter, true)
        let work = entries.values[index].work
        if work == nil, priority > (entries.values[index].wantedPriority ?? .background) {
            entries.values[index].wantedPriority = priority
        }
        return .registered(escalate: work)
    }

    /// `flight` finished with `outcome`: every waiter is answered (and the leader, if it has not
    /// waited yet, takes the outcome when it does).
    @inlinable
    mutating func finish(key: Key, flight: UInt64, with outcome: Outcome) -> [(waiter: Waiter, joined: Bool)] {
        guard entries[key]?.flight == flight, let entry = entries.removeValue(forKey: key) else { return [] }
        if entry.pendingLeader != nil { finishedEarly[flight] = outcome }
        return Array(entry.waiters.values)
    }

    /// `flight` sent a non-idempotent request: it stays its leader's; the callers that joined it are
    /// returned, to start over and send their own.
    @inlinable
    mutating func markWrite(key: Key, flight: UInt64) -> [Waiter] {
        guard let index = entries.index(forKey: key), entries.values[index].flight == flight,
              !entries.values[index].isWrite else { return [] }
        entries.values[index].isWrite = true
        var ejected: [Waiter] = []
        for (id, waiting) in entries.values[index].waiters where waiting.joined {
            ejected.append(waiting.waiter)
            entries.values[index].waiters[id] = nil
        }
        return ejected
    }

    /// The caller `id` waiting for `key` was cancelled: its waiter to answer with cancellation (if it
    /// was waiting), and the work to cancel when it was the last one waiting.
    @inlinable
    mutating func cancel(_ id: Int, key: Key) -> (released: (waiter: Waiter, joined: Bool)?, abandoned: Work?) {
        guard let index = entries.index(forKey: key) else {
            unregistered.remove(id)
            return (nil, nil)
        }
        var released: (waiter: Waiter, joined: Bool)?
        if entries.values[index].pendingLeader == id {
            // The leader, before it waits: it sees it was taken off when it comes to wait.
            entries.values[index].pendingLeader = nil
        } else if let waiting = entries.values[index].waiters.removeValue(forKey: id) {
            released = waiting
        } else {
            // Not registered yet (registration will see it), or already answered (nothing to do).
            unregistered.remove(id)
            return (nil, nil)
        }
        guard entries.values[index].isAbandoned else { return (released, nil) }
        let abandoned = entries.remove(at: index).value.work
        return (released, abandoned)
    }
}
