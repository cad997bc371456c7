import Foundation
@_spi(StrataInternals) import Strata

/// The demo's simulated time: a day passes when a scenario says "a day later", in no real time.
///
/// It is both the wall clock the caches read (``date``, ``dates``) and a `Clock` the timeout and the
/// circuit breaker wait on. Only what the shipped demo needs: the scenarios move time forward with
/// ``skip(_:)``, and the resilience scenario first waits, with ``untilSomeoneWaits()``, for the
/// timeout to start waiting, so skipping the 2 s really passes its deadline.
final class DemoClock: Clock, Sendable {
    /// A moment of simulated time, counted from the start of the demo.
    struct Instant: InstantProtocol, Sendable, Hashable, Comparable {
        let sinceStart: Duration

        func advanced(by duration: Duration) -> Instant { Instant(sinceStart: sinceStart + duration) }
        func duration(to other: Instant) -> Duration { other.sinceStart - sinceStart }
        static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.sinceStart < rhs.sinceStart }
    }

    /// A task sleeping on the clock until `wakeAt`.
    private struct Waiting {
        let token: UInt64
        let wakeAt: Instant
        let resume: CheckedContinuation<Void, any Error>
    }

    private struct Timeline {
        var elapsed = Duration.zero
        var waiting: [Waiting] = []
        var lastToken: UInt64 = 0
        /// The scenario, parked in ``untilSomeoneWaits()`` until a task sleeps.
        var watchers: [CheckedContinuation<Void, Never>] = []
    }

    private let startedAt: Date
    private let timeline = Locked(Timeline())

    /// A clock whose wall time starts at `date` (the real time the demo started, by default).
    init(startingAt date: Date = Date()) {
        startedAt = date
    }

    var now: Instant { Instant(sinceStart: timeline.withLock { $0.elapsed }) }
    var minimumResolution: Duration { .zero }

    /// The simulated wall-clock time.
    var date: Date { startedAt.addingTimeInterval(timeline.withLock { $0.elapsed } / .seconds(1)) }

    /// ``date`` as a function, for the `now:` parameters of stores and caches.
    var dates: @Sendable () -> Date { { self.date } }

    func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        let token = timeline.withLock { timeline -> UInt64 in
            timeline.lastToken += 1
            return timeline.lastToken
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (resume: CheckedContinuation<Void, any Error>) in
                enum Now { case wake, cancel, wait([CheckedContinuation<Void, Never>]) }
                // Cancellation is checked under the lock: a cancel landing after this check finds the
                // sleeper registered and wakes it in the handler below.
                let now: Now = timeline.withLock { timeline in
                    if Task.isCancelled { return .cancel }
                    if deadline.sinceStart <= timeline.elapsed { return .wake }
                    timeline.waiting.append(Waiting(token: token, wakeAt: deadline, resume: resume))
                    let watchers = timeline.watchers
                    timeline.watchers = []
                    return .wait(watchers)
                }
                switch now {
                case .wake: resume.resume()
                case .cancel: resume.resume(throwing: CancellationError())
                case .wait(let watchers): for watcher in watchers { watcher.resume() }
                }
            }
        } onCancel: {
            let cancelled = timeline.withLock { timeline -> Waiting? in
                guard let index = timeline.waiting.firstIndex(where: { $0.token == token }) else { return nil }
                return timeline.waiting.remove(at: index)
            }
            cancelled?.resume.resume(throwing: CancellationError())
        }
    }

    /// Moves simulated time forward by `duration`, waking the tasks whose deadline it passes.
    func skip(_ duration: Duration) {
        let due = timeline.withLock { timeline -> [Waiting] in
            timeline.elapsed += duration
            let elapsed = timeline.elapsed
            let (due, still) = (timeline.waiting.filter { $0.wakeAt.sinceStart <= elapsed },
                                timeline.waiting.filter { $0.wakeAt.sinceStart > elapsed })
            timeline.waiting = still
            return due
        }
        for sleeper in due { sleeper.resume.resume() }
    }

    /// Returns once some task is sleeping on the clock (at once if one already is).
    func untilSomeoneWaits() async {
        await withCheckedContinuation { (watcher: CheckedContinuation<Void, Never>) in
            let alreadyWaiting = timeline.withLock { timeline -> Bool in
                if !timeline.waiting.isEmpty { return true }
                timeline.watchers.append(watcher)
                return false
            }
            if alreadyWaiting { watcher.resume() }
        }
    }
}
