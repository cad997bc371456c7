/// A load refused by an open circuit, without calling the tier behind it.
public struct CircuitOpenError: Error, Sendable, CustomStringConvertible {
    /// The breaker's name.
    public var breaker: String
    /// Its state when it refused: ``CircuitState/open``, ``CircuitState/isolated``, or
    /// ``CircuitState/halfOpen`` while another load is the trial.
    public var state: CircuitState
    /// How long until the breaker lets a trial through, when known.
    public var retryAfter: Duration?

    public init(breaker: String, state: CircuitState, retryAfter: Duration?) {
        self.breaker = breaker
        self.state = state
        self.retryAfter = retryAfter
    }

    public var description: String {
        let wait = retryAfter.map { ", next trial in \(($0).formattedAge)" } ?? ""
        return "circuit '\(breaker)' is \(state): failing fast\(wait)"
    }
}

extension CircuitOpenError: FailureClassifying {
    /// Never retried at once: the breaker refuses until its break is over.
    public var isTransientFailure: Bool { false }
    /// Never counted by a breaker (it is the breaker's own refusal).
    public var countsAsOutage: Bool { false }
}
