#if Postgres
import Foundation
import Logging
import NIOCore
import PostgresNIO
@_spi(StrataInternals) import Strata

/// The nodes of a fleet hearing each other's cache writes through PostgreSQL's `LISTEN/NOTIFY`, on
/// the database that holds their shared `PostgresStore`; give it to a `TieredStore`.
///
/// ```swift
/// let shared = try PostgresStore<Feed>(url: url)
/// let backplane = try PostgresBackplane(announcingFor: shared)
/// let cache = TieredStore(memory: MemoryStore(countLimit: 10_000), shared: shared, backplane: backplane)
/// ```
///
/// - **Sending:** making a backplane for a store turns on the store's announcements
///   (``PostgresStore/announceChanges(as:)``): each insert, re-stamp, delete and clear sends a slim
///   notification (key, action, time, sender; never the value) in the same statement as the write,
///   so it is delivered only if the write commits.
/// - **Listening:** one connection of its own, opened directly (not from the store's pool: a pooler
///   in transaction mode, such as PgBouncer's, breaks `LISTEN`, and a pooled connection goes back to
///   the pool). Each time it starts listening, after the first connection and after every
///   reconnection, it delivers ``BackplaneEvent/listening``: changes made meanwhile were missed.
///   A lost connection is found when the server closes it or when a heartbeat query gets no
///   answer within ``heartbeatTimeout``; the backplane then connects again, after a delay that
///   doubles from ``firstReconnectDelay`` up to ``maxReconnectDelay``.
/// - Its connection is named `strata backplane <node>` in `pg_stat_activity`.
/// - Notifications that are not a Strata change (another program on the channel) are logged and
///   ignored.
public final class PostgresBackplane: Backplane, Sendable, CustomStringConvertible {
    /// This node's name in the changes it announces: random unless given. For logs and people:
    /// nodes may share one (in containers, a name made from the process id often is).
    public let node: String
    /// This backplane's random identity, carried by every change it announces: the node
    /// recognises its own changes by it, never by ``node``.
    public let instance: String
    /// The channel it listens on (the store's ``PostgresStore/changeChannel``).
    public let channel: String
    /// How often the listening connection is checked with a query.
    public let heartbeatInterval: Duration
    /// How long the heartbeat query may take before the connection is counted as lost.
    public let heartbeatTimeout: Duration
    /// The delay before the first attempt to connect again.
    public let firstReconnectDelay: Duration
    /// The longest delay between attempts to connect again.
    public let maxReconnectDelay: Duration
    /// The waits between attempts to connect again, as the library's one `Backoff`.
    public var reconnectBackoff: Backoff { Backoff(initialDelay: firstReconnectDelay, maxDelay: maxReconnectDelay) }

    /// The listening machinery, which the running task holds; the backplane holds it too and
    /// stops it when released.
    let core: PostgresBackplaneCore

    /// A backplane for `store`'s table that turns on the store's announcements as `node` and
    /// starts listening.
    ///
    /// - Parameters:
    ///   - store: the shared store; its connection settings and channel are used, and its writes
    ///     announce themselves as `node` from now on.
    ///   - node: this node's name (a random one by default). Two nodes may share one: each
    ///     backplane has its own random ``instance``; a node warns when another live listener
    ///     uses its name, since its logs and `pg_stat_activity` would then mix them up.
    ///   - heartbeatInterval, heartbeatTimeout: how often the listening connection is checked, and
    ///     how long the check may take (10 s and 5 s by default).
    ///   - firstReconnectDelay, maxReconnectDelay: the delays between attempts to connect again
    ///     (0.1 s doubling up to 5 s by default).
    ///   - logger: where connection losses and foreign notifications go.
    /// - Throws: `StoreError` (operation `open`) when the store's connection settings cannot be
    ///   used for a connection of its own (a client configuration whose TLS mode is not known).
    public init<Value>(
        announcingFor store: PostgresStore<Value>,
        node: String = "node-\(UUID().uuidString.prefix(8).lowercased())",
        heartbeatInterval: Duration = .seconds(10),
        heartbeatTimeout: Duration = .seconds(5),
        firstReconnectDelay: Duration = .milliseconds(100),
        maxReconnectDelay: Duration = .seconds(5),
        logger: Logger = Logger(label: "strata.postgresbackplane")
    ) throws(StoreError) {
        precondition(heartbeatInterval > .zero && heartbeatTimeout > .zero, "heartbeat durations must be positive")
        precondition(firstReconnectDelay > .zero && maxReconnectDelay >= firstReconnectDelay, "reconnect delays must be positive and ordered")
        let configuration: PostgresConnection.Configuration
        do {
            configuration = try store.watchdog.ownConnectionConfiguration(applicationName: "strata backplane \(node)")
        } catch {
            throw StoreError(
                store: store.description, operation: .open, key: nil,
                reason: "the backplane cannot open a connection of its own: \(error)", underlying: error)
        }
        self.node = node
        let instance = UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(16)
        self.instance = String(instance)
        self.channel = store.changeChannel
        self.heartbeatInterval = heartbeatInterval
        self.heartbeatTimeout = heartbeatTimeout
        self.firstReconnectDelay = firstReconnectDelay
        self.maxReconnectDelay = maxReconnectDelay
        self.core = PostgresBackplaneCore(
            configuration: configuration, channel: store.changeChannel, heartbeatInterval: heartbeatInterval,
            heartbeatTimeout: heartbeatTimeout, firstReconnectDelay: firstReconnectDelay, maxReconnectDelay: maxReconnectDelay,
            logger: logger, description: "PostgresBackplane(\(store.endpoint), channel \(store.changeChannel), node \(node))",
            applicationName: "strata backplane \(node)")
        store.announceChanges(as: node, instance: self.instance)
        core.start()
    }

    deinit {
        core.stopWithoutWaiting()
    }

    /// Whether the backplane listens now.
    public var isListening: Bool { core.state.withLock { $0.isListening } }

    /// How many times the backplane started listening (1 after the first connection).
    public var listeningStarts: Int { core.state.withLock { $0.listeningStarts } }

    /// How many other live connections used this node's name (their `application_name`) when the
    /// backplane last started listening; more than zero is logged as a warning. `nil` before it
    /// listened, or when the check failed.
    public var otherListenersNamedAlike: Int? { core.state.withLock { $0.otherListenersNamedAlike } }

    /// Returns once the backplane has started listening at least `count` times: a test's (or a
    /// start-up's) wait for the first connection, or for a reconnection.
    /// - Throws: `CancellationError` as soon as the waiting task is cancelled.
    public func waitUntilListening(starts count: Int = 1) async throws {
        try await core.state.wait(in: \.listeningWaiters, current: { $0.listeningStarts }, until: { $0 >= count })
    }

    public func events() -> AsyncStream<BackplaneEvent> { core.events() }

    /// Stops listening, closes the connection and ends every event sequence.
    public func shutdown() async { await core.shutdown() }

    /// Closes the listening connection as if the network dropped it (the backplane connects again):
    /// for tests and drills.
    public func dropConnection() async {
        let connection = core.state.withLock { $0.connection }
        try? await connection?.close()
    }

    public var description: String { core.description }
}

/// What a ``PostgresBackplane`` runs: the listening connection, its task and the subscribers.
/// Nothing here holds the backplane, so releasing it stops the task.
final class PostgresBackplaneCore: Sendable {
    let channel: String
    let heartbeatInterval: Duration
    let heartbeatTimeout: Duration
    let firstReconnectDelay: Duration
    let maxReconnectDelay: Duration
    let configuration: PostgresConnection.Configuration
    let logger: Logger
    let state = Locked(State())
    let description: String
    /// The listening connection's `application_name`: other connections with it are nodes that
    /// share this one's name.
    let applicationName: String
    /// Runs in each heartbeat check just before its query: tests close the connection there, or
    /// stand for a query PostgresNIO never answers.
    let beforeHeartbeatQuery = Locked<(@Sendable (PostgresConnection) async -> Void)?>(nil)

    struct State: Sendable {
        var subscribers: [UInt64: AsyncStream<BackplaneEvent>.Continuation] = [:]
        var nextSubscriber: UInt64 = 0
        var isListening = false
        /// Times listening started.
        var listeningStarts = 0
        var listeningWaiters = ConditionWaiters<Int>()
        var runner: Task<Void, Never>?
        var connection: PostgresConnection?
        var isShutDown = false
        var otherListenersNamedAlike: Int?
    }

    init(
        configuration: PostgresConnection.Configuration, channel: String, heartbeatInterval: Duration,
        heartbeatTimeout: Duration, firstReconnectDelay: Duration, maxReconnectDelay: Duration, logger: Logger,
        description: String, applicationName: String
    ) {
        self.applicationName = applicationName
        self.configuration = configuration
        self.channel = channel
        self.heartbeatInterval = heartbeatInterval
        self.heartbeatTimeout = heartbeatTimeout
        self.firstReconnectDelay = firstReconnectDelay
        self.maxReconnectDelay = maxReconnectDelay
        self.logger = logger
        self.description = description
    }

    func start() {
        let runner = Task { await run() }
        state.withLock { $0.runner = runner }
    }

    /// Cancels the task and ends the subscribers' sequences (the backplane was released).
    func stopWithoutWaiting() {
        let (runner, connection, subscribers) = state.withLock { state in
            state.isShutDown = true
            defer { state.subscribers = [:] }
            return (state.runner, state.connection, state.subscribers.values)
        }
        runner?.cancel()
        if let connection { _ = connection.close() as EventLoopFuture<Void> }
        for subscriber in subscribers { subscriber.finish() }
    }

    func events() -> AsyncStream<BackplaneEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: BackplaneEvent.self, bufferingPolicy: .unbounded)
        let (id, listening, shutDown) = state.withLock { state in
            defer { state.nextSubscriber += 1 }
            state.subscribers[state.nextSubscriber] = continuation
            return (state.nextSubscriber, state.isListening, state.isShutDown)
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        // A subscriber that joins while the backplane listens starts from now: nothing it holds
        // can have missed a change the backplane heard.
        if listening { continuation.yield(.listening) }
        if shutDown { continuation.finish() }
        return stream
    }

    func shutdown() async {
        let (runner, connection, subscribers) = state.withLock { state in
            state.isShutDown = true
            state.isListening = false
            defer { state.subscribers = [:] }
            return (state.runner, state.connection, state.subscribers.values)
        }
        runner?.cancel()
        try? await connection?.close()
        for subscriber in subscribers { subscriber.finish() }
        guard let runner else { return }
        // Waits for the listening task, for at most 5 s: it ends at once when cancelled, unless
        // something it awaits ignores cancellation (a PostgresNIO query never answered). Past the
        // bound the task is left, cancelled, with a warning; it holds no connection.
        if case .deadline = await raceAgainstDeadline(clock: ContinuousClock(), duration: .seconds(5), { await runner.value }) {
            logger.warning(
                "the backplane's listening task did not stop within 5 s of its shutdown: left behind, cancelled",
                metadata: ["backplane": "\(description)"])
        }
    }

    // MARK: Listening

    private func broadcast(_ event: BackplaneEvent) {
        let subscribers = state.withLock { Array($0.subscribers.values) }
        for subscriber in subscribers { subscriber.yield(event) }
    }

    /// Connects, listens until the connection is lost, and connects again, until cancelled.
    private func run() async {
        let backoff = Backoff(initialDelay: firstReconnectDelay, maxDelay: maxReconnectDelay)
        var failedConnections = 0
        var connectionID = 0
        while !Task.isCancelled {
            connectionID += 1
            do {
                let connection = try await PostgresConnection.connect(
                    configuration: configuration, id: connectionID, logger: logger)
                let keep = state.withLock { state -> Bool in
                    guard !state.isShutDown else { return false }
                    state.connection = connection
                    return true
                }
                guard keep else {
                    try? await connection.close()
                    return
                }
                let startsBefore = state.withLock { $0.listeningStarts }
                defer {
                    // It listened: the next loss starts the backoff again.
                    if state.withLock({ $0.listeningStarts }) > startsBefore { failedConnections = 0 }
                }
                try await listen(on: connection)
            } catch is CancellationError {
                // Shut down.
            } catch {
                if !Task.isCancelled {
                    logger.warning(
                        "the backplane lost its connection: memory copies are treated as stale once it listens again",
                        metadata: ["backplane": "\(description)", "error": "\(String(reflecting: error))"])
                }
            }
            let connection = state.withLock { state in
                state.isListening = false
                defer { state.connection = nil }
                return state.connection
            }
            try? await connection?.close()
            guard !Task.isCancelled else { return }
            failedConnections += 1
            do { try await Task.sleep(for: backoff.delay(beforeRetry: failedConnections, random: 0)) } catch { return }
        }
    }

    /// Listens on `connection` until it is lost (throws) or the task is cancelled.
    private func listen(on connection: PostgresConnection) async throws {
        try await connection.listen(on: channel) { notifications in
            // Before it counts as listening: a node that waited for it has the answer.
            await checkForNamesakes(on: connection)
            // The subscribers of this moment hear it from here; a later one, from `events()`.
            let subscribers = state.withLock { state in
                state.isListening = true
                state.listeningStarts += 1
                state.listeningWaiters.resumeSatisfied(by: state.listeningStarts)
                return Array(state.subscribers.values)
            }
            for subscriber in subscribers { subscriber.yield(.listening) }
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { [self] in try await heartbeat(on: connection) }
                group.addTask { [self] in
                    for try await notification in notifications {
                        guard let notice = PostgresChangeNotice.parse(notification.payload) else {
                            logger.notice(
                                "a notification on the cache channel that is not a cache change: ignored",
                                metadata: ["backplane": "\(description)", "payload": "\(notification.payload.prefix(200))"])
                            continue
                        }
                        broadcast(notice.event)
                    }
                    throw PostgresBackplaneError.connectionClosed
                }
                // Either ends only by failing (or cancellation): the other follows.
                defer { group.cancelAll() }
                try await group.next()
            }
        }
    }

    /// Counts the other live connections that carry this node's `application_name` (PostgreSQL
    /// keeps 63 bytes of it), and warns when there are any: two nodes with one name still hear
    /// each other (each has its own instance), but their logs, `X-Strata-Node` and
    /// `pg_stat_activity` mix them up. A check that fails, or takes longer than the heartbeat's
    /// timeout, is skipped.
    private func checkForNamesakes(on connection: PostgresConnection) async {
        var name = applicationName
        while name.utf8.count > 63 { name.removeLast() }
        // At most a second: it delays the node's listening, on every reconnect.
        let check = await raceAgainstDeadline(clock: ContinuousClock(), duration: min(heartbeatTimeout, .seconds(1))) { [logger, name] () async throws -> Int in
            var count = 0
            let rows = try await connection.queryUnlessClosed(
                "SELECT count(*)::int8 FROM pg_stat_activity WHERE application_name = \(name) AND pid <> pg_backend_pid()",
                logger: logger)
            for try await other in rows.decode(Int64.self) { count = Int(other) }
            return count
        }
        guard case .value(.success(let others)) = check else { return }
        state.withLock { $0.otherListenersNamedAlike = others }
        if others > 0 {
            logger.warning(
                "another live node listens under this node's name: give each node its own name (--node) so logs and pg_stat_activity tell them apart",
                metadata: ["backplane": "\(description)", "others": "\(others)"])
        }
    }

    /// Checks the connection with `SELECT 1` every ``heartbeatInterval``; throws when a check fails
    /// or takes longer than ``heartbeatTimeout`` (the connection is then closed), and at once when
    /// the task is cancelled.
    ///
    /// The check runs through `raceAgainstDeadline`, not a task group: a query written just as the
    /// connection closed is never answered by PostgresNIO, and a group would wait for it forever
    /// (and the backplane's shutdown with it).
    private func heartbeat(on connection: PostgresConnection) async throws {
        while true {
            try await Task.sleep(for: heartbeatInterval)
            let hook = beforeHeartbeatQuery.withLock { $0 }
            let check = await raceAgainstDeadline(clock: ContinuousClock(), duration: heartbeatTimeout) { [logger] in
                await hook?(connection)
                for try await _ in try await connection.queryUnlessClosed("SELECT 1", logger: logger) {}
            }
            switch check {
            case .value(.success):
                continue
            case .cancelled:
                throw CancellationError()
            case .value(.failure), .deadline:
                try? await connection.close()
                throw PostgresBackplaneError.heartbeatFailed(after: heartbeatTimeout)
            }
        }
    }
}

/// Why a ``PostgresBackplane`` stopped listening on a connection.
public enum PostgresBackplaneError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The server closed the listening connection.
    case connectionClosed
    /// The heartbeat query got no answer in time.
    case heartbeatFailed(after: Duration)

    public var description: String {
        switch self {
        case .connectionClosed: "the listening connection was closed"
        case .heartbeatFailed(let after): "the listening connection did not answer a heartbeat within \(after)"
        }
    }
}
#endif
