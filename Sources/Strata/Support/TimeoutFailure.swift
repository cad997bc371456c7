/// What every timeout error of Strata is: a wait that ran out of time, with the limit it had.
///
/// One family for the errors that mean "too slow": ``TimeoutError`` (a load past `timingOut(after:)`),
/// ``WaitTimeoutError`` (a wait with a bound), `OutboxHandlerTimeoutError` (a write's handler past
/// its deadline, in StrataOutbox) and `PostgresStatementTimeoutError` (a statement PostgreSQL
/// cancelled, in StrataPostgres). Each type says more about its own layer; code that only needs to
/// know a limit was reached catches the family:
///
/// ```swift
/// do { try await feed.load() } catch let error as any TimeoutFailure {
///     show("Still loading after \(error.timeout.formattedAge)")
/// }
/// ```
public protocol TimeoutFailure: Error, Sendable, CustomStringConvertible {
    /// The limit that was reached.
    var timeout: Duration { get }
}

extension WaitTimeoutError: TimeoutFailure {}
