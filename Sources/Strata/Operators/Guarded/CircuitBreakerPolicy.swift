/// When a ``CircuitBreaker`` opens and for how long.
public struct CircuitBreakerPolicy: Sendable, CustomStringConvertible {
    /// The share of failed loads in the sampling window that opens the circuit (0…1).
    public var failureRatio: Double
    /// How far back outcomes are counted.
    public var samplingDuration: Duration
    /// The fewest loads in the window before the ratio is judged, so one early failure does not open it.
    public var minimumThroughput: Int
    /// How long the circuit stays open before a trial load is let through.
    public var breakDuration: Duration
    /// Whether an error counts as a failure of the tier. ``CircuitBreakerPolicy/countsAsFailure(_:)`` by default.
    public var isFailure: @Sendable (any Error) -> Bool

    /// - Parameters:
    ///   - failureRatio: opens at this share of failures (default 0.5).
    ///   - samplingDuration: the rolling window outcomes are counted in (default 30 s).
    ///   - minimumThroughput: loads needed in the window before it can open (default 10).
    ///   - breakDuration: how long it stays open (default 30 s).
    ///   - isFailure: which errors count (default: all but cancellation and client errors).
    public init(
        failureRatio: Double = 0.5,
        samplingDuration: Duration = .seconds(30),
        minimumThroughput: Int = 10,
        breakDuration: Duration = .seconds(30),
        isFailure: @escaping @Sendable (any Error) -> Bool = CircuitBreakerPolicy.countsAsFailure
    ) {
        precondition((0...1).contains(failureRatio), "failureRatio is a fraction from 0 to 1")
        precondition(samplingDuration > .zero && breakDuration >= .zero, "the sampling duration must be positive and the break duration not negative")
        precondition(minimumThroughput >= 1, "minimumThroughput must be at least 1")
        self.failureRatio = failureRatio
        self.samplingDuration = samplingDuration
        self.minimumThroughput = minimumThroughput
        self.breakDuration = breakDuration
        self.isFailure = isFailure
    }

    /// The default: every error counts except cancellation and an error that adopts
    /// ``FailureClassifying`` and says it is no outage (an open circuit; for HTTP, see
    /// ``HTTPError/countsAsOutage``).
    public static func countsAsFailure(_ error: any Error) -> Bool {
        if error is CancellationError { return false }
        return (error as? any FailureClassifying)?.countsAsOutage ?? true
    }

    public var description: String {
        "\(Int((failureRatio * 100).rounded()))% of ≥\(minimumThroughput) in \(samplingDuration.formattedAge), break \(breakDuration.formattedAge)"
    }
}
