#if Postgres
import Foundation
import Logging
import PostgresNIO
@_spi(StrataInternals) import Strata

/// The server's bound on each statement (``statementTimeout``), and the transactions an operation's
/// statements run in.
///
/// The store's own watchdog gives up on an operation after ``queryTimeout`` and closes its
/// connection, but a server does not notice a closed connection while a statement waits (for a lock,
/// say): the statement goes on, and may commit after the caller was told it failed. The server's
/// `statement_timeout`, strictly below ``queryTimeout``, makes the server abort the statement and roll
/// it back first, so a write the store reports as failed by ``PostgresStatementTimeoutError`` did not happen.
extension PostgresStore {
    /// Nine tenths of `queryTimeout`: the server's answer has the last tenth to arrive before the
    /// store stops waiting (3 seconds for the default 30).
    static func defaultStatementTimeout(below queryTimeout: Duration) -> Duration {
        queryTimeout * 9 / 10
    }

    /// `duration` rounded down to whole milliseconds, the unit of the server's `statement_timeout`.
    static func wholeMilliseconds(_ duration: Duration) -> Duration {
        .milliseconds(milliseconds(duration))
    }

    static func milliseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1_000 + duration.components.attoseconds / 1_000_000_000_000_000
    }

    /// ``statementTimeout`` as the value of the `statement_timeout` setting (milliseconds).
    var statementTimeoutSetting: String { "\(Self.milliseconds(statementTimeout))" }

    /// A session of the store's own client that has ``statementTimeout`` set: held weakly, so a
    /// closed connection's entry goes with it.
    struct BoundSession: Sendable {
        weak let connection: PostgresConnection?
    }

    /// Creates the table (or the ``preparation``'s tables) once per store, in one transaction whose
    /// statements are bounded like the operations'.
    func prepare(on connection: PostgresConnection) async throws {
        guard !state.withLock({ $0.tableReady }) else { return }
        do {
            try await transaction(on: connection) { connection in
                if let preparation = self.preparation {
                    try await preparation(connection, self.logger)
                } else {
                    try await self.createTable(on: connection)
                }
            }
        } catch {
            throw PreparationFailure(error: error)
        }
        state.withLock { $0.tableReady = true }
    }

    /// Runs an operation's statements bounded by ``statementTimeout`` on the server: in the
    /// connection's session on the store's own client (set once per connection), in a transaction of
    /// their own (`SET LOCAL`) on the application's client.
    func bounded<R: Sendable>(
        on connection: PostgresConnection, _ body: (PostgresConnection) async throws -> R
    ) async throws -> R {
        if boundsStatements, runner == nil {
            return try await transaction(on: connection, body)
        }
        try await bindSession(connection)
        return try await body(connection)
    }

    /// Runs `body` in one transaction, its statements bounded by ``statementTimeout``.
    func transaction<R: Sendable>(
        on connection: PostgresConnection, _ body: (PostgresConnection) async throws -> R
    ) async throws -> R {
        try await bindSession(connection)
        return try await connection.transactionUnlessClosed(logger: logger) { connection in
            if boundsStatements, runner == nil {
                // The application's session: the setting ends with the transaction.
                try await Self.drain(connection.queryUnlessClosed(
                    "SELECT set_config('statement_timeout', \(statementTimeoutSetting), true)", logger: logger))
            }
            return try await body(connection)
        }
    }

    /// Sets ``statementTimeout`` for the session of a connection of the store's own client, once per
    /// connection (a no-op on the application's client, or when the store does not bound statements).
    private func bindSession(_ connection: PostgresConnection) async throws {
        guard boundsStatements, runner != nil else { return }
        let key = ObjectIdentifier(connection)
        if boundSessions.withLock({ $0[key]?.connection === connection }) { return }
        try await Self.drain(connection.queryUnlessClosed(
            "SELECT set_config('statement_timeout', \(statementTimeoutSetting), false)", logger: logger))
        boundSessions.withLock { sessions in
            sessions = sessions.filter { $0.value.connection != nil }
            sessions[key] = BoundSession(connection: connection)
        }
    }

    /// Creating the table failed: ``storeError(_:key:_:since:)`` says so.
    struct PreparationFailure: Error {
        var error: any Error
    }
}
#endif
