import Strata

/// The article's caching decorator: fresh items when the decoratee succeeds, the cached items when it
/// fails, and the decoratee's **original** error when there is nothing cached.
///
/// - On success the items are saved, then returned. A failed save never fails the load.
/// - On failure the cached items are returned if there are any. When the cache is empty or cannot be
///   read, the decoratee's error is thrown unchanged: callers see exactly what they would have seen
///   without a cache.
/// - A cancelled load is never answered from the cache and saves nothing.
///
/// Strata's `staleIfError(in:key:)` operator is the same policy as a one-liner
/// (``FeedComposer/makeStaleIfErrorFeedRepository(feedURL:store:key:client:now:logger:)``). The two
/// differ on one point: a cached *empty* feed. This decorator cannot tell it from "nothing cached"
/// (``FeedCacheStore/load()`` returns `[]` for both), so it throws; Strata's stores can, so
/// `staleIfError` serves the empty feed.
public struct CachingFeedRepository: FeedRepository {
    private let decoratee: any FeedRepository
    private let cache: any FeedCacheStore

    /// Decorates `decoratee` with `cache`.
    public init(decoratee: any FeedRepository, cache: any FeedCacheStore) {
        self.decoratee = decoratee
        self.cache = cache
    }

    public func fetchFeed() async throws -> [FeedItem] {
        let items: [FeedItem]
        do {
            items = try await decoratee.fetchFeed()
        } catch {
            if error is CancellationError { throw error }
            try Task.checkCancellation()
            // Tells a `loadServed()` caller which tier failed and why; costs nothing otherwise.
            LoadRecorder.record(.tierFailed(tier: describeRepository(decoratee), error: error))
            let cached = (try? await cache.load()) ?? []
            try Task.checkCancellation()
            guard !cached.isEmpty else { throw error }
            return cached
        }
        try Task.checkCancellation()
        // The user gets fresh items even when they cannot be kept for later.
        try? await cache.save(items)
        return items
    }
}

extension CachingFeedRepository: CustomStringConvertible {
    /// `<decoratee> + cache(<cache>)`.
    public var description: String {
        let cacheName = (cache as? CustomStringConvertible)?.description ?? "\(type(of: cache))"
        return "\(describeRepository(decoratee)) + cache(\(cacheName))"
    }
}
