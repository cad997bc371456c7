/// The loads in flight of a ``CoalescingLoader``: the state that makes concurrent loads share one.
///
/// Make it **once** and pass it to `coalesced(in:)` when the chain is built more than once
/// (a computed property, a SwiftUI `body`, a function that returns a loader): every chain built
/// with the same coalescer shares its loads in flight, as every loader guarded by one
/// ``CircuitBreaker`` shares its state. ``Loader/coalesced()->CoalescingLoader<Self,Self.Input>``
/// makes a new coalescer each time it is called, so two chains built by two calls never share a load.
///
/// ```swift
/// final class PostsRepository {
///     private let inFlight = Coalescer<Int, Post>()              // made once
///     var posts: some Loader<Int, Post> { remotePosts.coalesced(in: inFlight) }   // built per call
/// }
/// ```
public final class Coalescer<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    /// The decisions (``CoalescerStateMachine``) and the test kit's registration waiters, under one
    /// lock. Every method below calls the machine under the lock and acts on its answer after.
    @usableFromInline let storage = InlinableLocked(Storage())

    @usableFromInline
    struct Storage: Sendable {
        @usableFromInline var machine = Machine()
        var registrationWaiters = CountWaiters()

        @usableFromInline init() {}

        /// Resumes the test kit's waiters whose count of registrations is reached (not inlinable:
        /// `CountWaiters` is SPI).
        @usableFromInline
        mutating func resumeRegistrationWaiters() {
            registrationWaiters.resumeReached(machine.registrations)
        }
    }

    public init() {}

    /// The number of loads in flight now (one per distinct key).
    public var inFlightCount: Int { storage.withLock { $0.machine.inFlightCount } }

    /// How a waiter is answered: the outcome and whether it joined another caller's load, or `nil`
    /// when it must start over.
    ///
    /// An `UnsafeContinuation`: a checked one allocates a canary per waiter and checks it on resume
    /// (about 4,200 of the 11,300 instructions a waiter of 10,000 cost beyond its own task). Each is resumed exactly once because the
    /// machine hands a waiter out at most once: a registration answered at once is never stored; a
    /// stored waiter leaves the machine in the same step that hands it out (`finish` removes the
    /// entry with its waiters, `cancel` and `markWrite` remove the waiter), all under the lock.
    /// `CoalescerStateMachineTests` check that no waiter is ever answered twice or left behind.
    @usableFromInline typealias Waiting = UnsafeContinuation<(Outcome, Bool)?, Never>
    @usableFromInline typealias Machine = CoalescerStateMachine<Key, Outcome, Waiting, Task<Void, Never>>

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
    func arrive(_ key: Key) -> Machine.Arrival {
        storage.withLock { $0.machine.arrive(key) }
    }

    /// The leader hands over the task running `flight`: the outcome when the load already ended,
    /// otherwise `nil` (the task is escalated to the priority of callers who joined meanwhile).
    @inlinable
    func handOver(_ task: Task<Void, Never>, key: Key, flight: UInt64) -> Outcome? {
        let handover = storage.withLock { storage in
            let handover = storage.machine.handOver(task, key: key, flight: flight)
            storage.resumeRegistrationWaiters()
            return handover
        }
        switch handover {
        case .finished(let outcome):
            return outcome
        case .wait(let priority):
            Self.escalate(task, to: priority)
            return nil
        }
    }

    /// The leader of `flight` waits with `continuation`.
    @inlinable
    func leaderWaits(_ continuation: Waiting, id: Int, key: Key, flight: UInt64) {
        let registration = storage.withLock { $0.machine.leaderWaits(continuation, id: id, key: key, flight: flight) }
        carryOut(registration, joined: false, priority: nil)
    }

    /// A joiner waits with `continuation`, at the caller's `priority`.
    @inlinable
    func join(_ continuation: Waiting, id: Int, key: Key, priority: TaskPriority) {
        let registration = storage.withLock { storage in
            let registration = storage.machine.join(continuation, id: id, key: key, priority: priority)
            storage.resumeRegistrationWaiters()
            return registration
        }
        carryOut(registration, joined: true, priority: priority)
    }

    @inlinable
    func carryOut(_ registration: Machine.Registration, joined: Bool, priority: TaskPriority?) {
        switch registration {
        case .registered(let work): Self.escalate(work, to: priority)
        case .resume(let waiter, let outcome): waiter.resume(returning: (outcome, joined))
        case .cancelled(let waiter): waiter.resume(returning: (.cancelled, joined))
        case .startOver(let waiter): waiter.resume(returning: nil)
        }
    }

    /// Hands `outcome` to every waiter of `flight`.
    @inlinable
    func finish(key: Key, flight: UInt64, with outcome: Outcome) {
        let waiters = storage.withLock { $0.machine.finish(key: key, flight: flight, with: outcome) }
        for (waiter, joined) in waiters { waiter.resume(returning: (outcome, joined)) }
    }

    /// The shared load of `flight` sent a non-idempotent request: it stays its leader's, and the
    /// callers that joined it start over (each sends its own request).
    @inlinable
    func markWrite(key: Key, flight: UInt64) {
        let ejected = storage.withLock { $0.machine.markWrite(key: key, flight: flight) }
        for waiter in ejected { waiter.resume(returning: nil) }
    }

    /// Releases waiter `id` with `CancellationError`; cancels the shared load when it was the last.
    @inlinable
    func cancel(_ id: Int, key: Key) {
        let (released, abandoned) = storage.withLock { $0.machine.cancel(id, key: key) }
        abandoned?.cancel()
        if let (waiter, joined) = released { waiter.resume(returning: (.cancelled, joined)) }
    }

    /// Suspends until `count` callers in all have registered with a load in flight.
    func waitForRegistrations(count: Int) async {
        await withCheckedContinuation { continuation in
            storage.withLock { $0.registrationWaiters.wait(for: count, current: $0.machine.registrations, continuation: continuation) }
        }
    }

    /// Raises `task` to `priority` (a caller of higher priority is waiting for it).
    @inlinable
    static func escalate(_ task: Task<Void, Never>?, to priority: TaskPriority?) {
        guard let task, let priority else { return }
        // Escalation only ever raises a task's priority; a lower one is ignored.
        if #available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *) {
            task.escalatePriority(to: priority)
        }
    }
}
