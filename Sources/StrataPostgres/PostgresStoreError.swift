#if Postgres
import Foundation
import Logging
import PostgresNIO
@_spi(StrataInternals) import Strata

extension PostgresStore {
    func storeError(_ operation: StoreError.Operation, key: String?, _ error: any Error, since started: ContinuousClock.Instant) -> any Error {
        // The caller's task was cancelled: that is not the database's failure, and callers (a
        // fallback chain) must see it as cancellation.
        if Task.isCancelled, !(error is Timeout) { return CancellationError() }
        let reason: String
        var underlying: (any Error)? = error
        switch error {
        case Timeout.connect:
            underlying = nil
            let failure = probe.failure(since: started - ConnectionProbe.reuse) ?? "no connection within \(formatSeconds(connectTimeout))"
            reason = "database unreachable at \(address): \(failure)"
        case Timeout.busy:
            underlying = nil
            reason = "no free connection to \(address) within \(formatSeconds(max(connectTimeout, queryTimeout))): "
                + "every pooled connection stayed busy"
        case Timeout.query:
            underlying = nil
            reason = "no answer from the database at \(address) within \(formatSeconds(queryTimeout))"
        case let error as PSQLError:
            reason = Self.describe(error, address: address)
        case let error as PostgresTransactionError:
            // Creating the table: the first thing that went wrong is the story.
            let cause = error.beginError ?? error.closureError ?? error.commitError ?? error.rollbackError
            reason = "creating table \(table) failed: " + ((cause as? PSQLError).map { Self.describe($0, address: address) } ?? cause.map { "\($0)" } ?? "unknown error")
        case is CancellationError:
            return error
        default:
            reason = "\(error)"
        }
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
        let seconds = duration / .seconds(1)
        return seconds == seconds.rounded() ? "\(Int(seconds)) s" : "\(seconds) s"
    }
}
#endif
