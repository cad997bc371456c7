/// The state of a ``CircuitBreaker``.
public enum CircuitState: Sendable, Hashable, CustomStringConvertible {
    /// Loads pass through; outcomes are sampled.
    case closed
    /// Loads fail fast with ``CircuitOpenError`` until the break duration has passed.
    case open
    /// The break is over: one trial load passes through; its outcome closes or reopens the circuit.
    case halfOpen
    /// Held open by ``CircuitBreaker/isolate()`` until ``CircuitBreaker/reset()``.
    case isolated

    public var description: String {
        switch self {
        case .closed: "closed"
        case .open: "open"
        case .halfOpen: "half-open"
        case .isolated: "isolated"
        }
    }
}
