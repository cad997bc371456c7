#if Postgres
import Foundation
import Logging
import NIOCore
import PostgresNIO
@_spi(StrataInternals) import Strata

/// A lock per key that every process sharing a `PostgresStore`'s table sees, on PostgreSQL advisory
/// locks: the ``FleetLock`` of `coalescedAcrossProcesses(in:key:freshness:lock:timeout:pollInterval:)`.
///
/// ```swift
/// let shared = try PostgresStore<Feed>(url: url)
/// let fleetLock = try PostgresFleetLock(for: shared)
/// let remote = api.coalescedAcrossProcesses(in: cache, key: "feed", freshness: .maxAge(.seconds(5 * 60)), lock: fleetLock)
/// ```
///
/// - **One connection of its own**, opened directly on first use (a pooled connection goes back
///   to the pool, and a pooler in transaction mode would hand the lock to strangers). Every lock
///   the process holds is a session lock on it, taken with `pg_try_advisory_lock`: asking never
///   waits, so the connection is never blocked and one is enough for any number of keys.
/// - **A holder that dies releases by dying:** the server drops a session's advisory locks when its
///   connection ends, whether the process exited, was killed, or lost the network. A connection
///   this lock loses takes its locks with it, and a late ``unlock(_:)`` of one of them releases
///   nothing (it never releases a lock taken since).
/// - **Keys:** the lock of key `k` is the 64-bit `hashtextextended('<table>:k', 0)`: caches in other
///   tables never share a lock. Two keys whose hashes collide share one lock across processes (one
///   process waits for another's load of the other key, within its timeout; in one process both are
///   granted, as session locks are re-entrant): rare, and costs time or a load, never a wrong answer.
///   Advisory locks of other programs on the database use the same 64-bit space; give them the
///   two-integer form.
/// - A caller cancelled while its request is with the server closes the connection: a lock the
///   server grants after the caller left would have no one to release it.
/// - An operation that gets no connection within the store's ``PostgresStore/connectTimeout``, or no
///   answer within ``operationTimeout``, throws (and a late answer closes the connection): the
///   caller loads without the lock.
public final class PostgresFleetLock: FleetLock, Sendable, CustomStringConvertible {
    /// A lock this process holds.
    public struct Hold: Sendable, Hashable {
        /// The key it locks.
        public let key: String
        let token: FleetLockBook.Token
    }

    /// The prefix of every lock's name: the store's table.
    public let namespace: String
    /// How long asking for or releasing a lock may take once connected (connecting is bounded by
    /// the store's ``PostgresStore/connectTimeout``).
    public let operationTimeout: Duration
    public let description: String
    let configuration: PostgresConnection.Configuration
    let logger: Logger
    let state = Locked(State())

    struct State: Sendable {
        var book = FleetLockBook()
        /// The connection of the book's current number, once open.
        var connection: PostgresConnection?
        var connecting: Task<PostgresConnection, any Error>?
        var isShutDown = false
    }

    /// A lock for the processes sharing `store`'s table, on a connection of its own with `store`'s
    /// settings.
    ///
    /// - Parameters:
    ///   - store: the shared store: its connection settings, and its table as the namespace.
    ///   - node: this node's name, in the connection's `application_name` (`strata lock <node>`):
    ///     the store's announcing node when it has one, else a random name.
    ///   - operationTimeout: how long asking and releasing may take once connected (2 s).
    ///   - logger: where failed releases go.
    /// - Throws: `StoreError` (operation `open`) when those settings cannot be used for a
    ///   connection of its own (a client configuration whose TLS mode is not known).
    public init<Value>(
        for store: PostgresStore<Value>, node: String? = nil, operationTimeout: Duration = .seconds(2),
        logger: Logger = Logger(label: "strata.postgresfleetlock")
    ) throws(StoreError) {
        precondition(operationTimeout > .zero, "operationTimeout must be positive")
        do {
            let node = node ?? store.announcingNode ?? "node-\(UUID().uuidString.prefix(8).lowercased())"
            configuration = try store.watchdog.ownConnectionConfiguration(applicationName: "strata lock \(node)")
        } catch {
            throw StoreError(
                store: store.description, operation: .open, key: nil,
                reason: "the fleet lock cannot open a connection of its own: \(error)", underlying: error)
        }
        namespace = store.table
        self.operationTimeout = operationTimeout
        self.logger = logger
        description = "PostgresFleetLock(\(store.endpoint)/\(store.table))"
    }

    deinit {
        let (connection, connecting) = state.withLock { ($0.connection, $0.connecting) }
        if let connection { _ = connection.close() as EventLoopFuture<Void> }
        Self.closeWhenConnected(connecting)
    }

    /// How many keys this process holds.
    public var heldKeys: Int { state.withLock { $0.book.held.count } }

    public func tryLock(_ key: String) async throws -> Hold? {
        let decision = state.withLock { $0.book.tryRequested(key) }
        guard case .ask(let token, let number) = decision else { return nil }
        var granted = false
        defer {
            if !granted { _ = state.withLock { $0.book.answered(key, token: token, granted: false) } }
        }
        let name = "\(namespace):\(key)"
        let answer = try await onConnection(number) { connection, logger in
            var answer = false
            for try await value in try await connection.queryUnlessClosed(
                "SELECT pg_try_advisory_lock(hashtextextended(\(name), 0))", logger: logger
            ).decode(Bool.self) {
                answer = value
            }
            return answer
        }
        granted = true
        return state.withLock { $0.book.answered(key, token: token, granted: answer) } ? Hold(key: key, token: token) : nil
    }

    public func unlock(_ hold: Hold) async {
        let decision = state.withLock { $0.book.released(hold.key, token: hold.token) }
        guard case .unlock(let number) = decision else { return }
        let name = "\(namespace):\(hold.key)"
        // In a task of its own: a cancelled holder still releases.
        let release = Task { [self] in
            do {
                _ = try await onConnection(number) { connection, logger in
                    for try await _ in try await connection.queryUnlessClosed(
                        "SELECT pg_advisory_unlock(hashtextextended(\(name), 0))", logger: logger) {}
                    return true
                }
            } catch {
                // The connection is closed by now, and the lock went with it.
                logger.warning(
                    "a fleet lock could not be released: its connection was closed, which released it",
                    metadata: ["lock": "\(description)", "key": "\(hold.key)", "error": "\(error)"])
            }
        }
        await release.value
    }

    /// Closes the connection, releasing every lock this process holds; later calls throw.
    public func shutdown() async {
        let (connection, connecting) = state.withLock { state in
            state.isShutDown = true
            state.book.connectionLost(state.book.connection)
            defer { state.connection = nil; state.connecting = nil }
            return (state.connection, state.connecting)
        }
        Self.closeWhenConnected(connecting)
        try? await connection?.close()
    }

    /// Stops an attempt to connect that nobody waits for any more, and closes the connection if
    /// it was made all the same.
    private static func closeWhenConnected(_ attempt: Task<PostgresConnection, any Error>?) {
        guard let attempt else { return }
        attempt.cancel()
        Task { try? await attempt.value.close() }
    }

    /// Closes the connection as if the network dropped it: every lock it held is released.
    /// For tests and drills.
    public func dropConnection() async {
        let (connection, number) = state.withLock { ($0.connection, $0.book.connection) }
        lost(number)
        try? await connection?.close()
    }

    // MARK: The connection

    /// Runs `body` on connection `number` (connecting within the store's connect timeout if it is
    /// not open) within ``operationTimeout``; on a failure or a timeout the connection is closed
    /// (its locks go with it) and the error thrown.
    private func onConnection<T: Sendable>(
        _ number: UInt64, _ body: @escaping @Sendable (PostgresConnection, Logger) async throws -> T
    ) async throws -> T {
        let logger = logger
        let timeout = operationTimeout
        // Connecting is bounded by the store's connect timeout; the statement by the operation's.
        let connection = try await connection(number)
        // Raced, not in a task group: PostgresNIO never answers a statement written to a connection
        // that closed meanwhile (and does not end one on cancellation), and a group would wait for it.
        let outcome = await raceAgainstDeadline(clock: ContinuousClock(), duration: timeout) {
            try await body(connection, logger)
        }
        switch outcome {
        case .value(.success(let value)):
            return value
        case .value(.failure(let error)):
            lost(number)
            try? await connection.close()
            throw error
        case .cancelled:
            // The caller was cancelled while the statement ran: the server may grant a lock nobody
            // will release. Closing the connection releases whatever it holds (and ends the
            // statement).
            lost(number)
            try? await connection.close()
            throw CancellationError()
        case .deadline:
            lost(number)
            try? await connection.close()
            throw PostgresFleetLockError.noAnswer(within: timeout)
        }
    }

    /// The open connection of number `number`, connecting if none is.
    private func connection(_ number: UInt64) async throws -> PostgresConnection {
        enum Next { case ready(PostgresConnection), wait(Task<PostgresConnection, any Error>) }
        let next: Next = try state.withLock { state in
            guard !state.isShutDown else { throw PostgresFleetLockError.shutDown }
            guard number == state.book.connection else { throw PostgresFleetLockError.connectionLost }
            if let connection = state.connection { return .ready(connection) }
            if let connecting = state.connecting { return .wait(connecting) }
            let configuration = configuration
            let logger = logger
            let connecting = Task {
                try await PostgresConnection.connect(configuration: configuration, id: Int(number), logger: logger)
            }
            state.connecting = connecting
            return .wait(connecting)
        }
        switch next {
        case .ready(let connection):
            return connection
        case .wait(let connecting):
            do {
                let connection = try await Self.value(of: connecting)
                let kept = state.withLock { state -> Bool in
                    if state.connecting == connecting { state.connecting = nil }
                    guard !state.isShutDown, number == state.book.connection else { return false }
                    if state.connection == nil { state.connection = connection }
                    return state.connection === connection
                }
                guard kept else {
                    try? await connection.close()
                    throw PostgresFleetLockError.connectionLost
                }
                // The server closing it (or the network) ends its locks.
                connection.closeFuture.whenComplete { [weak self] _ in self?.lost(number) }
                return connection
            } catch {
                state.withLock { state in
                    if state.connecting == connecting { state.connecting = nil }
                }
                throw error
            }
        }
    }

    /// The value of a connection attempt other callers may share, or `CancellationError` as soon as
    /// this caller is cancelled (the attempt goes on for the others).
    private static func value(of attempt: Task<PostgresConnection, any Error>) async throws -> PostgresConnection {
        enum Waiter { case none, waiting(CheckedContinuation<PostgresConnection, any Error>), done }
        let waiter = Locked(Waiter.none)
        let finish: @Sendable (Result<PostgresConnection, any Error>) -> Void = { result in
            let continuation = waiter.withLock { waiter -> CheckedContinuation<PostgresConnection, any Error>? in
                defer { waiter = .done }
                if case .waiting(let continuation) = waiter { return continuation }
                return nil
            }
            continuation?.resume(with: result)
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let cancelledAlready = waiter.withLock { waiter -> Bool in
                    guard case .none = waiter else { return true }
                    waiter = .waiting(continuation)
                    return false
                }
                if cancelledAlready {
                    continuation.resume(throwing: CancellationError())
                    return
                }
                Task { finish(await attempt.result) }
            }
        } onCancel: {
            finish(.failure(CancellationError()))
        }
    }

    /// Connection `number` is gone.
    private func lost(_ number: UInt64) {
        state.withLock { state in
            guard number == state.book.connection else { return }
            state.book.connectionLost(number)
            state.connection = nil
        }
    }
}

/// Why a ``PostgresFleetLock`` could not answer.
public enum PostgresFleetLockError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The database did not answer within the lock's operation timeout.
    case noAnswer(within: Duration)
    /// The connection the request was made on was lost meanwhile.
    case connectionLost
    /// ``PostgresFleetLock/shutdown()`` was called.
    case shutDown

    public var description: String {
        switch self {
        case .noAnswer(let within): "the database did not answer the fleet lock within \(within)"
        case .connectionLost: "the fleet lock's connection was lost"
        case .shutDown: "the fleet lock was shut down"
        }
    }
}
#endif
