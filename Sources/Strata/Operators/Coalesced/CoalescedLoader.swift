/// Shares one in-flight load among every caller asking for the same input; built by
/// ``Loader/coalesced(in:)->CoalescedLoader<Self,Self.Input>`` (one flight per input), ``Loader/coalesced(in:)->CoalescedLoader<Self,SingleResource>`` (a `Void` loader), or ``Loader/coalesced(by:in:)``.
///
/// - N concurrent loads of one input make **one** call to the base; every caller gets the same value
///   or the same error, and the events the shared load recorded (so each caller's
///   ``Loader/loadServed()`` tells the same provenance), after a ``LoadEvent/coalesced(tier:)`` for
///   those who joined.
/// - The loads in flight live in its ``LoadsInFlight``. `coalesced()` makes a new one per call, so a chain
///   **rebuilt for each use** (a computed property, a SwiftUI `body`) never coalesces: make a
///   ``LoadsInFlight`` once and pass it to `coalesced(in:)`.
/// - A write is never shared: once the shared load reports a non-idempotent request (``HTTPLoader``
///   does, through ``LoadAttempt/noteNonIdempotentRequest(hasIdempotencyKey:)``), nobody joins it and callers that had joined send their own.
/// - The shared load runs in the task of the caller that started it (the *leader*): no task is
///   started, so a load that never suspends (a memory hit) costs two lock round-trips. Cancelling the
///   leader cancels the load; the callers that joined it are not handed that cancellation: unless the
///   load succeeded anyway, they start over and one of them leads a new load.
/// - A caller that joined and is cancelled stops waiting at once with `CancellationError`; the load
///   goes on for the others.
/// - The load runs at its leader's priority: a caller of higher priority that joins does not raise it
///   (it waits on a continuation). Where a high-priority caller must not wait behind a background
///   prefetch, give them different coalescers.
/// - A value the base answers at once (``Loader/loadImmediately(_:in:)``: a fresh memory hit) is
///   served without a flight: there is nothing to share.
/// - Nothing is remembered after a load ends: the next call starts a new load (put a cache in front
///   to keep values).
/// - The load runs with its leader's ``LoadContext`` (its ``LoadEnvironment``, its recorders) and
///   task-local values, on its leader's executor: a main-actor caller's memory hit never leaves the
///   main actor.
public struct CoalescedLoader<Base: Loader, Key: Hashable & Sendable>: Loader {
    public typealias Input = Base.Input
    public typealias Output = Base.Output

    public let base: Base
    @usableFromInline let key: @Sendable (Input) -> Key
    /// The loads in flight this loader shares (with every chain built with the same coalescer).
    public let flights: LoadsInFlight<Output>

    init(base: Base, key: @escaping @Sendable (Input) -> Key, flights: LoadsInFlight<Output>) {
        self.base = base
        self.key = key
        self.flights = flights
    }

    /// The number of loads in flight now (one per distinct key).
    public var inFlightCount: Int { flights.inFlightCount }

    /// Suspends until `count` callers in all have led or joined a load in flight (tests use it to
    /// complete a held load only after every caller has joined it).
    ///
    /// - Parameter timeout: the longest to wait, in real time (`ContinuousClock`). `nil` waits until
    ///   the callers come or the task is cancelled.
    /// - Throws: `CancellationError` as soon as the waiting task is cancelled; ``WaitTimeoutError``
    ///   when `timeout` passes first, naming how many had registered.
    ///
    /// Tests call it as `waitForWaiters(count:timeout:)`, from StrataTesting; the demo's narrated
    /// scenario in the sibling Tools package calls it through the SPI.
    @_spi(StrataInternals)
    public func awaitWaiters(count: Int, timeout: Duration? = nil) async throws {
        try await flights.waitForRegistrations(count: count, timeout: timeout)
    }

    @inlinable @inline(__always)
    public func load(_ input: Input) async throws -> Output {
        try await loadTryingImmediately(input)
    }

    /// The base's immediate answer, outside any flight; `nil` in a cancelled task (whose load
    /// throws `CancellationError` before it joins anything).
    @inlinable
    public func loadImmediately(_ input: Input, in context: LoadContext) -> Output? {
        guard !Task.isCancelled else { return nil }
        return base.loadImmediately(input, in: context)
    }

    @inlinable
    public func load(_ input: Input, in context: LoadContext) async throws -> Output {
        let key = key(input)
        while true {
            try Task.checkCancellation()
            switch flights.arrive(key) {
            case .alone:
                return try await base.load(input, in: context)
            case .join(let waiter):
                let answer = await withTaskCancellationHandler {
                    await withUnsafeContinuation { continuation in
                        flights.join(continuation, id: waiter, key: key)
                    }
                } onCancel: {
                    flights.cancel(waiter, key: key)
                }
                // `nil`: the load turned out to write, ended before this caller could join it, or its
                // leader was cancelled: start over.
                guard let outcome = answer else { continue }
                if let recorder = context.recorder {
                    recorder.deliver(.coalesced(tier: base.chainSummary))
                    for event in outcome.events { recorder.deliver(event) }
                }
                return try outcome.result.get()
            case .lead(let flight):
                return try await lead(key: key, input: input, flight: flight, in: context)
            }
        }
    }

    /// Runs the shared load of `flight` in this (the first) caller's task, then answers the callers
    /// who joined it meanwhile.
    ///
    /// No task is started: a load that never suspends (a memory hit) costs two lock round-trips and
    /// the flight's recorder. The load's events reach this caller's recorder as they happen, and are
    /// collected for the callers who join (one recorder per flight, whether or not this caller
    /// observes). When this caller is cancelled and its load fails, those who joined are not handed
    /// its cancellation: they start over, and one of them leads a new load.
    @inlinable
    func lead(key: Key, input: Input, flight: UInt64, in context: LoadContext) async throws -> Output {
        // A write (a non-idempotent request) is never shared: when the load reports one (to every
        // recorder of the load), the callers that joined it start over and send their own.
        let recorder = context.recorder(onWrite: { [flights] in flights.markWrite(key: key, flight: flight) })
        let result: Result<Output, any Error>
        do {
            result = .success(try await base.load(input, in: context.recording(into: recorder)))
        } catch {
            result = .failure(error)
        }
        flights.finish(key: key, flight: flight) {
            if case .failure = result, Task.isCancelled { return nil }
            return Outcome(result: result, events: recorder.events)
        }
        return try result.get()
    }

    @usableFromInline typealias Outcome = LoadsInFlight<Output>.Outcome
}

extension CoalescedLoader: LoaderDescribing {
    public var loaderNode: LoaderNode { LoaderNode(label: "coalesced", children: [base.chainNode]) }
}

extension Loader where Input: Hashable {
    /// Makes concurrent loads of the same input share one call to this loader (single-flight).
    ///
    /// ```swift
    /// let posts = remotePosts.coalesced()   // 50 cells asking for post 7 at once → one request
    /// ```
    ///
    /// The loads in flight belong to `flights`. Without one, the loader this returns has its own: a
    /// chain **built again** for each use (a computed property, a SwiftUI `body`) then never shares a
    /// load. Make a ``LoadsInFlight`` once and pass it (`coalesced(in: flights)`): every chain built with
    /// it shares its loads in flight, however often it is rebuilt.
    public func coalesced(in flights: LoadsInFlight<Output> = LoadsInFlight()) -> CoalescedLoader<Self, Input> {
        CoalescedLoader(base: self, key: { $0 }, flights: flights)
    }
}

extension Loader where Input == Void {
    /// Makes concurrent loads share one call to this loader (single-flight), through `flights` when
    /// given (made once, shared by every chain built with it).
    public func coalesced(in flights: LoadsInFlight<Output> = LoadsInFlight()) -> CoalescedLoader<Self, SingleResource> {
        CoalescedLoader(base: self, key: { _ in SingleResource() }, flights: flights)
    }
}

extension Loader {
    /// Makes concurrent loads whose inputs have the same `key` share one call to this loader; through
    /// `flights` when given (made once and shared, so a chain rebuilt for each use still coalesces).
    public func coalesced<Key: Hashable & Sendable>(
        by key: @escaping @Sendable (Input) -> Key, in flights: LoadsInFlight<Output> = LoadsInFlight()
    ) -> CoalescedLoader<Self, Key> {
        CoalescedLoader(base: self, key: key, flights: flights)
    }
}

/// The one key of a `Void` loader's loads (`coalesced(in:)` on a single resource).
public struct SingleResource: Hashable, Sendable {
    @inlinable init() {}
}
