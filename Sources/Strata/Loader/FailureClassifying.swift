import Foundation

/// How an error reads to the resilience operators: ``Loader/retrying(_:)`` and
/// ``Loader/guarded(by:)`` ask it instead of knowing each layer's error types.
///
/// ``HTTPError``, ``TimeoutError`` and ``CircuitOpenError`` adopt it. Adopt it in an error of your own
/// (a custom client's, a database's) to have it retried or counted by a breaker:
///
/// ```swift
/// enum ChatError: Error, FailureClassifying {
///     case overloaded(retryIn: Duration), rejected
///
///     var isTransientFailure: Bool { if case .overloaded = self { true } else { false } }
///     var countsAsOutage: Bool { isTransientFailure }
///     func requestedRetryDelay(now: Date) -> Duration? {
///         if case .overloaded(let wait) = self { wait } else { nil }
///     }
/// }
/// ```
///
/// An error that does not adopt it is not retried by ``RetryPolicy/isTransient(_:)`` and counts as a
/// failure for ``CircuitBreakerPolicy/countsAsFailure(_:)``. `CancellationError` is neither, whatever it says.
public protocol FailureClassifying: Error {
    /// Whether trying the same load again may succeed (a dropped connection, a 503, a timeout).
    var isTransientFailure: Bool { get }

    /// Whether the failure says the tier is unhealthy, so a ``CircuitBreaker`` counts it (a 5xx, no
    /// response); a failure of the request itself (a 404, a body that does not decode) is not.
    var countsAsOutage: Bool { get }

    /// How long the server asked to wait before trying again (an HTTP `Retry-After`), or `nil`.
    /// `now` is the wall-clock time, for a delay given as a date.
    func requestedRetryDelay(now: Date) -> Duration?
}

extension FailureClassifying {
    /// By default a failure counts as an outage when it is transient.
    public var countsAsOutage: Bool { isTransientFailure }

    /// By default no delay is requested.
    public func requestedRetryDelay(now: Date) -> Duration? { nil }
}
