@_spi(StrataInternals) import Strata
import StrataOutbox

/// How a live query decides: when its value is stale, what refetches it, what the network being
/// away does, whether it retries, how long it stays in memory without observers.
///
/// ```swift
/// let feed = queries.query(["feed"], policy: QueryPolicy(staleAfter: .seconds(5 * 60)), chain: feedChain)
/// ```
public struct QueryPolicy: Sendable {
    /// How long a value stays fresh after its tier stored it (by its provenance: a value read from
    /// a two-day-old cache entry is stale at once). `.zero` (the default): every trigger refetches.
    public var staleAfter: Duration
    /// What the network being away does (``NetworkMode/offlineFirst`` by default).
    public var networkMode: NetworkMode
    /// Whether the app coming to the foreground refetches a stale, observed query.
    public var refetchOnForeground: Bool
    /// The shortest time between two foreground refetches of one query.
    public var foregroundThrottle: Duration
    /// Whether the network coming back refetches a stale, observed query.
    public var refetchOnReconnect: Bool
    /// How often an observed, stale query refetches by itself; `nil`: never. The ticks pause while
    /// the app is in the background (``QueryClient/enteredBackground()``) unless
    /// `refetchIntervalInBackground`.
    public var refetchInterval: Duration?
    /// Whether every interval tick refetches, fresh or not (a dashboard polling a counter): opt in.
    /// `false` (the default): a tick refetches only a stale value.
    public var refetchIntervalWhenFresh: Bool
    /// Whether interval ticks go on while the app is in the background.
    public var refetchIntervalInBackground: Bool
    /// The query's own retries of a failed load and their delays (`paused(backingOff)` in
    /// between); `nil` (the default) leaves retrying to the chain.
    public var retry: RetryPolicy?
    /// How long a query without observers stays in memory (its stores keep their copies).
    public var dropAfter: Duration

    /// A policy; every parameter has the default its property documents.

    public init(
        staleAfter: Duration = .zero, networkMode: NetworkMode = .offlineFirst,
        refetchOnForeground: Bool = true, foregroundThrottle: Duration = .seconds(30),
        refetchOnReconnect: Bool = true, refetchInterval: Duration? = nil, refetchIntervalWhenFresh: Bool = false,
        refetchIntervalInBackground: Bool = false, retry: RetryPolicy? = nil, dropAfter: Duration = .seconds(300)
    ) {
        self.staleAfter = staleAfter
        self.networkMode = networkMode
        self.refetchOnForeground = refetchOnForeground
        self.foregroundThrottle = foregroundThrottle
        self.refetchOnReconnect = refetchOnReconnect
        self.refetchInterval = refetchInterval
        self.refetchIntervalWhenFresh = refetchIntervalWhenFresh
        self.refetchIntervalInBackground = refetchIntervalInBackground
        self.retry = retry
        self.dropAfter = dropAfter
    }
}
