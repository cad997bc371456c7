#if Postgres
import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import PostgresNIO
@_spi(StrataInternals) import Strata

/// Why a ``PostgresStore`` could not get a connection: the `underlying` error of the `StoreError` an
/// operation throws when the database cannot be reached or refuses the store.
///
/// Found from PostgresNIO's typed `PSQLError` (its `code`, its server fields' SQLSTATE and the
/// SwiftNIO error under it) of a connection attempt the store makes itself, never from log text.
///
/// ```swift
/// do {
///     _ = try await store.retrieve("feed")
/// } catch let error as StoreError {
///     if let failure = error.underlying as? PostgresConnectionError, failure.cause == .authenticationRejected {
///         print("check the credentials: \(failure.detail)")
///     }
/// }
/// ```
public struct PostgresConnectionError: Error, Sendable, CustomStringConvertible {
    /// Which layer failed.
    public enum Cause: String, Sendable, Hashable {
        /// Nothing accepts connections at the address (TCP: connection refused).
        case refused
        /// The address could not be reached in time, or not at all (no route, unknown host, connect
        /// timeout, a server that never answers).
        case unreachable
        /// TLS could not be set up: the server does not offer it where it is required, or the
        /// handshake failed.
        case tls
        /// The server rejected the credentials (SQLSTATE 28P01 or 28000, or an authentication
        /// method the client cannot use).
        case authenticationRejected
        /// The database does not exist on the server (SQLSTATE 3D000).
        case databaseMissing
        /// The server closed the connection while it was being set up.
        case serverClosedConnection
        /// Anything else the server or the connection reported.
        case other
    }

    /// Which layer failed.
    public var cause: Cause
    /// The server, `host:port` (or the socket path), without credentials.
    public var address: String
    /// What went wrong, in a few words (the server's message and SQLSTATE for server errors).
    public var detail: String
    /// The server's SQLSTATE, for failures the server reported.
    public var sqlState: String?
    /// PostgresNIO's error, when there is one (never carries the password).
    public var error: PSQLError?

    public init(cause: Cause, address: String, detail: String, sqlState: String? = nil, error: PSQLError? = nil) {
        self.cause = cause
        self.address = address
        self.detail = detail
        self.sqlState = sqlState
        self.error = error
    }

    /// `database unreachable at host:port: detail`.
    public var description: String { "database unreachable at \(address): \(detail)" }

    /// Classifies the error a connection attempt failed with.
    static func classify(_ error: any Error, address: String) -> PostgresConnectionError {
        guard let psql = error as? PSQLError else {
            return classifyTransport(error, address: address, psql: nil)
                ?? PostgresConnectionError(cause: .other, address: address, detail: "\(error)")
        }
        switch psql.code {
        case .server:
            let state = psql.serverInfo?[.sqlState]
            let message = psql.serverInfo?[.message] ?? "server error"
            let detail = message + (state.map { " (SQLSTATE \($0))" } ?? "")
            let cause: Cause
            switch state {
            case "28P01", "28000": cause = .authenticationRejected
            case "3D000": cause = .databaseMissing
            default: cause = .other
            }
            return PostgresConnectionError(cause: cause, address: address, detail: detail, sqlState: state, error: psql)
        case .unsupportedAuthMechanism, .authMechanismRequiresPassword, .saslError:
            return PostgresConnectionError(
                cause: .authenticationRejected, address: address, detail: "authentication failed: \(psql.code)", error: psql)
        case .sslUnsupported:
            return PostgresConnectionError(
                cause: .tls, address: address, detail: "the server does not support TLS, which is required", error: psql)
        case .failedToAddSSLHandler, .receivedUnencryptedDataAfterSSLRequest:
            return PostgresConnectionError(cause: .tls, address: address, detail: "TLS setup failed: \(psql.code)", error: psql)
        case .serverClosedConnection:
            if let underlying = psql.underlying, let transport = classifyTransport(underlying, address: address, psql: psql) {
                return transport
            }
            return PostgresConnectionError(
                cause: .serverClosedConnection, address: address, detail: "the server closed the connection", error: psql)
        default:
            if let underlying = psql.underlying, let transport = classifyTransport(underlying, address: address, psql: psql) {
                return transport
            }
            return PostgresConnectionError(
                cause: .other, address: address, detail: "\(psql.code)" + (psql.underlying.map { ": \($0)" } ?? ""),
                error: psql)
        }
    }

    /// The SwiftNIO error under a connection failure: refused, unreachable or TLS.
    private static func classifyTransport(_ error: any Error, address: String, psql: PSQLError?) -> PostgresConnectionError? {
        switch error {
        case let error as NIOConnectionError:
            // Each address tried failed; refused when every one was refused.
            let failures = error.connectionErrors.compactMap { classifyTransport($0.error, address: address, psql: psql) }
            if let first = failures.first {
                return failures.allSatisfy({ $0.cause == .refused }) ? first : (failures.first { $0.cause != .refused } ?? first)
            }
            if let dns = error.dnsAAAAError ?? error.dnsAError {
                return PostgresConnectionError(cause: .unreachable, address: address, detail: "host not found: \(dns)", error: psql)
            }
            return PostgresConnectionError(cause: .unreachable, address: address, detail: "no address to connect to", error: psql)
        case let error as IOError:
            if error.errnoCode == ECONNREFUSED {
                return PostgresConnectionError(
                    cause: .refused, address: address, detail: "Connection refused (errno: \(error.errnoCode))", error: psql)
            }
            return PostgresConnectionError(cause: .unreachable, address: address, detail: "\(error)", error: psql)
        case ChannelError.connectTimeout(let amount):
            let seconds = Double(amount.nanoseconds) / 1e9
            let text = seconds == seconds.rounded() ? "\(Int(seconds)) s" : "\(seconds) s"
            return PostgresConnectionError(cause: .unreachable, address: address, detail: "Connect timeout (\(text))", error: psql)
        case let error as NIOSSLError:
            return PostgresConnectionError(cause: .tls, address: address, detail: "TLS handshake failed: \(error)", error: psql)
        case let error as BoringSSLError:
            return PostgresConnectionError(cause: .tls, address: address, detail: "TLS handshake failed: \(error)", error: psql)
        default:
            return nil
        }
    }
}
/// The server aborted a statement of a ``PostgresStore`` (or a `PostgresOutboxStorage`) that ran
/// past the store's ``PostgresStore/statementTimeout``: the `underlying` error of the `StoreError`
/// the operation throws.
///
/// The statement took no effect: the server rolled it back before it answered, and it answered
/// before the store stopped waiting (``PostgresStore/queryTimeout``). A write that fails with this
/// error was not committed, so it can be retried without asking the database whether it landed.
/// Found from the server's SQLSTATE `57014` (`query_canceled`), which an operator's
/// `pg_cancel_backend` raises too, with the same guarantee.
///
/// ```swift
/// do {
///     try await storage.save(entry)
/// } catch let error as StoreError where error.underlying is PostgresStatementTimeoutError {
///     // not saved: the database was too slow (a lock held elsewhere, an overloaded server)
/// }
/// ```
public struct PostgresStatementTimeoutError: Error, Sendable, CustomStringConvertible {
    /// The store's ``PostgresStore/statementTimeout``.
    public var timeout: Duration
    /// The server, `host:port` (or the socket path), without credentials.
    public var address: String
    /// The server's message and SQLSTATE.
    public var detail: String
    /// The server's SQLSTATE: `57014`.
    public var sqlState: String
    /// PostgresNIO's error, when there is one (never carries the query's bind values).
    public var error: PSQLError?

    public init(timeout: Duration, address: String, detail: String, sqlState: String = "57014", error: PSQLError? = nil) {
        self.timeout = timeout
        self.address = address
        self.detail = detail
        self.sqlState = sqlState
        self.error = error
    }

    /// `the database at host:port aborted the statement (statement timeout 27 s): detail`.
    public var description: String {
        let bound = PostgresConnectionWatchdog.format(timeout)
        return "the database at \(address) aborted the statement (statement timeout \(bound)): \(detail)"
    }

    /// The server's SQLSTATE for a statement it cancelled.
    static let sqlStateQueryCanceled = "57014"
}

extension PostgresStatementTimeoutError: TimeoutFailure {}

/// Turning what went wrong into the `StoreError` an operation throws.
extension PostgresStore {
    func storeError(_ operation: StoreError.Operation, key: String?, _ error: any Error, since started: ContinuousClock.Instant) -> any Error {
        // The caller's task was cancelled: that is not the database's failure, and callers (a
        // fallback chain) must see it as cancellation.
        if Task.isCancelled, !(error is Timeout) { return CancellationError() }
        // Creating the table: the statement that failed is the story.
        var error = error
        var creatingTable = false
        if let failure = error as? PreparationFailure {
            creatingTable = true
            error = failure.error
        }
        var reason: String
        var underlying: (any Error)? = error
        switch error {
        case Timeout.connect:
            // Typed either way: what the store's own connection attempt failed with, or no answer in time.
            let failure = watchdog.failure(since: started) ?? PostgresConnectionError(
                cause: .unreachable, address: address, detail: "no connection within \(formatSeconds(connectTimeout))")
            underlying = failure
            reason = failure.description
        case Timeout.busy:
            underlying = nil
            reason = "no free connection to \(address) within \(formatSeconds(max(connectTimeout, queryTimeout))): "
                + "every pooled connection stayed busy"
        case Timeout.query:
            underlying = nil
            reason = "no answer from the database at \(address) within \(formatSeconds(queryTimeout))"
        case let error as PSQLError
        where error.code == .server && error.serverInfo?[.sqlState] == PostgresStatementTimeoutError.sqlStateQueryCanceled:
            let timeout = PostgresStatementTimeoutError(
                timeout: statementTimeout, address: address, detail: Self.describe(error, address: address), error: error)
            underlying = timeout
            reason = timeout.description
        case let error as PSQLError:
            reason = Self.describe(error, address: address)
        case is CancellationError:
            return error
        default:
            reason = "\(error)"
        }
        if creatingTable { reason = "creating table \(table) failed: " + reason }
        return StoreError(store: description, operation: operation, key: key, reason: reason, underlying: underlying)
    }

    /// A `PSQLError` in words, without the query or its bind values.
    static func describe(_ error: PSQLError, address: String) -> String {
        switch error.code {
        case .server:
            let message = error.serverInfo?[.message] ?? "server error"
            let state = error.serverInfo?[.sqlState].map { " (SQLSTATE \($0))" } ?? ""
            return "\(message)\(state)"
        case .connectionError, .serverClosedConnection, .clientClosedConnection, .uncleanShutdown, .sslUnsupported:
            let cause = error.underlying.map { ": \($0)" } ?? ": \(error.code)"
            return "database unreachable at \(address)\(cause)"
        case .poolClosed:
            return "the connection pool is closed"
        default:
            return "\(error.code)" + (error.underlying.map { ": \($0)" } ?? "")
        }
    }

    func formatSeconds(_ duration: Duration) -> String {
        PostgresConnectionWatchdog.format(duration)
    }
}
#endif
