@_spi(StrataInternals) import Strata

/// A loader that records every input and answers from stubbed results, for unit tests of one type.
///
/// ```swift
/// let remote = LoaderSpy<Void, [FeedItem]>(.success(items))
/// _ = try await remote.writingThrough(in: store, key: "feed").load()
/// #expect(remote.loadCount == 1)
/// ```
/// Results are used in order; the last one repeats. With no result stubbed a load throws
/// ``LoaderSpy/Unstubbed``. With ``holdsLoads`` on, each load suspends until the test calls
/// ``complete(_:with:)``, so a test can cancel or inspect a load in flight without sleeping.
public final class LoaderSpy<Input: Sendable, Output: Sendable>: Loader, Sendable {
    /// A load ran with no result stubbed.
    public struct Unstubbed: Error, CustomStringConvertible {
        public var description: String { "LoaderSpy has no stubbed result" }
    }

    private struct Held {
        var index: Int
        var continuation: CheckedContinuation<Output, any Error>
    }

    private struct State {
        var inputs: [Input] = []
        var results: [Result<Output, any Error>] = []
        var held: [Held] = []
        var cancelledLoads = 0
        /// Loads that have arrived: started and, when loads are held, registered as held, so
        /// ``complete(_:with:)`` finds them.
        var arrived = 0
        /// Held loads whose task was cancelled before they registered: they must not register.
        var cancelledBeforeHolding: Set<Int> = []
        var loadWaiters = ConditionWaiters<Int>()
    }

    private let state: Locked<State>
    /// When `true`, loads wait for ``complete(_:with:)`` instead of answering at once.
    public let holdsLoads: Bool
    public let name: String

    /// A spy answering with `results` in order (the last repeats).
    public init(_ results: Result<Output, any Error>..., holdsLoads: Bool = false, name: String = "spy") {
        self.state = Locked(State(results: results))
        self.holdsLoads = holdsLoads
        self.name = name
    }

    /// The inputs of every load so far, in order.
    public var inputs: [Input] { state.withLock { $0.inputs } }
    /// How many loads have started.
    public var loadCount: Int { state.withLock { $0.inputs.count } }
    /// How many held loads ended because their task was cancelled.
    public var cancelledLoadCount: Int { state.withLock { $0.cancelledLoads } }

    /// Replaces the stubbed results.
    public func stub(_ results: Result<Output, any Error>...) {
        state.withLock { $0.results = results }
    }

    public func load(_ input: Input) async throws -> Output {
        let (index, result) = state.withLock { state -> (Int, Result<Output, any Error>?) in
            state.inputs.append(input)
            let count = state.inputs.count
            if !holdsLoads {
                state.arrived += 1
                state.loadWaiters.resumeSatisfied(by: state.arrived)
            }
            guard !state.results.isEmpty else { return (count - 1, nil) }
            return (count - 1, state.results.count > 1 ? state.results.removeFirst() : state.results[0])
        }
        if holdsLoads {
            defer { state.withLock { _ = $0.cancelledBeforeHolding.remove(index) } }
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    let cancelled = state.withLock { state -> Bool in
                        // Cancelled before it could be held: the handler found nothing to end.
                        let cancelled = state.cancelledBeforeHolding.remove(index) != nil
                        if cancelled {
                            state.cancelledLoads += 1
                        } else {
                            // Held before any waiter resumes, so a test that waited for it finds it.
                            state.held.append(Held(index: index, continuation: continuation))
                        }
                        state.arrived += 1
                        state.loadWaiters.resumeSatisfied(by: state.arrived)
                        return cancelled
                    }
                    if cancelled { continuation.resume(throwing: CancellationError()) }
                }
            } onCancel: {
                let held = state.withLock { state -> Held? in
                    guard let position = state.held.firstIndex(where: { $0.index == index }) else {
                        state.cancelledBeforeHolding.insert(index)
                        return nil
                    }
                    state.cancelledLoads += 1
                    return state.held.remove(at: position)
                }
                held?.continuation.resume(throwing: CancellationError())
            }
        }
        guard let result else { throw Unstubbed() }
        return try result.get()
    }

    /// Completes the held load number `index` (0-based, in start order) with `result`.
    /// Returns `false` if that load is not held (never started, already completed or cancelled).
    @discardableResult
    public func complete(_ index: Int = 0, with result: Result<Output, any Error>) -> Bool {
        let held = state.withLock { state -> Held? in
            guard let position = state.held.firstIndex(where: { $0.index == index }) else { return nil }
            return state.held.remove(at: position)
        }
        held?.continuation.resume(with: result)
        return held != nil
    }

    /// Suspends until at least `count` loads have started and, with ``holdsLoads``, are held: a load
    /// this returns for can be completed with ``complete(_:with:)`` at once.
    ///
    /// - Parameters:
    ///   - count: how many loads, in all since the spy was made.
    ///   - timeout: the longest to wait, in real time (`ContinuousClock`). `nil` waits until the loads
    ///     come or the task is cancelled (a Swift Testing `.timeLimit` cancels it).
    /// - Throws: `CancellationError` as soon as the waiting task is cancelled; ``Strata/WaitTimeoutError``
    ///   when `timeout` passes first, e.g. `waited 5.0 seconds for 2 loads on LoaderSpy "spy", saw 1
    ///   (1 started, 1 held)`.
    public func waitForLoads(count: Int = 1, timeout: Duration? = nil) async throws {
        try await withWaitTimeout(timeout) { [state] in
            let id = state.withLock { $0.loadWaiters.makeID() }
            try await waitCancellably { continuation in
                state.withLock { $0.loadWaiters.wait(id, until: { $0 >= count }, current: $0.arrived, continuation: continuation) }
            } withdraw: {
                state.withLock { _ = $0.loadWaiters.withdraw(id, throwing: CancellationError()) }
            }
        } timedOut: { timeout in
            let (arrived, started, held) = state.withLock { ($0.arrived, $0.inputs.count, $0.held.count) }
            if arrived >= count { return nil }
            return WaitTimeoutError(
                awaited: "\(count) load\(count == 1 ? "" : "s") on LoaderSpy \"\(name)\"",
                observed: "\(arrived) (\(started) started" + (holdsLoads ? ", \(held) held)" : ")"),
                timeout: timeout)
        }
    }
}

extension LoaderSpy: CustomStringConvertible {
    public var description: String { name }
}

/// A loader that always answers with one result.
public struct StubLoader<Input: Sendable, Output: Sendable>: Loader, CustomStringConvertible {
    public let result: Result<Output, any Error>
    public let description: String

    public init(_ result: Result<Output, any Error>, name: String = "stub") {
        self.result = result
        self.description = name
    }

    public func load(_ input: Input) async throws -> Output { try result.get() }
}

/// A plain error for tests: `TestError("offline")`.
public struct TestError: Error, Equatable, CustomStringConvertible {
    public var message: String
    public init(_ message: String = "test error") { self.message = message }
    public var description: String { message }
}
