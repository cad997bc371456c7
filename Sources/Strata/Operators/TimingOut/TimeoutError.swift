/// A load that did not finish within its deadline.
public struct TimeoutError: Error, Sendable, CustomStringConvertible {
    /// The loader that was too slow, as named in the chain.
    public var tier: String
    /// The deadline it missed.
    public var timeout: Duration

    public init(tier: String, timeout: Duration) {
        self.tier = tier
        self.timeout = timeout
    }

    public var description: String { "\(tier): no result within \(timeout.formattedAge); the load was cancelled" }
}

extension TimeoutError: FailureClassifying {
    /// A timeout is transient: the next attempt may be faster.
    public var isTransientFailure: Bool { true }
}

extension TimeoutError: TimeoutFailure {}
