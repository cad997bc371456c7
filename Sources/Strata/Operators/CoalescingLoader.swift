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
    @usableFromInline let key: @Sendable (Input) -> Key
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
        await flights.waitForRegistrations(count: count)
    }

    @inlinable
    public func load(_ input: Input) async throws -> Output {
        try Task.checkCancellation()
        let key = key(input)
        while true {
            switch flights.arrive(key) {
            case .alone:
                return try await base.load(input)
            case .join(let waiter):
                let priority = Task.currentPriority
                let answer = await withTaskCancellationHandler {
                    await withUnsafeContinuation { continuation in
                        flights.join(continuation, id: waiter, key: key, priority: priority)
                    }
                } onCancel: {
                    flights.cancel(waiter, key: key)
                }
                // `nil`: the load ended between taking a number and joining it; start over.
                guard let (outcome, joined) = answer else { continue }
                return try deliver(outcome, joined: joined)
            case .lead(let waiter, let flight):
                return try deliver(await lead(key: key, input: input, waiter: waiter, flight: flight), joined: false)
            }
        }
    }

    /// Hands the shared load's events to this caller's recorder, then its value or error.
    @inlinable
    func deliver(_ outcome: Outcome, joined: Bool) throws -> Output {
        if let recorder = LoadRecorder.enclosing {
            if joined { recorder.deliver(.coalesced(tier: base.chainSummary)) }
            for event in outcome.events { recorder.deliver(event) }
        }
        return try outcome.result.get()
    }

    /// Starts the shared load for `flight` and waits for it. The load runs in a task of its own (the
    /// last waiter to leave cancels it, not the leader), started *immediately*: it runs on this thread
    /// until it first suspends, so a load that never suspends (a memory hit) is finished when the task
    /// is created, and the leader takes its outcome without a continuation or a thread hop.
    @inlinable
    func lead(key: Key, input: Input, waiter: Int, flight: UInt64) async -> Outcome {
        // The flight's events are always collected (one recorder per flight, not per waiter): any
        // waiter may observe them, whether or not the caller that started the flight does.
        let recorder = LoadRecorder()
        let operation: @concurrent @Sendable () async -> Void = { [base, flights] in
            let result: Result<Output, any Error>
            // A write (a non-idempotent request) is never shared: when the load reports one, the
            // callers that joined it start over and send their own.
            let attempt = LoadAttempt(onWrite: { flights.markWrite(key: key, flight: flight) })
            do {
                result = .success(try await attempt.run {
                    try await LoadRecorder.recording(into: recorder) { try await base.load(input) }
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
        if let finished = flights.handOver(task, key: key, flight: flight) { return finished }
        let answer = await withTaskCancellationHandler {
            await withUnsafeContinuation { continuation in
                flights.leaderWaits(continuation, id: waiter, key: key, flight: flight)
            }
        } onCancel: {
            flights.cancel(waiter, key: key)
        }
        // The leader is answered by `finish` or `cancel`, never told to start over.
        return answer?.0 ?? .cancelled
    }

    @usableFromInline typealias Outcome = Coalescer<Key, Output>.Outcome
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
