/// When `refreshingAhead(_:in:key:)` serves a cached copy as it is, serves it and refreshes it in the
/// background, or loads anew: the refresh-ahead counterpart of ``CachePolicy`` and ``RetryPolicy``.
public struct RefreshingAheadPolicy: Sendable, Hashable, CustomStringConvertible {
    /// The age from which a copy is expired and loaded anew.
    public var maxAge: Duration
    /// The age from which a read also refreshes the copy in the background; less than ``maxAge``.
    public var refreshAfter: Duration
    /// After a background refresh fails, how long the key is not refreshed in the background: the
    /// copy is served meanwhile, until it expires.
    public var failSafe: Duration

    /// A policy: copies expire at `maxAge`, and a read refreshes one in the background from
    /// `refreshAfter` (`nil`: 80 % of `maxAge`); a failed refresh holds the next back for `failSafe`.
    public init(maxAge: Duration, refreshAfter: Duration? = nil, failSafe: Duration = .seconds(30)) {
        self.maxAge = maxAge
        self.refreshAfter = refreshAfter ?? maxAge / 5 * 4
        self.failSafe = failSafe
    }

    /// Copies live `maxAge`; a read refreshes one in the background from `refreshAfter` (`nil`: 80 %
    /// of `maxAge`); a failed refresh holds the next back for `failSafe` (30 s).
    public static func maxAge(
        _ maxAge: Duration, refreshAfter: Duration? = nil, failSafe: Duration = .seconds(30)
    ) -> RefreshingAheadPolicy {
        RefreshingAheadPolicy(maxAge: maxAge, refreshAfter: refreshAfter, failSafe: failSafe)
    }

    public var description: String {
        "refresh after \(refreshAfter.formattedAge) of \(maxAge.formattedAge), fail-safe \(failSafe.formattedAge)"
    }
}
