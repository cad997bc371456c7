#if Postgres
import Foundation
import Logging
import NIOSSL
import PostgresNIO
@_spi(StrataInternals) import Strata

/// The TLS mode a store's connections use, as the store was given it: the mode the watchdog's own
/// connection attempt must use too, so that it fails (or connects) as the pool's attempts do.
struct PostgresTLSMode: Sendable {
    enum Mode: String, Sendable {
        /// No TLS.
        case disable
        /// TLS when the server offers it, else a plain connection.
        case prefer
        /// TLS, or no connection.
        case require
    }

    var mode: Mode
    /// The TLS settings for `prefer` and `require`; `nil` for `disable`.
    var settings: TLSConfiguration?
    /// Where the mode came from, for logs and tests: `sslmode=verify-full`, `the client configuration`.
    var source: String

    /// The mode as a client configuration's.
    var clientTLS: PostgresClient.Configuration.TLS {
        switch (mode, settings) {
        case (.prefer, let settings?): .prefer(settings)
        case (.require, let settings?): .require(settings)
        default: .disable
        }
    }

    /// The mode as a single connection's.
    func connectionTLS() throws -> PostgresConnection.Configuration.TLS {
        switch (mode, settings) {
        case (.prefer, let settings?): .prefer(try NIOSSLContext(configuration: settings))
        case (.require, let settings?): .require(try NIOSSLContext(configuration: settings))
        default: .disable
        }
    }

    init(mode: Mode, settings: TLSConfiguration?, source: String) {
        self.mode = mode
        self.settings = settings
        self.source = source
    }

    /// The mode a configuration the application made holds, or `nil` when it cannot be read.
    ///
    /// `PostgresClient.Configuration.TLS` keeps its mode internal (no public accessor), so it is read
    /// by reflection: its `base`, one of `disable`, `prefer(TLSConfiguration)` and
    /// `require(TLSConfiguration)`, as PostgresNIO 1.33 has it. Any other shape is not known,
    /// never guessed: the store then does without its own connection attempt.
    init?(reading tls: PostgresClient.Configuration.TLS) {
        self.init(reflecting: tls, source: "the client configuration")
    }

    /// The mode in a value shaped as `PostgresClient.Configuration.TLS` is, or `nil`.
    init?(reflecting tls: Any, source: String) {
        guard let base = Mirror(reflecting: tls).children.first(where: { $0.label == "base" })?.value else { return nil }
        let cases = Mirror(reflecting: base)
        guard cases.displayStyle == .enum else { return nil }
        if cases.children.isEmpty {
            guard "\(base)" == "disable" else { return nil }
            self.init(mode: .disable, settings: nil, source: source)
            return
        }
        guard cases.children.count == 1, let payload = cases.children.first,
            let settings = payload.value as? TLSConfiguration,
            let label = payload.label, let mode = Mode(rawValue: label), mode != .disable
        else { return nil }
        self.init(mode: mode, settings: settings, source: source)
    }
}

/// Finds out why a ``PostgresStore`` gets no connection.
///
/// PostgresNIO's pool retries failed connection attempts with backoff and keeps an operation waiting
/// for a lease; it does not fail the lease. When an operation has waited ``probeDelay`` while none of
/// the store's operations got a connection, the watchdog opens one connection of its own with the
/// public `PostgresConnection.connect(...)` and the same settings, and classifies the typed
/// `PSQLError` it fails with into a ``PostgresConnectionError``. One probe at a time per store;
/// operations waiting meanwhile share its answer.
///
/// The probe uses the TLS mode the store was given (``PostgresTLSMode``). When that mode is not
/// known (a TCP configuration whose mode could not be read), there is no probe (``canProbe``):
/// the store says so once when it is made, and an operation waits for the pool until
/// ``PostgresStore/connectTimeout``.
final class PostgresConnectionWatchdog: Sendable {
    /// How long an operation waits for the pool before the store probes the database itself: long
    /// enough that a healthy pool's first connection usually wins, short enough to fail fast.
    static var probeDelay: Duration { .milliseconds(100) }

    private let configuration: PostgresClient.Configuration
    /// The TLS mode of the store's connections, as given; `nil` when not known.
    let tls: PostgresTLSMode?
    private let address: String
    private let connectTimeout: Duration
    private let logger: Logger

    private struct State: Sendable {
        var latest: (failure: PostgresConnectionError, at: ContinuousClock.Instant)?
        /// When the probe in flight started, if one is.
        var probing: ContinuousClock.Instant?
        /// When the last probe that connected started.
        var lastSuccess: ContinuousClock.Instant?
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var cancelled: Set<UInt64> = []
        var nextID: UInt64 = 0
    }

    private let state = Locked(State())

    init(configuration: PostgresClient.Configuration, tls: PostgresTLSMode?, address: String, connectTimeout: Duration, logger: Logger) {
        self.configuration = configuration
        self.tls = tls
        self.address = address
        self.connectTimeout = connectTimeout
        self.logger = logger
    }

    /// The failure a probe found at or after `instant`.
    func failure(since instant: ContinuousClock.Instant) -> PostgresConnectionError? {
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

    /// Whether the watchdog can connect as the pool does: the TLS mode is known, or the connection
    /// is a Unix domain socket (no TLS).
    var canProbe: Bool { tls != nil || configuration.host == nil }

    /// Starts a probe unless one is running or one that started at or after `instant` has answered
    /// (or the watchdog cannot probe: ``canProbe``).
    func probeIfNeeded(since instant: ContinuousClock.Instant) {
        guard canProbe else { return }
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

    /// Returns once a probe answered (failure or not) after `instant`, when no probe is running
    /// (the caller starts one: an earlier probe that ended just before this call would otherwise
    /// leave it waiting for an answer nobody is getting), or when the calling task is cancelled.
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
                    if state.probing == nil { return true }
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
    private func probe() async -> PostgresConnectionError? {
        let connectionConfiguration: PostgresConnection.Configuration
        do {
            connectionConfiguration = try probeConfiguration()
        } catch {
            return PostgresConnectionError(cause: .tls, address: address, detail: "TLS configuration unusable: \(error)")
        }
        let address = address
        let logger = logger
        let bound = connectTimeout
        // A server that accepts TCP and never answers would hold the attempt forever: the bound
        // cancels it (PostgresNIO's async connect closes the channel when cancelled).
        return await withTaskGroup(of: PostgresConnectionError??.self) { group in
            group.addTask {
                do {
                    let connection = try await PostgresConnection.connect(
                        configuration: connectionConfiguration, id: 0, logger: logger)
                    try? await connection.close()
                    return .some(nil)
                } catch is CancellationError {
                    return nil
                } catch {
                    return .some(PostgresConnectionError.classify(error, address: address))
                }
            }
            group.addTask {
                try? await Task.sleep(for: bound)
                return nil
            }
            // The attempt's answer, or `nil` when the bound passed first.
            let first: PostgresConnectionError?? = await group.next() ?? nil
            group.cancelAll()
            if let first { return first }
            return PostgresConnectionError(
                cause: .unreachable, address: address, detail: "no connection within \(Self.format(bound))")
        }
    }

    static func format(_ duration: Duration) -> String {
        let seconds = duration / .seconds(1)
        return seconds == seconds.rounded() ? "\(Int(seconds)) s" : "\(seconds) s"
    }

    /// The settings of the watchdog's own connection attempt.
    func probeConfiguration() throws -> PostgresConnection.Configuration {
        try Self.connectionConfiguration(from: configuration, tls: tls, connectTimeout: connectTimeout)
    }

    /// The single-connection settings that match the pool's, with the TLS mode the store was given.
    /// - Throws: ``UnknownTLSMode`` for a TCP configuration when `tls` is `nil`, or NIOSSL's error
    ///   when the TLS settings are unusable.
    static func connectionConfiguration(
        from configuration: PostgresClient.Configuration, tls: PostgresTLSMode?, connectTimeout: Duration
    ) throws -> PostgresConnection.Configuration {
        var result: PostgresConnection.Configuration
        if let host = configuration.host {
            guard let tls else { throw UnknownTLSMode() }
            result = PostgresConnection.Configuration(
                host: host, port: configuration.port ?? 5432, username: configuration.username,
                password: configuration.password, database: configuration.database, tls: try tls.connectionTLS())
            result.options.tlsServerName = configuration.options.tlsServerName
        } else {
            result = PostgresConnection.Configuration(
                unixSocketPath: configuration.unixSocketPath ?? "", username: configuration.username,
                password: configuration.password, database: configuration.database)
        }
        result.options.connectTimeout = .nanoseconds(
            Int64(connectTimeout.components.seconds) * 1_000_000_000 + connectTimeout.components.attoseconds / 1_000_000_000)
        result.options.requireBackendKeyData = configuration.options.requireBackendKeyData
        result.options.additionalStartupParameters = configuration.options.additionalStartupParameters
        return result
    }

    /// The settings of a connection of its own for a store's helper (a backplane, a fleet lock),
    /// named `applicationName` in `pg_stat_activity`, so that an operator can find it.
    func ownConnectionConfiguration(applicationName: String) throws -> PostgresConnection.Configuration {
        var configuration = try probeConfiguration()
        configuration.options.additionalStartupParameters.removeAll { $0.0 == "application_name" }
        configuration.options.additionalStartupParameters.append(("application_name", String(applicationName.prefix(63))))
        return configuration
    }

    /// The store's TLS mode is not known: the watchdog does not connect (``canProbe``).
    struct UnknownTLSMode: Error, CustomStringConvertible {
        var description: String { "the TLS mode of the client configuration is not known" }
    }
}
#endif
