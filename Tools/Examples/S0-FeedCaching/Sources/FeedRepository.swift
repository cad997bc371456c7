/// Where the feed comes from, as every feature sees it.
///
/// Features and the use case hold a `FeedRepository` and nothing more concrete. Whether the feed comes
/// straight from the network, from a cache when the network fails, or through a logger is decided at
/// the composition root (``FeedComposer``) by stacking decorators that are themselves
/// `FeedRepository`s: `LoggingFeedRepository(CachingFeedRepository(RemoteFeedRepository))`.
///
/// ## Contract
/// - `fetchFeed()` may be called from any task, also concurrently.
/// - A cancelled task gets `CancellationError`, never an answer from a fallback.
/// - Errors are those of the layer that failed, unchanged, so callers can tell why.
public protocol FeedRepository: Sendable {
    /// The current feed, or the error of the layer that could not provide it.
    func fetchFeed() async throws -> [FeedItem]
}
