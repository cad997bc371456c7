import Foundation
import Logging
@_spi(StrataInternals) import Strata

/// A clock that moves only when a test says so: both a `Clock` (for waiting: backoff, timeouts) and a
/// wall clock (``date`` / ``wallClock``, for timestamps and freshness checks), advanced together.
///
/// ```swift
/// let clock = ManualClock()
/// let fresh = store.loader(key: "feed", freshness: .maxAge(.hours(24)), now: clock.wallClock)
/// clock.advance(by: .seconds(24 * 3600))   // exactly at max age: expired
/// ```
/// Sleepers wake when ``advance(by:)`` passes their deadline, or throw `CancellationError` when their
/// task is cancelled. Nothing ever waits for real time.
public final class ManualClock: Clock, Sendable {
    /// A point on the manual clock: the time elapsed since it was created.
    public struct Instant: InstantProtocol, Sendable, Hashable, Comparable {
        public var offset: Duration

        public init(offset: Duration) { self.offset = offset }

        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private struct Sleeper {
        var deadline: Instant
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now = Instant(offset: .zero)
        var sleepers: [UInt64: Sleeper] = [:]
        var nextID: UInt64 = 0
        /// Sleepers whose task was cancelled before they registered: they must not register.
        var cancelledBeforeRegistering: Set<UInt64> = []
        var sleeperWaiters = CountWaiters()
    }

    /// The wall-clock date when the clock was created.
    public let startDate: Date
    private let state: Locked<State>

    /// Test seams around a sleeper's registration (internal: `@testable import StrataTesting`), so a
    /// test can cancel a sleep exactly between its cancellation check and its registration.
    struct RegistrationHooks: Sendable {
        /// Runs inside `sleep`, after the cancellation check, before the sleeper registers.
        var before: (@Sendable () -> Void)?
        /// Runs inside `sleep`, right after the registration step (whether or not it registered).
        var after: (@Sendable () -> Void)?
    }

    let registrationHooks = Locked(RegistrationHooks())

    /// Creates a clock whose wall time starts at `startDate` (a fixed date by default, so tests are
    /// repeatable).
    public init(startDate: Date = Date(timeIntervalSince1970: 1_767_225_600)) {  // 2026-01-01T00:00:00Z
        self.startDate = startDate
        self.state = Locked(State())
    }

    public var now: Instant { state.withLock { $0.now } }
    public var minimumResolution: Duration { .zero }

    /// The current wall-clock time: ``startDate`` plus every advance so far.
    public var date: Date {
        let offset = state.withLock { $0.now.offset }
        return startDate.addingTimeInterval(offset / .seconds(1))
    }

    /// The wall clock as a function, for a ``Strata/LoadEnvironment``'s `now`.
    public var wallClock: @Sendable () -> Date { { [self] in self.date } }

    /// A ``Strata/LoadEnvironment`` driven by this clock: `now` is ``date``, `clock` is this clock, so
    /// advancing it moves freshness, backoff and deadlines together.
    ///
    /// ```swift
    /// let chain = remote.retrying(.exponential(attempts: 3)).writingThrough(to: store, key: "k")
    ///     .environment(clock.environment(logger: capture.logger))
    /// ```
    public func environment(logger: Logger = LoadEnvironment.defaultLogger) -> LoadEnvironment {
        LoadEnvironment(now: wallClock, clock: self, logger: logger)
    }

    /// The number of tasks sleeping on this clock now.
    public var sleeperCount: Int { state.withLock { $0.sleepers.count } }

    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try Task.checkCancellation()
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        // The handler cannot run once `withTaskCancellationHandler` has returned: forget the id then.
        defer { state.withLock { _ = $0.cancelledBeforeRegistering.remove(id) } }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let hooks = registrationHooks.withLock { $0 }
                hooks.before?()
                let outcome: Result<Void, any Error>? = state.withLock { state in
                    // Cancelled after the check above but before this registration: the handler
                    // found no sleeper to wake, so this sleeper must not wait at all.
                    if state.cancelledBeforeRegistering.remove(id) != nil { return .failure(CancellationError()) }
                    if deadline <= state.now { return .success(()) }
                    state.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
                    state.sleeperWaiters.resumeReached(state.sleepers.count)
                    return nil
                }
                hooks.after?()
                if let outcome { continuation.resume(with: outcome) }
            }
        } onCancel: {
            let sleeper = state.withLock { state -> Sleeper? in
                guard let sleeper = state.sleepers.removeValue(forKey: id) else {
                    // Not registered yet (or already woken): remembered, so it never registers.
                    state.cancelledBeforeRegistering.insert(id)
                    return nil
                }
                return sleeper
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves time forward by `duration`, waking every sleeper whose deadline has passed.
    public func advance(by duration: Duration) {
        precondition(duration >= .zero, "a clock cannot go backwards; create a new one instead")
        let woken: [Sleeper] = state.withLock { state in
            state.now = state.now.advanced(by: duration)
            let now = state.now
            let due = state.sleepers.filter { $0.value.deadline <= now }
            for id in due.keys { state.sleepers[id] = nil }
            return due.values.sorted { $0.deadline < $1.deadline }
        }
        woken.forEach { $0.continuation.resume() }
    }

    /// Suspends until at least `count` tasks are sleeping on this clock, so a test can advance time
    /// exactly when the code under test is waiting, without sleeping itself.
    public func waitForSleepers(count: Int = 1) async {
        await withCheckedContinuation { continuation in
            state.withLock { $0.sleeperWaiters.wait(for: count, current: $0.sleepers.count, continuation: continuation) }
        }
    }
}
