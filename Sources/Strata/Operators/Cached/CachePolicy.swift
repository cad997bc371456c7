
/// The common ways to combine a remote source with a cache, in the vocabulary of Apollo and Store:
/// each preset is built from Strata's own operators, so it behaves exactly like the chain it names.
///
/// | preset | reads | on a remote failure | chain it stands for |
/// |---|---|---|---|
/// | ``cacheFirst(freshness:)`` | the cache while `freshness` accepts it, else the remote (and caches it) | a ``FallbackError`` naming both tiers | `store.loader(freshness: f).fallingBack(to: remote.writingThrough(in: store))` |
/// | ``networkFirst(freshness:)`` | the remote (and caches it) | the cached copy if `freshness` accepts it (RFC 5861 stale-if-error), else the original error | `remote.servingStaleOnError(in: store, key: k)` (with `f` as its staleness bound) |
/// | ``cacheOnly(freshness:)`` | the cache only | — | `store.loader(freshness: f)` |
/// | ``networkOnly`` | the remote (and caches it) | the error | `remote.writingThrough(in: store)` |
///
/// For cache-and-network (stale-while-revalidate), see ``Loader/staleWhileRevalidating(in:key:freshness:)``.
public enum CachePolicy: Sendable, CustomStringConvertible {
    /// Serve the cached value while `freshness` accepts it (`.maxAge(.seconds(1 * 3600))`); otherwise load,
    /// cache and serve.
    case cacheFirst(freshness: FreshnessPolicy)
    /// Load, cache and serve; when the load fails, serve a cached copy `freshness` accepts (any
    /// age by default).
    case networkFirst(freshness: FreshnessPolicy = .any)
    /// Serve only cached values `freshness` accepts (any age by default); never load.
    case cacheOnly(freshness: FreshnessPolicy = .any)
    /// Always load (and cache what was loaded); never serve from the cache.
    case networkOnly

    public var description: String {
        switch self {
        case .cacheFirst(let freshness): "cache-first(\(freshness))"
        case .networkFirst(let freshness): "network-first(stale if error: \(freshness))"
        case .cacheOnly(let freshness): "cache-only(\(freshness))"
        case .networkOnly: "network-only"
        }
    }
}

