/// The waits between tries: each `multiplier` times the one before, from `initialDelay` up to
/// `maxDelay`, shortened by up to `jitter` at random so that clients that failed together do not
/// retry together.
///
/// The one backoff of the library: ``RetryPolicy`` (`retrying(_:)`), the outbox's retry policy, the
/// shared tier's repairs in ``TieredStore`` and the PostgreSQL backplane's reconnects all compute
/// their waits with it.
public struct Backoff: Sendable, Hashable, CustomStringConvertible {
    /// The wait before the first retry, before jitter.
    public var initialDelay: Duration
    /// How much each wait grows over the one before (2: doubling; 1: a fixed wait).
    public var multiplier: Double
    /// The longest wait, before jitter.
    public var maxDelay: Duration
    /// The largest fraction a wait is shortened by at random, from 0 (none) to 1.
    public var jitter: Double

    /// A backoff from `initialDelay`, growing `multiplier` times per retry up to `maxDelay`, each
    /// wait shortened by up to `jitter` (a fraction from 0 to 1) at random. A wait is never negative
    /// and never longer than `maxDelay`; `jitter` is clamped to 0…1.
    public init(initialDelay: Duration, multiplier: Double = 2, maxDelay: Duration, jitter: Double = 0) {
        self.initialDelay = initialDelay
        self.multiplier = multiplier
        self.maxDelay = maxDelay
        self.jitter = jitter
    }

    /// The wait before retry number `retry` (1 for the first), with `random` (a number from 0 to 1,
    /// clamped) choosing how much jitter takes off.
    public func delay(beforeRetry retry: Int, random: Double) -> Duration {
        let exponent = Double(min(max(0, retry - 1), 64))
        var factor = 1.0
        for _ in 0..<Int(exponent) {
            factor *= multiplier
            if factor * (initialDelay / .seconds(1)) >= maxDelay / .seconds(1) || !factor.isFinite { break }
        }
        let base = min(maxDelay / .seconds(1), initialDelay / .seconds(1) * factor)
        let jittered = base * (1 - min(max(jitter, 0), 1) * min(max(random, 0), 1))
        return .seconds(max(0, jittered))
    }

    public var description: String {
        "\(initialDelay.formattedAge) ×\(multiplier) ≤ \(maxDelay.formattedAge)" + (jitter > 0 ? ", jitter \(jitter)" : "")
    }
}

/// A policy whose waits are a ``Backoff``, kept as four fields of its own (``RetryPolicy``, the
/// outbox's retry policy).
public protocol BackingOff {
    /// The wait before the first retry, before jitter.
    var initialDelay: Duration { get set }
    /// How much each wait grows over the one before.
    var multiplier: Double { get set }
    /// The longest wait, before jitter.
    var maxDelay: Duration { get set }
    /// The largest fraction a wait is shortened by at random.
    var jitter: Double { get set }
}

extension BackingOff {
    /// The policy's waits, as the library's one ``Backoff``.
    public var backoff: Backoff {
        get { Backoff(initialDelay: initialDelay, multiplier: multiplier, maxDelay: maxDelay, jitter: jitter) }
        set {
            initialDelay = newValue.initialDelay
            multiplier = newValue.multiplier
            maxDelay = newValue.maxDelay
            jitter = newValue.jitter
        }
    }
}
