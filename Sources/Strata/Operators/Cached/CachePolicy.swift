
/// The common ways to combine a remote source with a cache, in the vocabulary of Apollo and Store:
/// each preset is built from Strata's own operators, so it behaves exactly like the chain it names.
///
/// | preset | reads | on a remote failure | chain it stands for |
/// |---|---|---|---|
/// | ``cacheFirst(maxAge:)`` | the cache while younger than `maxAge`, else the remote (and caches it) | a ``FallbackError`` naming both tiers | `store.loader(freshness: .maxAge(m)).fallingBack(to: remote.writingThrough(to: store))` |
/// | ``networkFirst(maxStale:)`` | the remote (and caches it) | the cached copy if younger than `maxStale` (RFC 5861 stale-if-error), else the original error | `remote.servingStaleOnError(from: store, maxStale: s)` |
/// | ``cacheOnly(maxAge:)`` | the cache only | — | `store.loader(freshness:)` |
/// | ``networkOnly`` | the remote (and caches it) | the error | `remote.writingThrough(to: store)` |
///
/// For cache-and-network (stale-while-revalidate), see ``Loader/staleWhileRevalidating(in:key:maxStale:)``.
public enum CachePolicy: Sendable, CustomStringConvertible {
    /// Serve the cached value while it is younger than `maxAge`; otherwise load, cache and serve.
    case cacheFirst(maxAge: Duration)
    /// Load, cache and serve; when the load fails, serve a cached copy younger than `maxStale`.
    case networkFirst(maxStale: Duration?)
    /// Serve only cached values (younger than `maxAge` when given); never load.
    case cacheOnly(maxAge: Duration?)
    /// Always load (and cache what was loaded); never serve from the cache.
    case networkOnly

    public var description: String {
        switch self {
        case .cacheFirst(let maxAge): "cache-first(max-age \(maxAge.formattedAge))"
        case .networkFirst(let maxStale): "network-first(max-stale \(maxStale.map(\.formattedAge) ?? "any"))"
        case .cacheOnly(let maxAge): "cache-only(max-age \(maxAge.map(\.formattedAge) ?? "any"))"
        case .networkOnly: "network-only"
        }
    }
}

