import FeedCachingExample

/// Joins a ``FeedStore`` (S1) to the `FeedCacheStore` that S0's `CachingFeedRepository` expects.
///
/// ```swift
/// let cache = FeedStoreCacheAdapter(CodableFeedStore(storeURL: url))
/// let repository = CachingFeedRepository(decoratee: remote, cache: cache)
/// ```
public struct FeedStoreCacheAdapter<Base: FeedStore>: FeedCacheStore {
    /// The adapted store.
    public let store: Base

    /// Adapts `store`.
    public init(_ store: Base) {
        self.store = store
    }

    /// Saves `items` in the store, replacing the previous feed.
    public func save(_ items: [FeedItem]) async throws {
        try await store.save(items)
    }

    /// The store's feed; `[]` when there is none.
    public func load() async throws -> [FeedItem] {
        try await store.load()
    }
}

extension FeedStoreCacheAdapter: CustomStringConvertible {
    /// The adapted store's description.
    public var description: String {
        (store as? CustomStringConvertible)?.description ?? "\(Base.self)"
    }
}
