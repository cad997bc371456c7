/// Shares one in-flight load among every caller asking for the same input; built by
/// ``Loader/coalesced()->CoalescingLoader<Self,Self.Input>`` or `coalesced(in:)`.
///
/// - N concurrent loads of one input make **one** call to the base; every caller gets the same value
///   or the same error, and the events the shared load recorded (so each caller's
///   ``Loader/loadServed()`` tells the same provenance), after a ``LoadEvent/coalesced(tier:)`` for
///   those who joined.
/// - The loads in flight live in its ``Coalescer``. `coalesced()` makes a new one per call, so a chain
///   **rebuilt for each use** (a computed property, a SwiftUI `body`) never coalesces: make a
///   ``Coalescer`` once and pass it to `coalesced(in:)`.
/// - A write is never shared: once the shared load reports a non-idempotent request (``HTTPLoader``
///   does, through ``LoadAttempt``), nobody joins it and callers that had joined send their own.
/// - A caller that is cancelled stops waiting at once with `CancellationError`; the shared load is
///   cancelled only when its **last** waiter is.
/// - Nothing is remembered after a load ends: the next call starts a new load (put a cache in front
///   to keep values).
/// - The shared load runs in a task of its own, which inherits the first caller's task-local values
///   and runs at the highest priority of its waiters: a caller of higher priority that joins
///   escalates it (SE-0462; Linux and Apple systems of the 26 releases). Where the system has
///   `Task.immediate` that task starts on the first caller's thread and runs there until it first
///   suspends: a load that never suspends (a memory hit) costs no thread hop and no continuation.
public struct CoalescingLoader<Base: Loader, Key: Hashable & Sendable>: Loader {
    public typealias Input = Base.Input
    public typealias Output = Base.Output

    public let base: Base
    let key: @Sendable (Input) -> Key
    /// The loads in flight this loader shares (with every chain built with the same coalescer).
    public let flights: Coalescer<Key, Output>

    init(base: Base, key: @escaping @Sendable (Input) -> Key, flights: Coalescer<Key, Output>) {
        self.base = base
        self.key = key
        self.flights = flights
    }

    /// The number of loads in flight now (one per distinct key).
    public var inFlightCount: Int { flights.inFlightCount }

    /// Suspends until `count` callers in all have registered with a load in flight (tests use it to
    /// complete a held load only after every caller has joined it).
    @_spi(StrataInternals)
    public func waitForWaiters(count: Int) async {
        await withCheckedContinuation { continuation in
            flights.state.withLock { $0.registrationWaiters.wait(for: count, current: $0.registrations, continuation: continuation) }
        }
    }

    public func load(_ input: Input) async throws -> Output {
        try Task.checkCancellation()
        let key = key(input)
        while true {
            let role = flights.state.withLock { state -> Role in
                let waiter = state.nextWaiter
                state.nextWaiter += 1
                if let entry = state.entries[key] {
                    if entry.isWrite { return .alone }
                    state.unregistered.insert(waiter)
                    return .joiner(waiter: waiter)
                }
                let flight = state.nextFlight
                state.nextFlight += 1
                state.entries[key] = Entry(flight: flight, task: nil, pendingLeader: waiter, waiters: [:])
                return .leader(waiter: waiter, flight: flight)
            }
            switch role {
            case .alone:
                return try await base.load(input)
            case .joiner(let waiter):
                let answer = await withTaskCancellationHandler {
                    await withCheckedContinuation { continuation in
                        join(key: key, waiter: waiter, continuation: continuation)
                    }
                } onCancel: {
                    flights.cancel(waiter: waiter, key: key)
                }
                // `nil`: the load ended between taking a number and joining it; start over.
                guard let (outcome, joined) = answer else { continue }
                return try deliver(outcome, joined: joined)
            case .leader(let waiter, let flight):
                return try deliver(await lead(key: key, input: input, waiter: waiter, flight: flight), joined: false)
            }
        }
    }

    /// Hands the shared load's events to this caller's recorder, then its value or error.
    private func deliver(_ outcome: Outcome, joined: Bool) throws -> Output {
        if let recorder = LoadRecorder.current {
            if joined { recorder.deliver(.coalesced(tier: base.chainSummary)) }
            for event in outcome.events { recorder.deliver(event) }
        }
        return try outcome.result.get()
    }

    private enum Role {
        /// The load in flight is a write (it sent a non-idempotent request): send this one alone.
        case alone
        /// Another caller's load is in flight: wait for it.
        case joiner(waiter: Int)
        /// No load is in flight: start one, registered as `flight`.
        case leader(waiter: Int, flight: UInt64)
    }

    /// Starts the shared load for `flight` and waits for it. The load runs in a task of its own (the
    /// last waiter to leave cancels it, not the leader), started *immediately*: it runs on this thread
    /// until it first suspends, so a load that never suspends (a memory hit) is finished when the task
    /// is created, and the leader takes its outcome without a continuation or a thread hop.
    private func lead(key: Key, input: Input, waiter: Int, flight: UInt64) async -> Outcome {
        // The flight's events are always collected (one recorder per flight, not per waiter): any
        // waiter may observe them, whether or not the caller that started the flight does.
        let recorder = LoadRecorder()
        let operation: @Sendable () async -> Void = { [base, flights] in
            let result: Result<Output, any Error>
            // A write (a non-idempotent request) is never shared: when the load reports one, the
            // callers that joined it start over and send their own.
            let attempt = LoadAttempt(onWrite: { flights.markWrite(key: key, flight: flight) })
            do {
                result = .success(try await attempt.run {
                    try await LoadRecorder.$current.withValue(recorder) { try await base.load(input) }
                })
            } catch {
                result = .failure(error)
            }
            flights.finish(key: key, flight: flight, with: Outcome(result: result, events: recorder.events))
        }
        let task: Task<Void, Never>
        if #available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *) {
            task = Task.immediate(operation: operation)
        } else {
            task = Task(operation: operation)
        }
        let (finished, wanted) = flights.state.withLock { state -> (Outcome?, TaskPriority?) in
            state.registrations += 1
            state.registrationWaiters.resumeReached(state.registrations)
            if let outcome = state.finishedEarly.removeValue(forKey: flight) { return (outcome, nil) }
            guard state.entries[key]?.flight == flight else { return (nil, nil) }
            state.entries[key]!.task = task
            return (nil, state.entries[key]!.wantedPriority)
        }
        if let finished { return finished }
        Coalescer<Key, Output>.escalate(task, to: wanted)
        let answer = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let ready = flights.state.withLock { state -> Outcome? in
                    if let outcome = state.finishedEarly.removeValue(forKey: flight) { return outcome }
                    guard state.entries[key]?.flight == flight, state.entries[key]!.pendingLeader == waiter else {
                        // Cancelled before it could wait: the cancellation took it off the flight.
                        return Outcome(result: .failure(CancellationError()), events: [])
                    }
                    state.entries[key]!.pendingLeader = nil
                    state.entries[key]!.waiters[waiter] = (continuation, false)
                    return nil
                }
                if let ready { continuation.resume(returning: (ready, false)) }
            }
        } onCancel: {
            flights.cancel(waiter: waiter, key: key)
        }
        // The leader is answered by `finish` or `cancel`, never told to start over.
        return answer?.0 ?? Outcome(result: .failure(CancellationError()), events: [])
    }

    /// Registers `continuation` with the load in flight for `key`. When that load has ended in the
    /// meantime the continuation is resumed with `nil` (the caller starts over); when the caller was
    /// cancelled before it got here, with `CancellationError`.
    private func join(key: Key, waiter: Int, continuation: Waiting) {
        // The shared load runs at the highest priority of the callers waiting for it (SE-0462), so a
        // background prefetch that started it does not make a user-facing caller wait.
        let priority = Task.currentPriority
        let registration = flights.state.withLock { state -> Registration in
            if state.unregistered.remove(waiter) == nil { return .cancelled }  // cancelled before it got here
            // Mutated in place through its index: a copy of the entry held across the mutation would
            // make every join copy the whole waiter table (quadratic in the number of waiters).
            guard let index = state.entries.index(forKey: key), !state.entries.values[index].isWrite else { return .missed }
            state.registrations += 1
            state.registrationWaiters.resumeReached(state.registrations)
            state.entries.values[index].waiters[waiter] = (continuation, true)
            let task = state.entries.values[index].task
            if task == nil, priority > (state.entries.values[index].wantedPriority ?? .background) {
                state.entries.values[index].wantedPriority = priority
            }
            return .registered(task)
        }
        switch registration {
        case .registered(let task): Coalescer<Key, Output>.escalate(task, to: priority)
        case .cancelled: continuation.resume(returning: (Outcome(result: .failure(CancellationError()), events: []), false))
        case .missed: continuation.resume(returning: nil)
        }
    }

    private enum Registration { case registered(Task<Void, Never>?), cancelled, missed }

    typealias Outcome = Coalescer<Key, Output>.Outcome
    typealias Entry = Coalescer<Key, Output>.Entry
    typealias Waiting = Coalescer<Key, Output>.Waiting
}

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
    let state = Locked(State())

    public init() {}

    /// The number of loads in flight now (one per distinct key).
    public var inFlightCount: Int { state.withLock { $0.entries.count } }

    /// How a waiter is answered: the outcome and whether it joined another caller's load, or `nil`
    /// when it must start over.
    typealias Waiting = CheckedContinuation<(Outcome, Bool)?, Never>

    struct Outcome: Sendable {
        var result: Result<Value, any Error>
        var events: [LoadEvent]
    }

    struct Entry: Sendable {
        var flight: UInt64
        /// The shared load, once its leader has handed it over (`nil` while it runs inline).
        var task: Task<Void, Never>?
        /// The leader, until it waits with a continuation (a load that finishes before then keeps its
        /// outcome in ``State/finishedEarly`` for the leader to take).
        var pendingLeader: Int?
        /// Each waiter's continuation, and whether it joined a load another caller started.
        var waiters: [Int: (Waiting, Bool)]
        /// The load sent a non-idempotent request: it is its leader's alone, nobody joins it.
        var isWrite = false
        /// The highest priority of a caller that joined before the task was handed over.
        var wantedPriority: TaskPriority?

        var isAbandoned: Bool { pendingLeader == nil && waiters.isEmpty }
    }

    struct State: Sendable {
        var entries: [Key: Entry] = [:]
        var nextWaiter = 0
        var nextFlight: UInt64 = 0
        /// Joiners between taking a number and registering; a cancellation in that window removes
        /// the number, so registration resumes the waiter with `CancellationError` at once.
        var unregistered: Set<Int> = []
        /// Outcomes of loads that ended before their leader started waiting, by flight; the leader
        /// takes its own out at once, so this is empty between loads.
        var finishedEarly: [UInt64: Outcome] = [:]
        /// How many callers have registered with a load, ever (for `waitForWaiters(count:)`).
        var registrations = 0
        var registrationWaiters = CountWaiters()
    }

    /// Hands `outcome` to every waiter of `flight`, unless every waiter has already left.
    func finish(key: Key, flight: UInt64, with outcome: Outcome) {
        let waiters = state.withLock { state -> [(Waiting, Bool)] in
            guard let entry = state.entries[key], entry.flight == flight else { return [] }
            state.entries[key] = nil
            if entry.pendingLeader != nil { state.finishedEarly[flight] = outcome }
            return entry.waiters.isEmpty ? [] : Array(entry.waiters.values)
        }
        for (continuation, joined) in waiters { continuation.resume(returning: (outcome, joined)) }
    }

    /// The shared load of `flight` sent a non-idempotent request: it stays its leader's, and the
    /// callers that joined it start over (each sends its own request).
    func markWrite(key: Key, flight: UInt64) {
        let ejected = state.withLock { state -> [Waiting] in
            guard state.entries[key]?.flight == flight, state.entries[key]?.isWrite == false,
                  var entry = state.entries.removeValue(forKey: key) else { return [] }
            entry.isWrite = true
            let joiners = entry.waiters.filter { $0.value.1 }
            for id in joiners.keys { entry.waiters[id] = nil }
            state.entries[key] = entry
            return joiners.values.map(\.0)
        }
        for continuation in ejected { continuation.resume(returning: nil) }
    }

    /// Releases `waiter` with `CancellationError`; cancels the shared load when it was the last.
    /// The lock only decides; the task is cancelled and the waiter resumed after it is released.
    func cancel(waiter: Int, key: Key) {
        let (released, abandoned) = state.withLock { state -> ((Waiting, Bool)?, Task<Void, Never>?) in
            // Taken out while it changes (and put back below) so its waiter table is not copied.
            guard var entry = state.entries.removeValue(forKey: key) else {
                state.unregistered.remove(waiter)
                return (nil, nil)
            }
            var released: (Waiting, Bool)?
            if entry.pendingLeader == waiter {
                // The leader, before it waits: it sees it was taken off when it comes to wait.
                entry.pendingLeader = nil
            } else if let waiting = entry.waiters.removeValue(forKey: waiter) {
                released = waiting
            } else {
                // Not registered yet (registration will see it), or already answered (nothing to do).
                state.unregistered.remove(waiter)
                state.entries[key] = entry
                return (nil, nil)
            }
            if entry.isAbandoned {
                return (released, entry.task)
            }
            state.entries[key] = entry
            return (released, nil)
        }
        abandoned?.cancel()
        guard let (continuation, joined) = released else { return }
        continuation.resume(returning: (Outcome(result: .failure(CancellationError()), events: []), joined))
    }

    /// Raises `task` to `priority` (a caller of higher priority is waiting for it).
    static func escalate(_ task: Task<Void, Never>?, to priority: TaskPriority?) {
        guard let task, let priority else { return }
        // Escalation only ever raises a task's priority; a lower one is ignored.
        if #available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *) {
            task.escalatePriority(to: priority)
        }
    }
}

extension CoalescingLoader: LoaderDescribing {
    public var loaderNode: LoaderNode { LoaderNode(label: "coalesced", children: [base.chainNode]) }
}

extension Loader where Input: Hashable {
    /// Makes concurrent loads of the same input share one call to this loader (single-flight).
    ///
    /// ```swift
    /// let posts = remotePosts.coalesced()   // 50 cells asking for post 7 at once → one request
    /// ```
    ///
    /// The loads in flight belong to the loader this returns: a chain **built again** for each use
    /// (a computed property, a SwiftUI `body`) never shares a load. Make a ``Coalescer`` once and
    /// use `coalesced(in:)` there.
    public func coalesced() -> CoalescingLoader<Self, Input> {
        CoalescingLoader(base: self, key: { $0 }, flights: Coalescer())
    }

    /// Makes concurrent loads of the same input share one call, through `flights`: every chain built
    /// with the same ``Coalescer`` shares its loads in flight, however often it is rebuilt.
    public func coalesced(in flights: Coalescer<Input, Output>) -> CoalescingLoader<Self, Input> {
        CoalescingLoader(base: self, key: { $0 }, flights: flights)
    }
}

extension Loader where Input == Void {
    /// Makes concurrent loads share one call to this loader (single-flight). A chain built again for
    /// each use never shares a load: see `coalesced(in:)`.
    public func coalesced() -> CoalescingLoader<Self, Bool> {
        CoalescingLoader(base: self, key: { _ in true }, flights: Coalescer())
    }

    /// Makes concurrent loads share one call, through `flights` (made once, shared by every chain
    /// built with it; its key is always `true`).
    public func coalesced(in flights: Coalescer<Bool, Output>) -> CoalescingLoader<Self, Bool> {
        CoalescingLoader(base: self, key: { _ in true }, flights: flights)
    }
}

extension Loader {
    /// Makes concurrent loads whose inputs have the same `key` share one call to this loader; through
    /// `flights` when given (made once and shared, so a chain rebuilt for each use still coalesces).
    public func coalesced<Key: Hashable & Sendable>(
        by key: @escaping @Sendable (Input) -> Key, in flights: Coalescer<Key, Output> = Coalescer()
    ) -> CoalescingLoader<Self, Key> {
        CoalescingLoader(base: self, key: key, flights: flights)
    }
}
