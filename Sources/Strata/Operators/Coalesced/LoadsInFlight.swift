/// The loads in flight of a ``CoalescedLoader``: the state that makes concurrent loads share one.
///
/// Make it **once** and pass it to `coalesced(in:)` when the chain is built more than once
/// (a computed property, a SwiftUI `body`, a function that returns a loader): every chain built
/// with the same coalescer shares its loads in flight, as every loader guarded by one
/// ``CircuitBreaker`` shares its state. `coalesced()` without one makes a new coalescer each time it
/// is called, so two chains built by two calls never share a load.
///
/// A coalescer is typed by the value it shares, not by the key: the key is whatever the chain's
/// input (or its `by:` closure) gives, and a single resource (a `Void` input) needs none.
///
/// ```swift
/// final class PostsRepository {
///     private let inFlight = LoadsInFlight<Post>()                   // made once
///     var posts: some Loader<Int, Post> { remotePosts.coalesced(in: inFlight) }   // built per call
/// }
/// ```
public final class LoadsInFlight<Value: Sendable>: Sendable {
    /// The decisions (``CoalescedStateMachine``, one per key type) and the test kit's registration
    /// waiters, under one lock. Every method below calls a machine under the lock and acts on its
    /// answer after.
    @usableFromInline let storage = InlinableLocked(Storage())

    /// The flights of one key type. A class, so a machine found in ``Storage`` is changed in place.
    ///
    /// `@unchecked Sendable`: its mutable state (the machine) is reached only through ``Storage``,
    /// which lives in `storage` (an ``InlinableLocked``); every read and write of a table happens
    /// inside that lock's `withLock`, and no method hands a table out of it.
    @usableFromInline
    final class Table<Key: Hashable & Sendable>: AnyTable, @unchecked Sendable {
        // @unchecked: `machine` is mutable. Tables are held only by `Storage`, which exists only
        // inside the coalescer's `storage` and is read and changed only inside its `withLock`
        // (`table(for:)`, and `inFlightCount`, `registrations`, `waitingCount` through `tables`);
        // nothing copies a `Storage` or a `Table` out of a `withLock` body, so no two threads touch
        // a machine at once.
        @usableFromInline var machine = CoalescedStateMachine<Key, Waiting>()

        @usableFromInline override init() {}

        override var inFlightCount: Int { machine.inFlightCount }
        override var registrations: Int { machine.registrations }
        override var waitingCount: Int { machine.entries.values.reduce(0) { $0 + $1.waiters.count } }
    }

    /// A ``Table`` of some key type, as ``Storage`` keeps it.
    ///
    /// `@unchecked Sendable`: as ``Table``, only ever touched inside `storage`'s lock.
    @usableFromInline
    class AnyTable: @unchecked Sendable {
        // @unchecked: the compiler checks `Sendable` only for final classes. `AnyTable` declares no
        // stored property, so it has no state to share; it is internal, so its only subclass is
        // `Table`, whose proof is above. A checked design (tables as structs in existentials) would
        // pay a dynamic cast and a copy of the machine on every load.
        @usableFromInline init() {}
        var inFlightCount: Int { 0 }
        var registrations: Int { 0 }
        var waitingCount: Int { 0 }
    }

    @usableFromInline
    struct Storage: Sendable {
        /// The table of the key type this coalescer met first (almost always its only one): found by
        /// one comparison, without hashing.
        @usableFromInline var first: (type: ObjectIdentifier, table: AnyTable)?
        /// Tables of any other key type (a coalescer shared by chains keyed differently).
        @usableFromInline var others: [ObjectIdentifier: AnyTable] = [:]
        var registrationWaiters = ConditionWaiters<Int>()

        @usableFromInline init() {}

        /// The flights keyed by `Key`, made on first use.
        @inlinable
        mutating func table<Key: Hashable & Sendable>(for _: Key.Type) -> Table<Key> {
            let type = ObjectIdentifier(Key.self)
            if let first, first.type == type { return unsafeDowncast(first.table, to: Table<Key>.self) }
            return otherTable(for: Key.self)
        }

        @usableFromInline
        mutating func otherTable<Key: Hashable & Sendable>(for _: Key.Type) -> Table<Key> {
            let type = ObjectIdentifier(Key.self)
            if let table = others[type] { return unsafeDowncast(table, to: Table<Key>.self) }
            let table = Table<Key>()
            if first == nil { first = (type, table) } else { others[type] = table }
            return table
        }

        var tables: [AnyTable] { (first.map { [$0.table] } ?? []) + Array(others.values) }
        var inFlightCount: Int { tables.reduce(0) { $0 + $1.inFlightCount } }
        var registrations: Int { tables.reduce(0) { $0 + $1.registrations } }
        var waitingCount: Int { tables.reduce(0) { $0 + $1.waitingCount } }

        /// Whether the test kit waits for registrations (checked inline, so a load nobody waits for
        /// never calls out of line).
        @usableFromInline var hasRegistrationWaiters = false

        /// Resumes the test kit's waiters whose count of registrations is reached (not inlinable:
        /// `ConditionWaiters` is SPI).
        @usableFromInline
        mutating func resumeRegistrationWaiters() {
            registrationWaiters.resumeSatisfied(by: registrations)
            hasRegistrationWaiters = !registrationWaiters.isEmpty
        }
    }

    public init() {}

    /// The number of loads in flight now (one per distinct key).
    public var inFlightCount: Int { storage.withLock { $0.inFlightCount } }

    /// How a joiner is answered: the shared load's outcome, or `nil` when it must start over (the load
    /// turned out to write, or its leader was cancelled before it could succeed).
    ///
    /// An `UnsafeContinuation`: a checked one allocates a canary per waiter and checks it on resume, a
    /// large share of a waiter's cost (docs/BENCHMARKS.md has the instruction counts). Each is
    /// resumed exactly once because the machine hands a waiter out at most once: a registration
    /// answered at once is never stored; a stored waiter leaves the machine in the same step that hands
    /// it out (`finish` removes the entry with its waiters, `cancel` and `markWrite` remove the
    /// waiter), all under the lock. `CoalescerStateMachineTests` check that no waiter is ever answered
    /// twice or left behind.
    @usableFromInline typealias Waiting = UnsafeContinuation<Outcome?, Never>

    @usableFromInline
    struct Outcome: Sendable {
        @usableFromInline var result: Result<Value, any Error>
        @usableFromInline var events: [LoadEvent]

        @usableFromInline
        init(result: Result<Value, any Error>, events: [LoadEvent]) {
            self.result = result
            self.events = events
        }

        @usableFromInline static var cancelled: Outcome { Outcome(result: .failure(CancellationError()), events: []) }
    }

    /// A caller arrives for `key`: it leads a new load, joins the one in flight, or goes alone.
    @inlinable
    func arrive<Key: Hashable & Sendable>(_ key: Key) -> CoalescedStateMachine<Key, Waiting>.Arrival {
        storage.withLock { storage in
            let arrival = storage.table(for: Key.self).machine.arrive(key)
            if case .lead = arrival, storage.hasRegistrationWaiters { storage.resumeRegistrationWaiters() }
            return arrival
        }
    }

    /// Joiner `id` waits with `continuation`.
    @inlinable
    func join<Key: Hashable & Sendable>(_ continuation: Waiting, id: Int, key: Key) {
        let registration = storage.withLock { storage in
            let registration = storage.table(for: Key.self).machine.join(continuation, id: id, key: key, isCancelled: Task.isCancelled)
            if storage.hasRegistrationWaiters { storage.resumeRegistrationWaiters() }
            return registration
        }
        switch registration {
        case .registered: break
        case .cancelled(let waiter): waiter.resume(returning: .cancelled)
        case .startOver(let waiter): waiter.resume(returning: nil)
        }
    }

    /// The leader's load of `flight` ended: hands `outcome()` to every caller that joined it, or tells
    /// them to start over when `outcome()` is `nil`. `outcome` runs only when someone joined.
    @inlinable
    func finish<Key: Hashable & Sendable>(key: Key, flight: UInt64, with outcome: () -> Outcome?) {
        guard let waiters = storage.withLock({ $0.table(for: Key.self).machine.finish(key: key, flight: flight) }) else { return }
        let answer = outcome()
        for (_, waiter) in waiters { waiter.resume(returning: answer) }
    }

    /// The shared load of `flight` sent a non-idempotent request: it stays its leader's, and the
    /// callers that joined it start over (each sends its own request).
    @inlinable
    func markWrite<Key: Hashable & Sendable>(key: Key, flight: UInt64) {
        let ejected = storage.withLock { $0.table(for: Key.self).machine.markWrite(key: key, flight: flight) }
        for waiter in ejected { waiter.resume(returning: nil) }
    }

    /// Releases joiner `id` with `CancellationError`; the load goes on in its leader's task.
    @inlinable
    func cancel<Key: Hashable & Sendable>(_ id: Int, key: Key) {
        storage.withLock { $0.table(for: Key.self).machine.cancel(id, key: key) }?.resume(returning: .cancelled)
    }

    /// Suspends until `count` callers in all have registered with a load in flight; throws
    /// `CancellationError` as soon as the task is cancelled, ``WaitTimeoutError`` when `timeout` (real
    /// time) passes first.
    func waitForRegistrations(count: Int, timeout: Duration?) async throws {
        try await withWaitTimeout(timeout) { [storage] in
            let id = storage.withLock { $0.registrationWaiters.makeID() }
            try await waitCancellably { continuation in
                storage.withLock { storage in
                    storage.registrationWaiters.wait(
                        id, until: { $0 >= count }, current: storage.registrations, continuation: continuation)
                    storage.hasRegistrationWaiters = !storage.registrationWaiters.isEmpty
                }
            } withdraw: {
                storage.withLock { storage in
                    storage.registrationWaiters.withdraw(id, throwing: CancellationError())
                    storage.hasRegistrationWaiters = !storage.registrationWaiters.isEmpty
                }
            }
        } timedOut: { timeout in
            let (registrations, inFlight, waiting) = storage.withLock { storage in
                (storage.registrations, storage.inFlightCount, storage.waitingCount)
            }
            if registrations >= count { return nil }
            return WaitTimeoutError(
                awaited: "\(count) caller\(count == 1 ? "" : "s") to register with a coalesced load",
                observed: "\(registrations) (\(inFlight) load(s) in flight, \(waiting) caller(s) waiting for them)",
                timeout: timeout)
        }
    }
}

/// The former name of ``LoadsInFlight``.
@available(*, deprecated, renamed: "LoadsInFlight")
public typealias Coalescer<Value: Sendable> = LoadsInFlight<Value>
