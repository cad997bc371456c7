import Foundation

/// A soft timeout: with a stale copy at hand, a slow load is answered with the copy after
/// `softTimeout`, while the load goes on in the background up to `hardTimeout` and updates the
/// store; built by `servingStaleAfter(_:in:key:maxStale:hardTimeout:)`.
///
/// - Each key has at most one load in flight. A caller that arrives while it runs joins it, and
///   every caller holding a usable copy gets that copy at the same moment: `softTimeout` after the
///   load started. A caller that arrives after that moment, with a copy, gets it at once.
/// - A usable copy is the store's entry for the key that `freshness` accepts, measured from the
///   copy's own store time (nothing here re-stamps it). Put the operator after the chain's fresh
///   tier: it is the way to the remote once the fresh copy has expired.
/// - A caller without a usable copy waits for the load.
/// - The load runs in a task of its own, in the environment of the call that started it. It ends
///   when the base loader answers (the value is written to the store, and the waiting callers get
///   it), fails (they get the error; the store keeps its copy), or at `hardTimeout` (they get a
///   ``TimeoutError``, and the load is cancelled).
/// - A caller's cancellation stops its wait, never the load.
/// - A copy served early is recorded as served by `<store> [stale after soft timeout]`.
/// - Put no operator that writes what it is answered (`writingThrough`, `coalescedAcrossProcesses`)
///   outside this one: it would store the stale copy as a new value. Inside, it writes the load's
///   real answer.
public struct ServingStaleAfterLoader<Base: Loader, S: Store>: Loader where S.Value == Base.Output {
    public typealias Input = Base.Input
    public typealias Output = Base.Output

    public let base: Base
    public let store: S
    /// How long a caller with a usable copy waits for the load before it is answered with the copy.
    public let softTimeout: Duration
    /// How long the load may run in all.
    public let hardTimeout: Duration
    /// Which copies are usable: measured from their own store time.
    public let freshness: FreshnessPolicy
    let key: @Sendable (Input) -> S.Key
    let flights: Flights

    /// What a waiting caller is answered with.
    enum Outcome: Sendable {
        case value(Output)
        /// The soft timeout passed: the caller's own copy.
        case copy
    }

    /// The flights, shared by every copy of the loader, and the continuations of their callers.
    final class Flights: Sendable {
        struct State: Sendable {
            var machine = ServingStaleAfterFlights<S.Key>()
            var continuations: [UInt64: CheckedContinuation<Outcome, any Error>] = [:] {
                didSet { callerWaiters.resumeSatisfied(by: continuations.count) }
            }
            var callerWaiters = ConditionWaiters<Int>()
            var inFlight = 0
            var idleWaiters = ConditionWaiters<Int>()
        }
        let state = Locked(State())

        /// Answers `waiters` (whose continuations are still registered) with `result`.
        func answer(_ waiters: [UInt64], with result: Result<Outcome, any Error>) {
            let continuations = state.withLock { state in waiters.compactMap { state.continuations.removeValue(forKey: $0) } }
            for continuation in continuations { continuation.resume(with: result) }
        }
    }

    init(
        base: Base, store: S, key: @escaping @Sendable (Input) -> S.Key, softTimeout: Duration, hardTimeout: Duration,
        freshness: FreshnessPolicy
    ) {
        precondition(softTimeout >= .zero && hardTimeout > softTimeout, "servingStaleAfter: the hard timeout must exceed the soft one")
        self.base = base
        self.store = store
        self.key = key
        self.softTimeout = softTimeout
        self.hardTimeout = hardTimeout
        self.freshness = freshness
        self.flights = Flights()
    }

    /// Returns once no load of this loader runs in the background (a test's wait, or a shutdown's).
    /// - Throws: `CancellationError` as soon as the waiting task is cancelled.
    public func waitForBackgroundLoads() async throws {
        try await flights.state.wait(in: \.idleWaiters, current: { $0.inFlight }, until: { $0 == 0 })
    }

    /// Returns once `count` callers wait for loads of this loader: a test's wait for a caller to
    /// have joined a load.
    /// - Throws: `CancellationError` as soon as the waiting task is cancelled.
    public func waitForWaitingCallers(_ count: Int) async throws {
        try await flights.state.wait(in: \.callerWaiters, current: { $0.continuations.count }, until: { $0 == count })
    }

    public func load(_ input: Input) async throws -> Output {
        try await load(input, in: .current)
    }

    public func load(_ input: Input, in context: LoadContext) async throws -> Output {
        let key = key(input)
        let environment = context.environment
        var copy: CacheEntry<Output>?
        do {
            copy = try await store.retrieve(key)
        } catch {
            try rethrowIfCancelled(error)  // an unreadable copy is no copy
        }
        let now = environment.now()
        if let entry = copy, !freshness.isFresh(storedAt: entry.storedAt, now: now) { copy = nil }
        try Task.checkCancellation()

        let flights = flights
        let waiter = flights.state.withLock { $0.machine.nextWaiter() }
        /// The flight the caller joined, once it has; and whether it was cancelled before that.
        let registration = Locked<(flight: UInt64?, cancelled: Bool)>((nil, false))
        let outcome: Outcome = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Outcome, any Error>) in
                let arrival = flights.state.withLock { state -> ServingStaleAfterFlights<S.Key>.Arrival in
                    let arrival = state.machine.arrived(key, waiter: waiter, hasCopy: copy != nil)
                    if arrival != .answerCopy { state.continuations[waiter] = continuation }
                    if case .start = arrival {
                        state.inFlight += 1
                    }
                    return arrival
                }
                let flight: UInt64
                switch arrival {
                case .answerCopy:
                    continuation.resume(returning: .copy)
                    return
                case .join(let id):
                    flight = id
                case .start(let id):
                    flight = id
                    startFlight(id, input: input, key: key, environment: environment)
                }
                let cancelled = registration.withLock { registration in
                    registration.flight = flight
                    return registration.cancelled
                }
                if cancelled { withdraw(key, flight: flight, waiter: waiter) }
            }
        } onCancel: {
            let flight = registration.withLock { registration in
                registration.cancelled = true
                return registration.flight
            }
            if let flight { withdraw(key, flight: flight, waiter: waiter) }
        }
        switch outcome {
        case .value(let value):
            return value
        case .copy:
            guard let copy else { preconditionFailure("servingStaleAfter: a caller without a copy was answered with one") }
            let age = max(.zero, Duration.between(copy.storedAt, environment.now()))
            let tier = context.tierName(default: "\(store.storeDescription) [stale after soft timeout]")
            context.record(.servedStale(tier: tier, reason: .softTimeout))
            context.record(.served(Provenance(origin: store.origin, tier: tier, storedAt: copy.storedAt, age: age)))
            return copy.value
        }
    }

    private func withdraw(_ key: S.Key, flight: UInt64, waiter: UInt64) {
        let continuation = flights.state.withLock { state -> CheckedContinuation<Outcome, any Error>? in
            guard state.machine.withdrawn(key, flight: flight, waiter: waiter) else { return nil }
            return state.continuations.removeValue(forKey: waiter)
        }
        continuation?.resume(throwing: CancellationError())
    }

    /// Runs flight `id`: the load, its soft timeout and its hard timeout, in tasks of their own.
    private func startFlight(_ id: UInt64, input: Input, key: S.Key, environment: LoadEnvironment) {
        let (base, store, flights, softTimeout, hardTimeout) = (base, store, flights, softTimeout, hardTimeout)
        let tier = "servingStaleAfter(\(store.storeDescription))"
        Task {
            let context = LoadContext(environment: environment)
            await withTaskGroup(of: Result<Output, any Error>?.self) { group in
                group.addTask {
                    do {
                        let value = try await base.load(input, in: context)
                        // Past the hard timeout (cancelled), a late answer never overwrites the store.
                        try Task.checkCancellation()
                        await store.insertReportingFailure(value, for: key, in: context)
                        return .success(value)
                    } catch {
                        return .failure(error)
                    }
                }
                group.addTask {
                    do { try await environment.clock.sleep(for: softTimeout) } catch { return nil }
                    let early = flights.state.withLock { $0.machine.softTimeoutPassed(key, flight: id) }
                    flights.answer(early, with: .success(.copy))
                    return nil
                }
                group.addTask {
                    do { try await environment.clock.sleep(for: hardTimeout) } catch { return nil }
                    return .failure(TimeoutError(tier: tier, timeout: hardTimeout))
                }
                // The first outcome ends the flight; the rest are cancelled.
                while let next = await group.next() {
                    guard let result = next else { continue }
                    if case .failure(let error) = result {
                        environment.logger.warning(
                            "a load behind a soft timeout failed: its callers get the error, the store keeps its copy",
                            metadata: ["key": "\(key)", "store": "\(store.storeDescription)", "error": "\(error)"])
                    }
                    let waiters = flights.state.withLock { $0.machine.ended(key, flight: id) }
                    flights.answer(waiters, with: result.map { .value($0) })
                    group.cancelAll()
                    break
                }
            }
            flights.state.withLock { state in
                state.inFlight -= 1
                state.idleWaiters.resumeSatisfied(by: state.inFlight)
            }
        }
    }
}

extension ServingStaleAfterLoader: LoaderDescribing {
    public var loaderNode: LoaderNode {
        LoaderNode(
            label: "servingStaleAfter(\(softTimeout.formattedAge), \(store.storeDescription), \(freshness), hard \(hardTimeout.formattedAge))",
            children: [base.chainNode])
    }
}

extension Loader {
    /// Answers with a stale copy from `store` when this loader is slower than `softTimeout`, and
    /// lets the load go on in the background, up to `hardTimeout`, to update the store.
    ///
    /// ```swift
    /// let feed = store.loader(key: "feed", freshness: .maxAge(.seconds(5 * 60)))
    ///     .fallingBack(to: remote.servingStaleAfter(.milliseconds(300), in: store, key: "feed", maxStale: .seconds(6 * 3600)))
    /// ```
    ///
    /// - Parameters:
    ///   - softTimeout: how long a caller with a usable copy waits for the load.
    ///   - store: where the copies are read and the answers written.
    ///   - key: the store key of an input.
    ///   - maxStale: the oldest copy that may be served, by its own store time (the total staleness
    ///     bound); `nil` serves a copy of any age.
    ///   - hardTimeout: how long the load may run in all (30 s); more than `softTimeout`.
    public func servingStaleAfter<S: Store>(
        _ softTimeout: Duration, in store: S, key: @escaping @Sendable (Input) -> S.Key, maxStale: Duration?,
        hardTimeout: Duration = .seconds(30)
    ) -> ServingStaleAfterLoader<Self, S> where S.Value == Output {
        ServingStaleAfterLoader(
            base: self, store: store, key: key, softTimeout: softTimeout, hardTimeout: hardTimeout,
            freshness: .staleness(maxStale))
    }

    /// `servingStaleAfter(_:in:key:maxStale:hardTimeout:)` with one key for every input.
    public func servingStaleAfter<S: Store>(
        _ softTimeout: Duration, in store: S, key: S.Key, maxStale: Duration?, hardTimeout: Duration = .seconds(30)
    ) -> ServingStaleAfterLoader<Self, S> where S.Value == Output {
        servingStaleAfter(softTimeout, in: store, key: { _ in key }, maxStale: maxStale, hardTimeout: hardTimeout)
    }

    /// The former spelling of `servingStaleAfter(_:in:key:maxStale:hardTimeout:)`, whose `freshness:`
    /// bounded the staleness of the copy served.
    @available(*, deprecated, message: "use servingStaleAfter(_:in:key:maxStale:hardTimeout:)")
    public func servingStaleAfter<S: Store>(
        _ softTimeout: Duration, from store: S, key: @escaping @Sendable (Input) -> S.Key, freshness: FreshnessPolicy,
        hardTimeout: Duration = .seconds(30)
    ) -> ServingStaleAfterLoader<Self, S> where S.Value == Output {
        ServingStaleAfterLoader(
            base: self, store: store, key: key, softTimeout: softTimeout, hardTimeout: hardTimeout, freshness: freshness)
    }

    /// The former spelling of `servingStaleAfter(_:in:key:maxStale:hardTimeout:)` with one key.
    @available(*, deprecated, message: "use servingStaleAfter(_:in:key:maxStale:hardTimeout:)")
    public func servingStaleAfter<S: Store>(
        _ softTimeout: Duration, from store: S, key: S.Key, freshness: FreshnessPolicy, hardTimeout: Duration = .seconds(30)
    ) -> ServingStaleAfterLoader<Self, S> where S.Value == Output {
        ServingStaleAfterLoader(
            base: self, store: store, key: { _ in key }, softTimeout: softTimeout, hardTimeout: hardTimeout,
            freshness: freshness)
    }
}
