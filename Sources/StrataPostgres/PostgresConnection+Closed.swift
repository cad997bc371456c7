#if Postgres
import Logging
import PostgresNIO

/// The connection was closed before a statement could be sent on it.
struct PostgresConnectionClosed: Error, CustomStringConvertible {
    var description: String { "the connection was closed before the statement was sent" }
}

extension PostgresConnection {
    /// Sends `query` unless the connection is closed, which throws ``PostgresConnectionClosed``.
    ///
    /// PostgresNIO (1.33) drops a query written to a connection whose channel has closed without
    /// ever answering it: a caller awaiting it waits forever, and a task group around that caller
    /// never ends. Checking first leaves a window of a few instructions (the channel closing between
    /// the check and the write); a caller that must never hang also runs the query through
    /// `raceAgainstDeadline`, which does not wait for a lost query once its bound has passed.
    @discardableResult
    func queryUnlessClosed(_ query: PostgresQuery, logger: Logger) async throws -> PostgresRowSequence {
        guard !isClosed else { throw PostgresConnectionClosed() }
        return try await self.query(query, logger: logger)
    }

    /// Runs `body` between `BEGIN` and `COMMIT`, with `ROLLBACK` when it throws, each sent only
    /// while the connection is open (``queryUnlessClosed(_:logger:)``). Throws the error of the
    /// step that failed. PostgresNIO's `withTransaction` sends its `ROLLBACK` whatever the state of
    /// the connection: after a connection closed under the body, it waits forever, and keeps the
    /// pool's lease with it.
    func transactionUnlessClosed<R: Sendable>(
        logger: Logger, _ body: (PostgresConnection) async throws -> R
    ) async throws -> R {
        for try await _ in try await queryUnlessClosed("BEGIN", logger: logger) {}
        let value: R
        do {
            value = try await body(self)
        } catch {
            // Best effort: on a closed connection it is not sent (the server rolled back already).
            _ = try? await queryUnlessClosed("ROLLBACK", logger: logger).collect()
            throw error
        }
        for try await _ in try await queryUnlessClosed("COMMIT", logger: logger) {}
        return value
    }
}
#endif
