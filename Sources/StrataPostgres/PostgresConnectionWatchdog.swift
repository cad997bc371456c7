#if Postgres
import Foundation
import Logging
import PostgresNIO
@_spi(StrataInternals) import Strata

extension PostgresStore {
    /// An operation racing its watchdog: who answered, and the two tasks to stop.
    struct Race: Sendable {
        var answered = false
        var cancelled = false
        var tasks: [Task<Void, Never>] = []
    }

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

    /// Runs `body` on a pooled connection (creating the table first, once), and turns every failure
    /// into a `StoreError`.
    ///
    /// A watchdog (``watch(_:started:)``) bounds both the wait for a connection and the work on it.
    func perform<T: Sendable>(
        _ operation: StoreError.Operation,
        key: String?,
        _ body: @escaping @Sendable (PostgresConnection, Logger) async throws -> T
    ) async throws -> T {
        if state.withLock({ $0.isShutDown }) {
            throw StoreError(store: description, operation: operation, key: key, reason: "the store was shut down")
        }
        let started = ContinuousClock.now
        let lease = Locked(Lease.waiting)
        do {
            // The operation and its watchdog race; the first to finish answers. The operation runs in
            // a task of its own that the call does not wait for once the watchdog has given up:
            // PostgresNIO's pool does not always let go of a lease it cannot serve (seen under load
            // after the watchdog closed a connection under a running query), and the store's bound
            // must not depend on it. The abandoned operation is cancelled and its connection closed.
            let race = Locked(Race())
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
                    let answer: @Sendable (Result<T, any Error>) -> Void = { result in
                        let (first, tasks) = race.withLock { race in
                            defer { race.answered = true }
                            return (!race.answered, race.tasks)
                        }
                        guard first else { return }
                        for task in tasks { task.cancel() }  // the other side, no longer needed
                        continuation.resume(with: result)
                    }
                    let operation = Task {
                        do {
                            answer(.success(try await self.client.withConnection { connection in
                                let proceed = lease.withLock { lease in
                                    guard case .waiting = lease else { return false }
                                    lease = .leased(connection, at: .now)
                                    return true
                                }
                                guard proceed else { throw CancellationError() }
                                self.noteProgress()
                                defer {
                                    lease.withLock { lease in
                                        if case .leased = lease { lease = .finished }
                                    }
                                }
                                try await self.prepareTable(on: connection)
                                let result = try await body(connection, self.logger)
                                self.noteProgress()
                                return result
                            }))
                        } catch {
                            answer(.failure(error))
                        }
                    }
                    let watchdog = Task {
                        do {
                            try await self.watch(lease, started: started)
                        } catch is CancellationError {
                            // The operation answered first (this is then a no-op), or the caller
                            // was cancelled: answer at once, whatever the pool does with the lease.
                            answer(.failure(CancellationError()))
                        } catch {
                            answer(.failure(error))
                        }
                    }
                    let cancelNow = race.withLock { race in
                        race.tasks = [operation, watchdog]
                        return race.cancelled || race.answered
                    }
                    if cancelNow {
                        operation.cancel()
                        watchdog.cancel()
                    }
                }
            } onCancel: {
                let tasks = race.withLock { race in
                    race.cancelled = true
                    return race.tasks
                }
                for task in tasks { task.cancel() }
            }
        } catch {
            // Once the watchdog gave up, whatever the operation threw (a closed connection, a
            // cancelled lease) is a consequence; the timeout is the story.
            let timeout: Timeout? = lease.withLock { lease in
                if case .timedOut(let timeout) = lease { return timeout }
                return nil
            }
            throw storeError(operation, key: key, timeout ?? error, since: started)
        }
    }

    /// Sleeps until the operation's deadlines and gives up on it (throwing its ``Timeout``) when it is
    /// still waiting for a connection, or still running, when they pass. Returns when it finished.
    ///
    /// - Waiting for a connection: after ``ConnectionProbe/grace`` without a connection (and while
    ///   the pool has not connected for anyone since), the store's ``ConnectionProbe`` asks the
    ///   database directly. A conclusive failure (refused, unreachable, credentials or database
    ///   rejected) ends the wait at once; otherwise the wait lasts until ``connectTimeout``, or, while
    ///   other operations of this store keep getting connections (a busy pool, not a dead database),
    ///   until ``queryTimeout`` or ``connectTimeout``, whichever is later.
    /// - Connected: ``queryTimeout`` from the moment the connection was leased.
    func watch(_ lease: Locked<Lease>, started: ContinuousClock.Instant) async throws {
        let connectDeadline = started + connectTimeout
        let busyDeadline = started + max(connectTimeout, queryTimeout)
        let probeAt = started + min(ConnectionProbe.grace, connectTimeout / 4)
        // A failure a probe found just before this operation started still stands.
        let failuresSince = started - ConnectionProbe.reuse
        var probed = false
        while true {
            let now = ContinuousClock.now
            let poolIsAlive = progressed(since: started)
            let refused = probe.failure(since: failuresSince) != nil
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
            let waiting = lease.withLock { if case .waiting = $0 { true } else { false } }
            guard waiting, !poolIsAlive, !refused, !probed else {
                try await Task.sleep(until: next)
                continue
            }
            if now < probeAt {
                try await Task.sleep(until: min(probeAt, next))
                continue
            }
            // Still no connection, and the pool has connected for nobody since this began: ask the
            // database why, and wake as soon as the probe knows (or at the next deadline).
            probed = true
            probe.start()
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await Task.sleep(until: next) }
                group.addTask { await self.probe.waitForOutcome(since: now) }
                try await group.next()
                group.cancelAll()
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

/// Asks the database directly why the pool cannot connect: one connection of its own
/// (`PostgresConnection.connect`), whose typed `PSQLError` says what the pool's would have. At most one
/// probe runs at a time per store; operations waiting for a connection share its outcome.
///
/// A **conclusive** failure is one the database (or the network) gave: connection refused, host
/// unreachable, name not resolved; credentials rejected (SQLSTATE 28P01, 28000); the database missing
/// (3D000); the server not accepting connections (57P03, 53300). Anything else (a timeout, a TLS
/// setup the probe cannot repeat) is inconclusive and changes nothing: operations then fail on their
/// connect timeout. The probe's connection is closed at once when it succeeds.
final class ConnectionProbe: Sendable {
    /// How long an operation waits for a connection before the store probes.
    static var grace: Duration { .milliseconds(250) }
    /// How long a conclusive failure stands for operations that start after it.
    static var reuse: Duration { .seconds(1) }

    private struct State: Sendable {
        var failure: (reason: String, at: ContinuousClock.Instant)?
        var running = false
        var lastOutcomeAt: ContinuousClock.Instant?
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var cancelled: Set<UInt64> = []
        var nextID: UInt64 = 0
    }

    private let configuration: PostgresConnection.Configuration?
    private let logger: Logger
    private let state = Locked(State())

    /// - Parameters:
    ///   - configuration: how to connect; `nil` disables probing (operations fail on their timeout).
    ///   - connectTimeout: the probe's own connect timeout.
    init(configuration: PostgresConnection.Configuration?, connectTimeout: Duration, logger: Logger) {
        var configuration = configuration
        configuration?.options.connectTimeout = TimeAmount.nanoseconds(
            Int64(connectTimeout.components.seconds) * 1_000_000_000 + connectTimeout.components.attoseconds / 1_000_000_000)
        self.configuration = configuration
        self.logger = logger
    }

    /// A probe configuration for a client's: the same server, user, password and database, with TLS
    /// preferred (the client's own TLS setting cannot be read back). `nil` when no TLS context can
    /// be made here.
    static func configuration(from client: PostgresClient.Configuration) -> PostgresConnection.Configuration? {
        if let socket = client.unixSocketPath {
            return PostgresConnection.Configuration(
                unixSocketPath: socket, username: client.username, password: client.password, database: client.database)
        }
        guard let host = client.host, let context = try? NIOSSLContext(configuration: .makeClientConfiguration()) else {
            return nil
        }
        return PostgresConnection.Configuration(
            host: host, port: client.port ?? 5432, username: client.username, password: client.password,
            database: client.database, tls: .prefer(context))
    }

    /// The conclusive failure a probe found at or after `instant`, in words.
    func failure(since instant: ContinuousClock.Instant) -> String? {
        state.withLock { state in
            guard let failure = state.failure, failure.at >= instant else { return nil }
            return failure.reason
        }
    }

    /// Starts a probe unless one is running.
    func start() {
        guard let configuration else { return }
        let starts = state.withLock { state -> Bool in
            if state.running { return false }
            state.running = true
            return true
        }
        guard starts else { return }
        let logger = logger
        Task {
            var reason: String?
            do {
                let connection = try await PostgresConnection.connect(
                    configuration: configuration, id: 0, logger: logger)
                try? await connection.close()
            } catch {
                reason = Self.conclusiveReason(error)
                logger.debug(
                    "connection probe failed", metadata: ["conclusive": "\(reason != nil)", "error": "\(Self.summary(of: error))"])
            }
            let now = ContinuousClock.now
            let waiters = state.withLock { state in
                state.running = false
                state.lastOutcomeAt = now
                if let reason { state.failure = (reason, now) }
                defer { state.waiters = [:] }
                return Array(state.waiters.values)
            }
            for waiter in waiters { waiter.resume() }
        }
    }

    /// Returns once a probe has finished at or after `instant` (at once if one has), or when the
    /// calling task is cancelled.
    func waitForOutcome(since instant: ContinuousClock.Instant) async {
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state in
                    if let last = state.lastOutcomeAt, last >= instant { return true }
                    if state.cancelled.remove(id) != nil { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { state in
                let waiter = state.waiters.removeValue(forKey: id)
                // Cancelled before it started waiting: it must not start.
                if waiter == nil { state.cancelled.insert(id) }
                return waiter
            }
            waiter?.resume()
        }
        state.withLock { _ = $0.cancelled.remove(id) }
    }

    /// The reason a failed probe gives, when the failure says the database cannot be used; `nil` when
    /// it does not decide (a timeout, TLS, anything unexpected).
    static func conclusiveReason(_ error: any Error) -> String? {
        guard let error = error as? PSQLError else { return nil }
        switch error.code {
        case .server:
            guard let sqlState = error.serverInfo?[.sqlState],
                  ["28P01", "28000", "3D000", "57P03", "53300"].contains(sqlState) else { return nil }
            let message = error.serverInfo?[.message] ?? "server refused the connection"
            return "\(message) (SQLSTATE \(sqlState))"
        case .connectionError:
            guard let underlying = error.underlying else { return nil }
            if let channelError = underlying as? ChannelError, case .connectTimeout = channelError { return nil }
            return "\(underlying)"
        default:
            return nil
        }
    }

    /// An error in a few words for the debug log, never with a query or its bind values.
    static func summary(of error: any Error) -> String {
        guard let error = error as? PSQLError else { return "\(error)" }
        if let message = error.serverInfo?[.message] { return message }
        return "\(error.code)" + (error.underlying.map { ": \($0)" } ?? "")
    }
}

/// The connection pool's background logger: forwards the pool's messages to the store's logger, its
/// routine ones (`info`, `notice`: each failed connection attempt, retried with backoff) demoted to
/// `debug`. The store reports failures through its errors.
struct DemotingLogHandler: LogHandler {
    var forward: Logger
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level

    init(forward: Logger) {
        self.forward = forward
        self.logLevel = forward.logLevel
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let level = event.level <= .notice ? min(event.level, .debug) : event.level
        guard level >= forward.logLevel else { return }
        let merged = metadata.merging(event.metadata ?? [:]) { _, new in new }
        forward.log(
            level: level, event.message, metadata: merged, source: event.source,
            file: event.file, function: event.function, line: event.line)
    }
}
#endif
