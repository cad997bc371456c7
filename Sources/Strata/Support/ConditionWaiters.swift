/// A bounded wait of the test kit ran out of time: what it waited for, and what it saw instead.
///
/// Thrown by the waits that take a `timeout` (`ManualClock.waitForSleepers`,
/// `LoaderSpy.waitForLoads`, ``CoalescedLoader``'s `waitForWaiters`), so a test whose code under
/// test never reaches the awaited point fails with a message instead of hanging:
///
/// ```
/// waited 5.0 seconds for 2 sleepers on ManualClock, saw 1 (now 0.0 seconds; sleeping until: 30.0 seconds)
/// ```
public struct WaitTimeoutError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What the wait was for, e.g. `2 sleepers on ManualClock`.
    public var awaited: String
    /// What there was when the time ran out, e.g. `1 (now 0.0 seconds; sleeping until: 30.0 seconds)`.
    public var observed: String
    /// How long it waited, on `ContinuousClock` (real time).
    public var timeout: Duration

    public init(awaited: String, observed: String, timeout: Duration) {
        self.awaited = awaited
        self.observed = observed
        self.timeout = timeout
    }

    public var description: String { "waited \(timeout) for \(awaited), saw \(observed)" }
}

/// Tasks waiting for a condition on some state to hold (a count of loads held, of callers joined):
/// the test kit's way to wait for "something happened" without sleeping, that the waiting task's
/// cancellation ends.
///
/// Keep it inside the state a ``Locked`` guards and call every method with the lock held. A
/// continuation is resumed from a new task, never under that lock: resuming a task takes the
/// runtime's lock of that task, which the task's cancellation holds while its handler
/// (``withdraw(_:throwing:)``) waits for the owner's lock (Swift's documented rule for
/// `withTaskCancellationHandler`). Conditions run under that lock too, so they must not
/// take it: they compare counts. (A test's own predicate is checked outside the lock, on the states
/// the owner streams to it, as `ManualClock.waitForSleepers` does.)
/// ``waitCancellably(register:withdraw:)`` drives one wait through it, and
/// ``withWaitTimeout(_:_:timedOut:)`` bounds it.
@_spi(StrataInternals)
public struct ConditionWaiters<Snapshot>: Sendable {
    /// Whether the state, as `Snapshot`, is what a waiter waits for.
    public typealias Condition = @Sendable (Snapshot) -> Bool

    private struct Waiter: Sendable {
        var id: UInt64
        var condition: Condition
        var continuation: CheckedContinuation<Void, any Error>
    }

    private var waiting: [Waiter] = [] {
        didSet { waitingCount = waiting.count }
    }
    private var nextID: UInt64 = 0
    /// How many wait (kept beside `waiting`, so `isEmpty` reads an integer, inlined in the caller:
    /// asking the array of a nested generic type costs its metadata lookup on every check).
    @usableFromInline var waitingCount = 0

    public init() {}

    /// Whether nobody waits.
    @inlinable public var isEmpty: Bool { waitingCount == 0 }

    /// A number for a new wait, to pass to ``wait(_:until:current:continuation:)`` and
    /// ``withdraw(_:throwing:)``.
    public mutating func makeID() -> UInt64 {
        nextID += 1
        return nextID
    }

    /// Resumes `continuation` (from a new task, as every resume here) if the current task is
    /// cancelled (throwing `CancellationError`) or `condition` holds for `current`; otherwise when a
    /// later ``resumeSatisfied(by:)`` reports a state where it holds, or ``withdraw(_:throwing:)``
    /// ends the wait.
    ///
    /// Reading the task's cancellation under the lock is enough: the runtime marks a task cancelled
    /// *before* it runs its cancellation handler, so either this sees the cancellation, or it stores
    /// the waiter first and the handler's ``withdraw(_:throwing:)``, which comes after, finds it.
    public mutating func wait(
        _ id: UInt64, until condition: @escaping Condition, current: Snapshot,
        continuation: CheckedContinuation<Void, any Error>
    ) {
        if Task.isCancelled {
            Self.resumeOutsideTheLock(continuation, throwing: CancellationError())
        } else if condition(current) {
            Self.resumeOutsideTheLock(continuation)
        } else {
            waiting.append(Waiter(id: id, condition: condition, continuation: continuation))
        }
    }

    /// Resumes every waiter whose condition holds for `current`.
    public mutating func resumeSatisfied(by current: Snapshot) {
        // Most changes have nobody waiting: no pass over an empty array (its generic `removeAll`).
        guard !waiting.isEmpty else { return }
        waiting.removeAll { waiter in
            guard waiter.condition(current) else { return false }
            Self.resumeOutsideTheLock(waiter.continuation)
            return true
        }
    }

    /// Ends wait `id` with `error`, if it still waits. Returns whether it did (`false`: already
    /// resumed, or not registered yet).
    @discardableResult
    public mutating func withdraw(_ id: UInt64, throwing error: @autoclosure () -> any Error) -> Bool {
        guard let index = waiting.firstIndex(where: { $0.id == id }) else { return false }
        Self.resumeOutsideTheLock(waiting.remove(at: index).continuation, throwing: error())
        return true
    }

    /// Resumes `continuation` from a new task: the caller holds the owner's lock.
    private static func resumeOutsideTheLock(_ continuation: CheckedContinuation<Void, any Error>, throwing error: (any Error)? = nil) {
        Task {
            if let error { continuation.resume(throwing: error) } else { continuation.resume() }
        }
    }
}

/// Suspends until `register`'s continuation is resumed, or throws `CancellationError` as soon as the
/// task is cancelled.
///
/// - Parameters:
///   - register: under the owner's lock, calls ``ConditionWaiters/wait(_:until:current:continuation:)``
///     with the continuation.
///   - withdraw: under the owner's lock, calls ``ConditionWaiters/withdraw(_:throwing:)`` with
///     `CancellationError` (the task was cancelled).
@_spi(StrataInternals)
public func waitCancellably(
    register: (CheckedContinuation<Void, any Error>) -> Void,
    withdraw: @Sendable () -> Void
) async throws {
    try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { register($0) }
    } onCancel: {
        withdraw()
    }
}

/// Runs `wait` and, when `timeout` of real time (`ContinuousClock`) passes before it ends, cancels
/// it and throws what `timedOut` returns (a ``WaitTimeoutError`` telling what it saw), or returns
/// when `timedOut` finds what was awaited after all (`nil`). With no `timeout`, runs `wait` alone.
///
/// Cancelling the calling task cancels `wait`, which must then throw `CancellationError` promptly.
@_spi(StrataInternals)
public func withWaitTimeout(
    _ timeout: Duration?,
    _ wait: @escaping @Sendable () async throws -> Void,
    timedOut: (_ timeout: Duration) -> (any Error)?
) async throws {
    guard let timeout else { return try await wait() }
    let ended = try await withThrowingTaskGroup(of: Bool.self) { group in
        defer { group.cancelAll() }
        group.addTask {
            try await wait()
            return true
        }
        group.addTask {
            try await Task.sleep(for: timeout, clock: .continuous)
            return false
        }
        // The first to end decides; the other is cancelled (and its outcome ignored).
        return try await group.next() ?? false
    }
    if !ended, let error = timedOut(timeout) { throw error }
}

@_spi(StrataInternals)
extension Locked {
    /// Suspends until `condition` holds for the state's `current` snapshot, waiting in the
    /// ``ConditionWaiters`` at `waiters` (whose owner calls `resumeSatisfied(by:)` after each change).
    ///
    /// - Throws: `CancellationError` as soon as the waiting task is cancelled.
    public func wait<Snapshot>(
        in waiters: WritableKeyPath<State, ConditionWaiters<Snapshot>> & Sendable,
        current: @escaping @Sendable (State) -> Snapshot,
        until condition: @escaping ConditionWaiters<Snapshot>.Condition
    ) async throws {
        let id = withLock { $0[keyPath: waiters].makeID() }
        try await waitCancellably { continuation in
            withLock { state in
                state[keyPath: waiters].wait(id, until: condition, current: current(state), continuation: continuation)
            }
        } withdraw: { [self] in
            withLock { _ = $0[keyPath: waiters].withdraw(id, throwing: CancellationError()) }
        }
    }
}
