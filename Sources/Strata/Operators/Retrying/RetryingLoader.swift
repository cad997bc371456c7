import Foundation

/// Runs its base loader again after transient failures; built by ``Loader/retrying(_:)``.
///
/// - Waits on the ``LoadEnvironment``'s `clock` (a `ManualClock` in tests), so backoff never sleeps in a test.
/// - Never retries after cancellation; cancelling during a wait throws `CancellationError` at once.
/// - When every attempt fails, or a failure is not transient, throws the **last** error unchanged,
///   so callers (and a ``Loader/fallingBack(to:)`` after it) still see the typed error.
/// - Does not repeat a write: the rule for non-idempotent requests is stated once, in the guide
///   <doc:Retrying#Writes-are-not-repeated>.
/// - Honours a server-requested delay (``FailureClassifying/requestedRetryDelay(now:)``, an HTTP
///   `Retry-After`).
/// - Each retry is recorded as ``LoadEvent/retrying(tier:attempt:delay:error:)``.
public struct RetryingLoader<Base: Loader>: Loader {
    public typealias Input = Base.Input
    public typealias Output = Base.Output

    public let base: Base
    public let policy: RetryPolicy

    public func load(_ input: Input) async throws -> Output {
        try await load(input, in: .current)
    }

    public func load(_ input: Input, in context: LoadContext) async throws -> Output {
        var attempt = 1
        let loadAttempt = LoadAttempt()
        while true {
            do {
                return try await loadAttempt.run { try await base.load(input, in: context) }
            } catch {
                try rethrowIfCancelled(error)
                guard attempt < policy.maxAttempts, policy.shouldRetry(error),
                      policy.retriesNonIdempotentRequests || !loadAttempt.sentUnkeyedNonIdempotentRequest,
                      let delay = delay(beforeRetry: attempt, after: error, now: context.environment.now)
                else { throw error }
                context.record(.retrying(tier: base.chainSummary, attempt: attempt + 1, delay: delay, error: error))
                try await context.environment.clock.sleep(for: delay)
                attempt += 1
            }
        }
    }

    /// The wait before the next attempt, or `nil` when the server asked for a longer one than the
    /// policy accepts.
    private func delay(beforeRetry retry: Int, after error: any Error, now: () -> Date) -> Duration? {
        let computed = policy.delay(beforeRetry: retry)
        guard policy.honorsRetryAfter, let retryAfter = retryAfter(of: error, now: now) else { return computed }
        guard retryAfter <= policy.maxRetryAfter else { return nil }
        return max(computed, retryAfter)
    }

    /// The delay the failure asks for (an HTTP `Retry-After`), if it says.
    private func retryAfter(of error: any Error, now: () -> Date) -> Duration? {
        (error as? any FailureClassifying)?.requestedRetryDelay(now: now())
    }
}

extension RetryingLoader: LoaderDescribing {
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
    public func retrying(_ policy: RetryPolicy = .exponential()) -> RetryingLoader<Self> {
        RetryingLoader(base: self, policy: policy)
    }
}
