/// Where ``CachingFeedRepository`` keeps the last feed it fetched.
///
/// ## Contract
/// - `load()` returns `[]` when nothing has been saved.
/// - `save(_:)` replaces whatever was saved before.
/// - Both may be called from any task.
public protocol FeedCacheStore: Sendable {
    /// Keeps `items` as the cached feed, replacing the previous one.
    func save(_ items: [FeedItem]) async throws
    /// The cached feed; `[]` when there is none.
    func load() async throws -> [FeedItem]
}
