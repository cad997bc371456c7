#if Postgres
import Foundation
import Logging
import NIOSSL
import PostgresNIO
@_spi(StrataInternals) import Strata

/// Finds out why a ``PostgresStore`` gets no connection.
///
/// PostgresNIO's pool retries failed connection attempts with backoff and keeps an operation waiting
/// for a lease; it does not fail the lease. When an operation has waited ``probeDelay`` while none of
/// the store's operations got a connection, the watchdog opens one connection of its own with the
/// public `PostgresConnection.connect(...)` and the same settings, and classifies the typed
/// `PSQLError` it fails with into a ``PostgresConnectionFailure``. One probe at a time per store;
/// operations waiting meanwhile share its answer.
final class PostgresConnectionWatchdog: Sendable {
    /// How long an operation waits for the pool before the store probes the database itself: long
    /// enough that a healthy pool's first connection usually wins, short enough to fail fast.
    static var probeDelay: Duration { .milliseconds(100) }

    private let configuration: PostgresClient.Configuration
    private let address: String
    private let connectTimeout: Duration
    private let logger: Logger

    private struct State: Sendable {
        var latest: (failure: PostgresConnectionFailure, at: ContinuousClock.Instant)?
        /// When the probe in flight started, if one is.
        var probing: ContinuousClock.Instant?
        /// When the last probe that connected started.
        var lastSuccess: ContinuousClock.Instant?
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var cancelled: Set<UInt64> = []
        var nextID: UInt64 = 0
    }

    private let state = Locked(State())

    init(configuration: PostgresClient.Configuration, address: String, connectTimeout: Duration, logger: Logger) {
        self.configuration = configuration
        self.address = address
        self.connectTimeout = connectTimeout
        self.logger = logger
    }

    /// The failure a probe found at or after `instant`.
    func failure(since instant: ContinuousClock.Instant) -> PostgresConnectionFailure? {
        state.withLock { state in
            guard let latest = state.latest, latest.at >= instant else { return nil }
            return latest.failure
        }
    }

    /// Whether a probe that started at or after `instant` has answered.
    func hasAnswered(since instant: ContinuousClock.Instant) -> Bool {
        state.withLock { state in
            if let latest = state.latest, latest.at >= instant { return true }
            return state.lastSuccess.map { $0 >= instant } ?? false
        }
    }

    /// Starts a probe unless one is running or one that started at or after `instant` has answered.
    func probeIfNeeded(since instant: ContinuousClock.Instant) {
        let start = ContinuousClock.now
        let shouldStart = state.withLock { state in
            if state.probing != nil { return false }
            if let latest = state.latest, latest.at >= instant { return false }
            if let success = state.lastSuccess, success >= instant { return false }
            state.probing = start
            return true
        }
        guard shouldStart else { return }
        Task {
            let failure = await self.probe()
            let waiters = self.state.withLock { state in
                state.probing = nil
                if let failure {
                    state.latest = (failure, start)
                } else {
                    state.lastSuccess = start
                }
                defer { state.waiters = [:] }
                return Array(state.waiters.values)
            }
            for waiter in waiters { waiter.resume() }
        }
    }

    /// Returns once a probe answered (failure or not) after `instant`, or when the calling task is cancelled.
    func waitForAnswer(since instant: ContinuousClock.Instant) async {
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state in
                    if let latest = state.latest, latest.at >= instant { return true }
                    if let success = state.lastSuccess, success >= instant { return true }
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

    /// Connects once, bounded by the connect timeout; `nil` when it connected (the connection is closed again).
    private func probe() async -> PostgresConnectionFailure? {
        let connectionConfiguration: PostgresConnection.Configuration
        do {
            connectionConfiguration = try Self.connectionConfiguration(from: configuration, connectTimeout: connectTimeout)
        } catch {
            return PostgresConnectionFailure(cause: .tls, address: address, detail: "TLS configuration unusable: \(error)")
        }
        let address = address
        let logger = logger
        let bound = connectTimeout
        // A server that accepts TCP and never answers would hold the attempt forever: the bound
        // cancels it (PostgresNIO's async connect closes the channel when cancelled).
        return await withTaskGroup(of: PostgresConnectionFailure??.self) { group in
            group.addTask {
                do {
                    let connection = try await PostgresConnection.connect(
                        configuration: connectionConfiguration, id: 0, logger: logger)
                    try? await connection.close()
                    return .some(nil)
                } catch is CancellationError {
                    return nil
                } catch {
                    return .some(PostgresConnectionFailure.classify(error, address: address))
                }
            }
            group.addTask {
                try? await Task.sleep(for: bound)
                return nil
            }
            // The attempt's answer, or `nil` when the bound passed first.
            let first: PostgresConnectionFailure?? = await group.next() ?? nil
            group.cancelAll()
            if let first { return first }
            return PostgresConnectionFailure(
                cause: .unreachable, address: address, detail: "no connection within \(Self.format(bound))")
        }
    }

    static func format(_ duration: Duration) -> String {
        let seconds = duration / .seconds(1)
        return seconds == seconds.rounded() ? "\(Int(seconds)) s" : "\(seconds) s"
    }

    /// The single-connection settings that match the pool's.
    static func connectionConfiguration(
        from configuration: PostgresClient.Configuration, connectTimeout: Duration
    ) throws -> PostgresConnection.Configuration {
        var result: PostgresConnection.Configuration
        if let host = configuration.host {
            result = PostgresConnection.Configuration(
                host: host, port: configuration.port ?? 5432, username: configuration.username,
                password: configuration.password, database: configuration.database, tls: try tls(of: configuration.tls))
            result.options.tlsServerName = configuration.options.tlsServerName
        } else {
            result = PostgresConnection.Configuration(
                unixSocketPath: configuration.unixSocketPath ?? "", username: configuration.username,
                password: configuration.password, database: configuration.database)
        }
        result.options.connectTimeout = .nanoseconds(
            Int64(connectTimeout.components.seconds) * 1_000_000_000 + connectTimeout.components.attoseconds / 1_000_000_000)
        result.options.requireBackendKeyData = configuration.options.requireBackendKeyData
        return result
    }

    /// The pool's TLS mode as a single connection's.
    ///
    /// `PostgresClient.Configuration.TLS` keeps its mode internal (no public accessor); reflection reads
    /// the case (`disable`, `prefer`, `require`) and its `TLSConfiguration`. Should that layout ever
    /// change, the probe falls back to `prefer` with the default client configuration, which is what
    /// a `PostgresClient.Configuration` defaults to.
    private static func tls(of tls: PostgresClient.Configuration.TLS) throws -> PostgresConnection.Configuration.TLS {
        if let base = Mirror(reflecting: tls).children.first(where: { $0.label == "base" })?.value {
            let mirror = Mirror(reflecting: base)
            if mirror.children.isEmpty, "\(base)" == "disable" { return .disable }
            if let child = mirror.children.first, let settings = child.value as? TLSConfiguration {
                switch child.label {
                case "require": return .require(try NIOSSLContext(configuration: settings))
                case "prefer": return .prefer(try NIOSSLContext(configuration: settings))
                default: break
                }
            }
        }
        return .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
    }
}
#endif
