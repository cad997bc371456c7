import Foundation

/// When and how often ``RetryingLoader`` tries again.
///
/// ```swift
/// remote.retrying(.exponential(attempts: 3))                                   // 200 ms, 400 ms (±20 %)
/// remote.retrying(.exponential(attempts: 5, initialDelay: .seconds(1), maxDelay: .seconds(30)))
/// remote.retrying(.constant(attempts: 2, delay: .milliseconds(100)))
/// ```
public struct RetryPolicy: Sendable, BackingOff, CustomStringConvertible {
    /// Total attempts, the first included (`1` means no retry).
    public var maxAttempts: Int
    /// The wait before the first retry.
    public var initialDelay: Duration
    /// Each further wait is the previous one times this.
    public var multiplier: Double
    /// No computed wait is longer than this.
    public var maxDelay: Duration
    /// How much of each wait is randomised, from 0 (none) to 1: a wait `d` becomes a value in
    /// `d * (1 - jitter) ... d`, so many clients failing together do not retry in lockstep.
    public var jitter: Double
    /// Whether a failure is worth retrying. ``RetryPolicy/isTransient(_:)`` by default.
    public var shouldRetry: @Sendable (any Error) -> Bool
    /// Wait at least as long as a `Retry-After` header on a 429 or 503 asks, if that is no longer
    /// than ``maxRetryAfter``; a longer request ends the retries at once.
    public var honorsRetryAfter: Bool
    /// The longest `Retry-After` that is waited for.
    public var maxRetryAfter: Duration
    /// A number in `0..<1` for the jitter; replace it to make waits repeatable in tests.
    public var random: @Sendable () -> Double
    /// Whether a load that sent a non-idempotent request without an `Idempotency-Key` is sent
    /// again (`false` by default): see <doc:Retrying#Writes-are-not-repeated>, where the rule is stated.
    public var retriesNonIdempotentRequests: Bool

    public init(
        maxAttempts: Int,
        initialDelay: Duration,
        multiplier: Double = 2,
        maxDelay: Duration = .seconds(30),
        jitter: Double = 0.2,
        honorsRetryAfter: Bool = true,
        maxRetryAfter: Duration = .seconds(60),
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) },
        retriesNonIdempotentRequests: Bool = false,
        shouldRetry: @escaping @Sendable (any Error) -> Bool = RetryPolicy.isTransient
    ) {
        precondition(maxAttempts >= 1, "maxAttempts counts the first attempt and must be at least 1")
        precondition((0...1).contains(jitter), "jitter is a fraction from 0 to 1")
        self.maxAttempts = maxAttempts
        self.initialDelay = initialDelay
        self.multiplier = multiplier
        self.maxDelay = maxDelay
        self.jitter = jitter
        self.honorsRetryAfter = honorsRetryAfter
        self.maxRetryAfter = maxRetryAfter
        self.random = random
        self.retriesNonIdempotentRequests = retriesNonIdempotentRequests
        self.shouldRetry = shouldRetry
    }

    /// Exponential backoff: waits `initialDelay`, `initialDelay * 2`, … up to `maxDelay`, each with
    /// `jitter` randomised.
    public static func exponential(
        attempts: Int = 3, initialDelay: Duration = .milliseconds(200), maxDelay: Duration = .seconds(30),
        jitter: Double = 0.2
    ) -> RetryPolicy {
        RetryPolicy(maxAttempts: attempts, initialDelay: initialDelay, maxDelay: maxDelay, jitter: jitter)
    }

    /// The same wait before every retry, without jitter.
    public static func constant(attempts: Int, delay: Duration) -> RetryPolicy {
        RetryPolicy(maxAttempts: attempts, initialDelay: delay, multiplier: 1, maxDelay: delay, jitter: 0)
    }

    /// No retries.
    public static let never = RetryPolicy(maxAttempts: 1, initialDelay: .zero, jitter: 0)

    /// The default predicate: an error that adopts ``FailureClassifying`` and says it is transient
    /// (for HTTP, see ``HTTPError/isTransientFailure``; a ``TimeoutError`` is); never cancellation, an
    /// open circuit (``CircuitOpenError``) or an error that does not adopt the protocol.
    public static func isTransient(_ error: any Error) -> Bool {
        if error is CancellationError { return false }
        return (error as? any FailureClassifying)?.isTransientFailure ?? false
    }

    /// The computed wait before retry number `retry` (1 for the first retry), jitter included.
    public func delay(beforeRetry retry: Int) -> Duration {
        backoff.delay(beforeRetry: retry, random: random())
    }

    public var description: String {
        "retrying(\(maxAttempts) attempt\(maxAttempts == 1 ? "" : "s"), \(initialDelay.formattedAge) ×\(multiplier) ≤ \(maxDelay.formattedAge))"
    }
}
