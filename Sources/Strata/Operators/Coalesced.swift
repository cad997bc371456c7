/// Shares one in-flight load among every caller asking for the same input; built by
/// ``Loader/coalesced()->CoalescingLoader<Self,Self.Input>``.
///
/// - N concurrent loads of one input make **one** call to the base; every caller gets the same value
///   or the same error, and the events the shared load recorded (so each caller's
///   ``Loader/loadServed()`` tells the same provenance), after a ``LoadEvent/coalesced(tier:)`` for
///   those who joined.
/// - A caller that is cancelled stops waiting at once with `CancellationError`; the shared load is
///   cancelled only when its **last** waiter is.
/// - Nothing is remembered after a load ends: the next call starts a new load (put a cache in front
///   to keep values).
/// - The shared load runs in a task of its own, which inherits the first caller's priority and
///   task-local values.
public struct CoalescingLoader<Base: Loader, Key: Hashable & Sendable>: Loader {
    public typealias Input = Base.Input
    public typealias Output = Base.Output

    public let base: Base
    let key: @Sendable (Input) -> Key
    let flights: Flights

    init(base: Base, key: @escaping @Sendable (Input) -> Key) {
        self.base = base
        self.key = key
        self.flights = Flights()
    }

    /// The number of loads in flight now (one per distinct key).
    public var inFlightCount: Int { flights.state.withLock { $0.entries.count } }

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
        let waiter = flights.state.withLock { state in
            defer { state.nextWaiter += 1 }
            state.unregistered.insert(state.nextWaiter)
            return state.nextWaiter
        }
        let (outcome, joined) = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                join(key: key, waiter: waiter, input: input, continuation: continuation)
            }
        } onCancel: {
            flights.cancel(waiter: waiter, key: key)
        }
        if let recorder = LoadRecorder.current {
            if joined { recorder.deliver(.coalesced(tier: describeLoader(base))) }
            for event in outcome.events { recorder.deliver(event) }
        }
        return try outcome.result.get()
    }

    /// Registers `continuation` with the load in flight for `key`, starting one when there is none.
    private func join(key: Key, waiter: Int, input: Input, continuation: CheckedContinuation<(Outcome, Bool), Never>) {
        let cancelledAlready = flights.state.withLock { state -> Bool in
            if state.unregistered.remove(waiter) == nil { return true }  // cancelled before it got here
            state.registrations += 1
            defer { state.registrationWaiters.resumeReached(state.registrations) }
            if state.entries[key] != nil {
                state.entries[key]!.waiters[waiter] = (continuation, true)
                return false
            }
            let flight = state.nextFlight
            state.nextFlight += 1
            let task = Task { [base, flights] in
                let recorder = LoadRecorder()
                let result: Result<Output, any Error>
                do {
                    result = .success(try await LoadRecorder.$current.withValue(recorder) { try await base.load(input) })
                } catch {
                    result = .failure(error)
                }
                flights.finish(key: key, flight: flight, with: Outcome(result: result, events: recorder.events))
            }
            state.entries[key] = Entry(flight: flight, task: task, waiters: [waiter: (continuation, false)])
            return false
        }
        if cancelledAlready {
            continuation.resume(returning: (Outcome(result: .failure(CancellationError()), events: []), false))
        }
    }

    struct Outcome: Sendable {
        var result: Result<Output, any Error>
        var events: [LoadEvent]
    }

    struct Entry: Sendable {
        var flight: UInt64
        var task: Task<Void, Never>
        /// Each waiter's continuation, and whether it joined a load another caller started.
        var waiters: [Int: (CheckedContinuation<(Outcome, Bool), Never>, Bool)]
    }

    struct State: Sendable {
        var entries: [Key: Entry] = [:]
        var nextWaiter = 0
        var nextFlight: UInt64 = 0
        /// Waiters between taking a number and registering; a cancellation in that window removes
        /// the number, so registration resumes the waiter with `CancellationError` at once.
        var unregistered: Set<Int> = []
        /// How many callers have registered with a load, ever (for ``waitForWaiters(count:)``).
        var registrations = 0
        var registrationWaiters = CountWaiters()
    }

    /// The loads in flight, shared by every copy of the loader.
    final class Flights: Sendable {
        let state = Locked(State())

        /// Hands `outcome` to every waiter of `flight`, unless every waiter has already left.
        func finish(key: Key, flight: UInt64, with outcome: Outcome) {
            let waiters = state.withLock { state -> [(CheckedContinuation<(Outcome, Bool), Never>, Bool)] in
                guard let entry = state.entries[key], entry.flight == flight else { return [] }
                state.entries[key] = nil
                return Array(entry.waiters.values)
            }
            for (continuation, joined) in waiters { continuation.resume(returning: (outcome, joined)) }
        }

        /// Releases `waiter` with `CancellationError`; cancels the shared load when it was the last.
        func cancel(waiter: Int, key: Key) {
            let released = state.withLock { state -> (CheckedContinuation<(Outcome, Bool), Never>, Bool)? in
                guard var entry = state.entries[key], let released = entry.waiters.removeValue(forKey: waiter) else {
                    // Not registered yet (registration will see it), or already answered (nothing to do).
                    state.unregistered.remove(waiter)
                    return nil
                }
                if entry.waiters.isEmpty {
                    entry.task.cancel()
                    state.entries[key] = nil
                } else {
                    state.entries[key] = entry
                }
                return released
            }
            guard let (continuation, joined) = released else { return }
            continuation.resume(returning: (Outcome(result: .failure(CancellationError()), events: []), joined))
        }
    }
}

extension CoalescingLoader: LoaderDescribing {
    public var loaderNode: LoaderNode { LoaderNode(label: "coalesced", children: [Strata.loaderNode(of: base)]) }
}

extension Loader where Input: Hashable {
    /// Makes concurrent loads of the same input share one call to this loader (single-flight).
    ///
    /// ```swift
    /// let posts = remotePosts.coalesced()   // 50 cells asking for post 7 at once → one request
    /// ```
    public func coalesced() -> CoalescingLoader<Self, Input> {
        CoalescingLoader(base: self, key: { $0 })
    }
}

extension Loader where Input == Void {
    /// Makes concurrent loads share one call to this loader (single-flight).
    public func coalesced() -> CoalescingLoader<Self, Bool> {
        CoalescingLoader(base: self, key: { _ in true })
    }
}

extension Loader {
    /// Makes concurrent loads whose inputs have the same `key` share one call to this loader.
    public func coalesced<Key: Hashable & Sendable>(by key: @escaping @Sendable (Input) -> Key) -> CoalescingLoader<Self, Key> {
        CoalescingLoader(base: self, key: key)
    }
}
