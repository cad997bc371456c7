import Foundation

/// When and how often ``RetryLoader`` tries again.
///
/// ```swift
/// remote.retrying(.exponential(attempts: 3))                                   // 200 ms, 400 ms (±20 %)
/// remote.retrying(.exponential(attempts: 5, initialDelay: .seconds(1), maxDelay: .seconds(30)))
/// remote.retrying(.constant(attempts: 2, delay: .milliseconds(100)))
/// ```
public struct RetryPolicy: Sendable, CustomStringConvertible {
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
    /// Whether a load that sent a non-idempotent request (a `POST`, a `PATCH`) without an
    /// `Idempotency-Key` is sent again. `false` by default: a retried `POST` whose first attempt
    /// reached the server creates the object twice. Loads whose request carried a key (see
    /// ``HTTPLoader/addingIdempotencyKey(header:)``) are retried either way; see ``LoadAttempt``.
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
    /// (``HTTPError``: no response, 408, 429, 5xx; a ``TimeoutError``); never cancellation, an open
    /// circuit (``CircuitOpenError``) or an error that does not adopt the protocol.
    public static func isTransient(_ error: any Error) -> Bool {
        if error is CancellationError { return false }
        return (error as? any FailureClassifying)?.isTransientFailure ?? false
    }

    /// The computed wait before retry number `retry` (1 for the first retry), jitter included.
    public func delay(beforeRetry retry: Int) -> Duration {
        let exponent = Double(max(0, retry - 1))
        let base = min(maxDelay / .seconds(1), initialDelay / .seconds(1) * pow(multiplier, exponent))
        let jittered = base * (1 - jitter * min(max(random(), 0), 1))
        return .seconds(max(0, jittered))
    }

    public var description: String {
        "retrying(\(maxAttempts) attempt\(maxAttempts == 1 ? "" : "s"), \(initialDelay.formattedAge) ×\(multiplier) ≤ \(maxDelay.formattedAge))"
    }
}

/// Runs its base loader again after transient failures; built by ``Loader/retrying(_:)``.
///
/// - Waits on the ``LoadEnvironment``'s `clock` (a `ManualClock` in tests), so backoff never sleeps in a test.
/// - Never retries after cancellation; cancelling during a wait throws `CancellationError` at once.
/// - When every attempt fails, or a failure is not transient, throws the **last** error unchanged,
///   so callers (and a ``Loader/fallingBack(to:)`` after it) still see the typed error.
/// - Never repeats a load that sent a non-idempotent request (`POST`, `PATCH`) without an
///   idempotency key, unless ``RetryPolicy/retriesNonIdempotentRequests``: each logical load runs in
///   a ``LoadAttempt`` that ``HTTPLoader`` reports its requests to, and whose idempotency key stays
///   the same across attempts.
/// - Honours a server-requested delay (``FailureClassifying/requestedRetryDelay(now:)``, an HTTP
///   `Retry-After`).
/// - Each retry is recorded as ``LoadEvent/retrying(tier:attempt:delay:error:)``.
public struct RetryLoader<Base: Loader>: Loader {
    public typealias Input = Base.Input
    public typealias Output = Base.Output

    public let base: Base
    public let policy: RetryPolicy

    public func load(_ input: Input) async throws -> Output {
        var attempt = 1
        let context = LoadAttempt()
        while true {
            do {
                return try await context.run { try await base.load(input) }
            } catch {
                try rethrowIfCancelled(error)
                guard attempt < policy.maxAttempts, policy.shouldRetry(error),
                      policy.retriesNonIdempotentRequests || !context.sentUnkeyedNonIdempotentRequest,
                      let delay = delay(beforeRetry: attempt, after: error)
                else { throw error }
                LoadRecorder.record(.retrying(tier: base.chainSummary, attempt: attempt + 1, delay: delay, error: error))
                try await LoadEnvironment.current.clock.sleep(for: delay)
                attempt += 1
            }
        }
    }

    /// The wait before the next attempt, or `nil` when the server asked for a longer one than the
    /// policy accepts.
    private func delay(beforeRetry retry: Int, after error: any Error) -> Duration? {
        let computed = policy.delay(beforeRetry: retry)
        guard policy.honorsRetryAfter, let retryAfter = retryAfter(of: error) else { return computed }
        guard retryAfter <= policy.maxRetryAfter else { return nil }
        return max(computed, retryAfter)
    }

    /// The delay the failure asks for (an HTTP `Retry-After`), if it says.
    private func retryAfter(of error: any Error) -> Duration? {
        (error as? any FailureClassifying)?.requestedRetryDelay(now: LoadEnvironment.current.now())
    }
}

extension RetryLoader: LoaderDescribing {
    public var loaderNode: LoaderNode {
        let inner = base.chainNode
        return LoaderNode(label: policy.description, summary: "\(inner.summary) + \(policy)", children: [inner])
    }
}

extension Loader {
    /// Retries transient failures with backoff.
    ///
    /// ```swift
    /// let remote = HTTPLoader(url: feedURL).retrying(.exponential(attempts: 3)).decoding([FeedItem].self)
    /// ```
    /// - Parameters:
    ///   - policy: attempts, backoff, jitter and which errors are retried.
    ///
    /// Waits on the ``LoadEnvironment``'s `clock`; its `now` turns an HTTP-date `Retry-After` into a wait.
    public func retrying(_ policy: RetryPolicy = .exponential()) -> RetryLoader<Self> {
        RetryLoader(base: self, policy: policy)
    }
}
