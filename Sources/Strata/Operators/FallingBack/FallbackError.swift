/// One tier's failure inside a ``FallbackError``.
public struct TierFailure: Sendable, CustomStringConvertible {
    /// The tier, as described in the chain.
    public var tier: String
    /// Why it failed.
    public var error: any Error

    public init(tier: String, error: any Error) {
        self.tier = tier
        self.error = error
    }

    public var description: String { "\(tier): \(error)" }
}

/// Every tier of a fallback chain failed.
///
/// `failures` lists each tier's failure in the order the tiers were tried, the primary's first. A tier
/// that fails with a `FallbackError` of its own — a nested chain (`a.fallingBack(to: b.fallingBack(to: c))`),
/// also when it is wrapped in `named`, `map` or `AnyLoader` — contributes its tiers, so the list is flat.
public struct FallbackError: Error, Sendable, CustomStringConvertible {
    public var failures: [TierFailure]

    /// - Precondition: `failures` is not empty (a fallback chain has at least two tiers).
    public init(failures: [TierFailure]) {
        precondition(!failures.isEmpty, "a FallbackError lists at least one tier's failure")
        self.failures = failures
    }

    /// The primary tier's error: the one to show when only one can be shown.
    public var primaryError: any Error { failures[0].error }

    public var description: String {
        "all \(failures.count) tiers failed: " + failures.map(\.description).joined(separator: "; ")
    }
}
