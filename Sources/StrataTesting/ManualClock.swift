import Foundation
import Logging
@_spi(StrataInternals) import Strata

/// A clock that moves only when a test says so: both a `Clock` (for waiting: backoff, timeouts) and a
/// wall clock (``date`` / ``wallClock``, for timestamps and freshness checks), advanced together.
///
/// ```swift
/// let clock = ManualClock()
/// let fresh = store.loader(key: "feed", freshness: .maxAge(.seconds(24 * 3600)), now: clock.wallClock)
/// clock.advance(by: .seconds(24 * 3600))   // exactly at max age: expired
/// ```
/// Sleepers wake when ``advance(by:)`` passes their deadline, or throw `CancellationError` when their
/// task is cancelled. Nothing ever waits for real time, except ``waitForSleepers(count:timeout:matching:)``
/// when given a `timeout`, which is a bound on how long a test waits, not a time the clock keeps.
public final class ManualClock: Clock, Sendable {
    /// A point on the manual clock: the time elapsed since it was created.
    public struct Instant: InstantProtocol, Sendable, Hashable, Comparable {
        public var offset: Duration

        public init(offset: Duration) { self.offset = offset }

        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    /// A task sleeping on the clock, as ``sleepers`` and ``waitForSleepers(count:timeout:matching:)`` see
    /// it: enough to tell the sleep under test from another component's timer on the same clock.
    public struct Sleeper: Sendable, Hashable, CustomStringConvertible {
        /// When it wakes.
        public var deadline: Instant
        /// When it went to sleep (its deadline minus this is the duration it asked for).
        public var since: Instant
        /// The ``ManualClock/sleeperLabel`` bound in its task when it went to sleep.
        public var label: String?

        public init(deadline: Instant, since: Instant, label: String? = nil) {
            self.deadline = deadline
            self.since = since
            self.label = label
        }

        /// `30.0 seconds`, or `30.0 seconds "retry"` when labelled: its deadline (and label).
        public var description: String {
            "\(deadline.offset)" + (label.map { " \"\($0)\"" } ?? "")
        }
    }

    /// A label for every sleep started in this task (and the tasks it starts) while bound, so a test
    /// can wait for its own sleeper and not another component's timer on the same clock:
    ///
    /// ```swift
    /// let load = Task { try await ManualClock.$sleeperLabel.withValue("retry") { try await sut.load() } }
    /// try await clock.waitForSleepers { $0.label == "retry" }
    /// ```
    @TaskLocal public static var sleeperLabel: String?

    private struct Registered {
        var sleeper: Sleeper
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now = Instant(offset: .zero)
        var sleepers: [UInt64: Registered] = [:]
        var nextID: UInt64 = 0
        /// Sleepers whose task was cancelled before they registered: they must not register.
        var cancelledBeforeRegistering: Set<UInt64> = []
        /// The waits of ``ManualClock/waitForSleepers(count:timeout:matching:)``: each is handed the
        /// sleepers after every change, in order, and checks them outside the lock (its predicate is
        /// the test's code, which may read the clock).
        var watchers: [UInt64: AsyncStream<[Sleeper]>.Continuation] = [:]

        /// The sleepers by deadline (then by when they registered).
        var sorted: [Sleeper] {
            sleepers.sorted { ($0.value.sleeper.deadline, $0.key) < ($1.value.sleeper.deadline, $1.key) }.map(\.value.sleeper)
        }

        /// The sleepers after a change, and the watchers there were then.
        typealias SleepersChange = (sleepers: [Sleeper], watchers: [AsyncStream<[Sleeper]>.Continuation])

        /// The sleepers after each change, with the watchers there were, not yet handed to them.
        /// They are handed over after the lock, by one thread at a time, in order (``announce(_:)``):
        /// a yield resumes a watching task, which takes the runtime's lock of that task, and that
        /// task's cancellation, holding it, may cancel a child sleeping here, whose handler takes
        /// this lock.
        var changes: [SleepersChange] = []
        var announcing = false

        /// A sleeper came or went: every watcher is to get the sleepers now.
        mutating func sleepersChanged() {
            guard !watchers.isEmpty else { return }
            changes.append((sorted, Array(watchers.values)))
        }

        /// The changes for the caller to hand over after the lock, unless another thread is
        /// handing some over (it takes these too, after its own).
        mutating func takeChanges() -> [SleepersChange] {
            guard !announcing, !changes.isEmpty else { return [] }
            announcing = true
            defer { changes = [] }
            return changes
        }
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
    /// let chain = remote.retrying(.exponential(attempts: 3)).writingThrough(in: store, key: "k")
    ///     .environment(clock.environment(logger: capture.logger))
    /// ```
    public func environment(logger: Logger = LoadEnvironment.defaultLogger) -> LoadEnvironment {
        LoadEnvironment(now: wallClock, clock: self, logger: logger)
    }

    /// The number of tasks sleeping on this clock now.
    public var sleeperCount: Int { state.withLock { $0.sleepers.count } }

    /// The tasks sleeping on this clock now, by deadline.
    public var sleepers: [Sleeper] { state.withLock { $0.sorted } }

    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try Task.checkCancellation()
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        let label = Self.sleeperLabel
        // The handler cannot run once `withTaskCancellationHandler` has returned: forget the id then.
        defer { state.withLock { _ = $0.cancelledBeforeRegistering.remove(id) } }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let hooks = registrationHooks.withLock { $0 }
                hooks.before?()
                let (outcome, changes) = state.withLock { state -> (Result<Void, any Error>?, [State.SleepersChange]) in
                    // Cancelled after the check above but before this registration: the handler
                    // found no sleeper to wake, so this sleeper must not wait at all.
                    if state.cancelledBeforeRegistering.remove(id) != nil { return (.failure(CancellationError()), []) }
                    if deadline <= state.now { return (.success(()), []) }
                    let sleeper = Sleeper(deadline: deadline, since: state.now, label: label)
                    state.sleepers[id] = Registered(sleeper: sleeper, continuation: continuation)
                    state.sleepersChanged()
                    return (nil, state.takeChanges())
                }
                announce(changes)
                hooks.after?()
                if let outcome { continuation.resume(with: outcome) }
            }
        } onCancel: {
            let (sleeper, changes) = state.withLock { state -> (Registered?, [State.SleepersChange]) in
                guard let sleeper = state.sleepers.removeValue(forKey: id) else {
                    // Not registered yet (or already woken): remembered, so it never registers.
                    state.cancelledBeforeRegistering.insert(id)
                    return (nil, [])
                }
                state.sleepersChanged()
                return (sleeper, state.takeChanges())
            }
            sleeper?.continuation.resume(throwing: CancellationError())
            announce(changes)
        }
    }

    /// Moves time forward by `duration`, waking every sleeper whose deadline has passed.
    public func advance(by duration: Duration) {
        precondition(duration >= .zero, "a clock cannot go backwards; create a new one instead")
        let (woken, changes) = state.withLock { state in
            state.now = state.now.advanced(by: duration)
            let now = state.now
            let due = state.sleepers.filter { $0.value.sleeper.deadline <= now }
            for id in due.keys { state.sleepers[id] = nil }
            if !due.isEmpty { state.sleepersChanged() }
            return (due.values.sorted { $0.sleeper.deadline < $1.sleeper.deadline }, state.takeChanges())
        }
        woken.forEach { $0.continuation.resume() }
        announce(changes)
    }

    /// Hands `first` to their watchers, outside the lock, then whatever was queued meanwhile,
    /// until nothing is left.
    private func announce(_ first: [State.SleepersChange]) {
        var batch = first
        while !batch.isEmpty {
            for change in batch {
                for watcher in change.watchers { watcher.yield(change.sleepers) }
            }
            batch = state.withLock { state in
                guard !state.changes.isEmpty else {
                    state.announcing = false
                    return []
                }
                defer { state.changes = [] }
                return state.changes
            }
        }
    }

    /// Suspends until at least `count` tasks sleep on this clock (that `matching` accepts, when
    /// given), so a test can advance time exactly when the code under test is waiting, without
    /// sleeping itself.
    ///
    /// ```swift
    /// try await clock.waitForSleepers(count: 2)
    /// // Only the retry's backoff, not the outbox's own timer sleeping on the same clock:
    /// try await clock.waitForSleepers(timeout: .seconds(5)) { $0.deadline == clock.now.advanced(by: .seconds(1)) }
    /// ```
    /// - Parameters:
    ///   - count: how many sleepers (that `matching` accepts) to wait for.
    ///   - timeout: the longest to wait, in real time (`ContinuousClock`: this clock only moves when
    ///     told). `nil` waits until the sleepers come or the task is cancelled (a Swift Testing
    ///     `.timeLimit` cancels it).
    ///   - matching: which sleepers count: by ``Sleeper/deadline``, ``Sleeper/label`` (see
    ///     ``sleeperLabel``)…; every sleeper when `nil`.
    /// - Throws: `CancellationError` as soon as the waiting task is cancelled; ``Strata/WaitTimeoutError``
    ///   when `timeout` passes first, naming the sleepers there were, e.g. `waited 5.0 seconds for 2
    ///   sleepers on ManualClock, saw 1 (now 0.0 seconds; sleeping until: 30.0 seconds)`.
    public func waitForSleepers(
        count: Int = 1, timeout: Duration? = nil, matching: (@Sendable (Sleeper) -> Bool)? = nil
    ) async throws {
        // A wait cancelled before it began throws, even when the sleepers are already there: the
        // first state it reads could satisfy it, and a cancelled caller must not see "done".
        try Task.checkCancellation()
        let satisfied: @Sendable ([Sleeper]) -> Bool = { sleepers in
            guard let matching else { return sleepers.count >= count }
            return sleepers.lazy.filter(matching).count >= count
        }
        try await withWaitTimeout(timeout) { [state] in
            // Every state of the sleepers from now on, in order, so none is missed between checks.
            let (states, watcher) = AsyncStream.makeStream(of: [Sleeper].self, bufferingPolicy: .unbounded)
            let id = state.withLock { state -> UInt64 in
                state.nextID += 1
                state.watchers[state.nextID] = watcher
                watcher.yield(state.sorted)
                return state.nextID
            }
            defer {
                state.withLock { _ = $0.watchers.removeValue(forKey: id) }
                watcher.finish()
            }
            // The stream ends (`nil`) only when the task is cancelled.
            for await sleepers in states where satisfied(sleepers) { return }
            throw CancellationError()
        } timedOut: { timeout in
            let (sleepers, now) = state.withLock { ($0.sorted, $0.now) }
            if satisfied(sleepers) { return nil }
            let seen = matching.map { sleepers.filter($0).count } ?? sleepers.count
            let list = sleepers.isEmpty ? "none" : sleepers.map { sleeper in
                "\(sleeper)" + (matching.map { $0(sleeper) ? "" : " (not matching)" } ?? "")
            }.joined(separator: ", ")
            return WaitTimeoutError(
                awaited: "\(count) sleeper\(count == 1 ? "" : "s")\(matching == nil ? "" : " matching the predicate") on ManualClock",
                observed: "\(seen) (now \(now.offset); sleeping until: \(list))",
                timeout: timeout)
        }
    }
}
