#if Postgres
import Foundation
import PostgresNIO
@_spi(StrataInternals) import Strata

/// The store's timeouts: how long an operation may wait for a connection and work on it, and when
/// it gives up because the database cannot be reached (the cause comes from ``PostgresConnectionWatchdog``).
extension PostgresStore {
    /// Where a lease stands, shared by the operation and its watchdog.
    enum Lease: Sendable {
        case waiting
        case leased(PostgresConnection, at: ContinuousClock.Instant)
        case finished
        case timedOut(Timeout)
    }

    enum Timeout: Error {
        /// No connection, and none of the store's other operations got one either.
        case connect
        /// No connection, while other operations did get them: the pool is busy, not unreachable.
        case busy
        /// Connected, but the operation did not finish.
        case query
    }

    /// Sleeps until the operation's deadlines and gives up on it (throwing its ``Timeout``) when it is
    /// still waiting for a connection, or still running, when they pass. Returns when it finished.
    ///
    /// - Waiting for a connection: until the store's own connection attempt (``PostgresConnectionWatchdog``,
    ///   after ``PostgresConnectionWatchdog/probeDelay``, when the store knows its TLS mode) fails
    ///   (refused, credentials rejected, no such database, TLS) or ``connectTimeout`` passes, or, while other operations of this store
    ///   keep getting connections (a busy pool, not a dead database), until ``queryTimeout`` or
    ///   ``connectTimeout``, whichever is later.
    /// - Connected: ``queryTimeout`` from the moment the connection was leased.
    func watch(_ lease: Locked<Lease>, started: ContinuousClock.Instant) async throws {
        let connectDeadline = started + connectTimeout
        let busyDeadline = started + max(connectTimeout, queryTimeout)
        while true {
            let now = ContinuousClock.now
            let poolIsAlive = progressed(since: started)
            let refused = watchdog.failure(since: started) != nil
            let (next, timeout, stuck): (ContinuousClock.Instant?, Timeout?, PostgresConnection?) = lease.withLock { lease in
                switch lease {
                case .waiting where (refused || now >= connectDeadline) && !poolIsAlive:
                    lease = .timedOut(.connect)
                    return (nil, .connect, nil)
                case .waiting where now >= busyDeadline:
                    lease = .timedOut(.busy)
                    return (nil, .busy, nil)
                case .waiting:
                    return (now < connectDeadline ? connectDeadline : busyDeadline, nil, nil)
                case .leased(let connection, let leasedAt) where now >= leasedAt + self.queryTimeout:
                    lease = .timedOut(.query)
                    return (nil, .query, connection)
                case .leased(_, let leasedAt):
                    return (leasedAt + self.queryTimeout, nil, nil)
                case .finished, .timedOut:
                    return (nil, nil, nil)
                }
            }
            // Queries are not cancellable; closing the connection fails the one in flight.
            if let stuck { try? await stuck.close() }
            if let timeout { throw timeout }
            guard let next else { return }
            if refused || poolIsAlive || !watchdog.canProbe || watchdog.hasAnswered(since: started)
                || lease.withLock({ if case .waiting = $0 { false } else { true } })
            {
                try await Task.sleep(until: next)
            } else {
                // Still waiting on a pool that has not connected yet: after a moment, connect once
                // directly, and wake as soon as that attempt answers.
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await Task.sleep(until: next) }
                    group.addTask {
                        try await Task.sleep(until: started + PostgresConnectionWatchdog.probeDelay)
                        self.watchdog.probeIfNeeded(since: started)
                        await self.watchdog.waitForAnswer(since: started)
                    }
                    try await group.next()
                    group.cancelAll()
                }
            }
        }
    }

    /// Records that a connection was just leased, or served an operation: the database is reachable.
    func noteProgress() {
        let now = ContinuousClock.now
        state.withLock { $0.lastProgress = now }
    }

    func progressed(since instant: ContinuousClock.Instant) -> Bool {
        state.withLock { $0.lastProgress.map { $0 >= instant } ?? false }
    }
}
#endif
