import Foundation

/// One process's turn at a key of a ``FleetLock``: the loop that ``CoalescedAcrossProcessesLoader``
/// runs for each load, for other code that must fetch a key once per fleet with rules of its own
/// for what it reads back (`strata proxy`, whose stored responses answer per request).
///
/// 1. Try the lock without waiting. A lock that cannot be asked: `work` without it.
/// 2. Held: `readBack` once more (another process may have stored the key just before); its
///    answer, else `work`; the lock is released afterwards, also when `work` fails or is cancelled.
/// 3. Held elsewhere: wait `pollInterval`, `readBack`, try the lock again, until `timeout` after
///    the start (asking the lock and reading count too), then `work` anyway: the lock is about
///    efficiency, never correctness.
///
/// The wait honours cancellation (it throws `CancellationError`), on `clock`.
@_spi(StrataInternals)
public struct FleetLockTurn<Lock: FleetLock, C: Clock>: Sendable where C.Duration == Duration {
    /// What happened while it took its turn, for the caller's log and figures.
    public enum Event: Sendable {
        /// The lock could not be asked; `work` ran without it.
        case lockUnavailable(any Error)
        /// Another process held the lock: this one began to wait.
        case waiting
        /// The wait ended: after `waited`, with `outcome`.
        case waited(Duration, FleetLockWait)
        /// This process took the lock without waiting.
        case acquiredAtOnce
    }

    public let lock: Lock
    public let clock: C
    public let timeout: Duration
    public let pollInterval: Duration

    public init(lock: Lock, clock: C, timeout: Duration, pollInterval: Duration) {
        precondition(timeout >= .zero, "FleetLockTurn: timeout must not be negative")
        precondition(pollInterval > .zero, "FleetLockTurn: pollInterval must be positive")
        self.lock = lock
        self.clock = clock
        self.timeout = timeout
        self.pollInterval = pollInterval
    }

    /// Takes `name`'s turn: the answer `readBack` found, or `work`'s.
    public func run<T: Sendable>(
        _ name: String, readBack: () async -> T?, work: () async throws -> T, event: (Event) -> Void = { _ in }
    ) async throws -> T {
        let deadline = clock.now.advanced(by: timeout)
        var waitingSince: C.Instant?
        func waited(_ outcome: FleetLockWait) {
            if let waitingSince { event(.waited(waitingSince.duration(to: clock.now), outcome)) }
        }
        while true {
            let hold: Lock.Hold?
            do {
                hold = try await lock.tryLock(name)
            } catch {
                try rethrowIfCancelled(error)
                event(.lockUnavailable(error))
                return try await work()
            }
            if let hold {
                do {
                    let value: T
                    if let stored = await readBack() {
                        waited(.filledByHolder)
                        value = stored
                    } else {
                        if waitingSince == nil { event(.acquiredAtOnce) } else { waited(.acquired) }
                        value = try await work()
                    }
                    await lock.unlock(hold)
                    return value
                } catch {
                    await lock.unlock(hold)
                    throw error
                }
            }
            if waitingSince == nil {
                waitingSince = clock.now
                event(.waiting)
            }
            let left = clock.now.duration(to: deadline)
            guard left > .zero else {
                waited(.timedOut)
                return try await work()
            }
            try await clock.sleep(until: clock.now.advanced(by: min(pollInterval, left)), tolerance: nil)
            if let stored = await readBack() {
                waited(.filledByHolder)
                return stored
            }
        }
    }
}
