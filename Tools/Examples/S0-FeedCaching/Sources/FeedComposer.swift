import Foundation
import Logging
import Strata

/// The composition root: the one place where concrete feed types meet. Everything else sees
/// ``FeedRepository``.
///
/// Production stacks the article's decorators:
///
/// ```
/// LoggingFeedRepository            logs start, count, error
///   └─ CachingFeedRepository       saves fresh items; serves the cache when the network fails
///        └─ RemoteFeedRepository   GET /feed
/// ```
public enum FeedComposer {
    /// The production repository: `Logging(Caching(Remote))`.
    /// - Parameters:
    ///   - feedURL: the remote feed.
    ///   - cache: where fetched feeds are kept (``UserDefaultsFeedCacheStore``, or a file store
    ///     through an adapter).
    ///   - client: the HTTP client.
    ///   - logger: where the logging decorator writes.
    public static func makeFeedRepository(
        feedURL: URL,
        cache: some FeedCacheStore,
        client: any HTTPTransport = URLSessionHTTPClient.shared,
        logger: Logger = Logger(label: "feed")
    ) -> some FeedRepository {
        LoggingFeedRepository(
            decoratee: CachingFeedRepository(
                decoratee: RemoteFeedRepository(url: feedURL, client: client),
                cache: cache),
            logger: logger)
    }

    /// The same policy written with Strata's operator: `Logging(remote.staleIfError(in:key:))`.
    ///
    /// Unlike ``CachingFeedRepository`` it serves a cached empty feed, logs failed saves, and reports
    /// the cached copy's age.
    /// - Parameters:
    ///   - feedURL: the remote feed.
    ///   - store: any Strata store of feeds keyed by `String` (`UserDefaultsStore`, `FileStore`, `MemoryStore`).
    ///   - key: the key the feed is saved under.
    ///   - client: the HTTP client.
    ///   - now: the wall clock that stamps and ages saved feeds.
    ///   - logger: where the logging decorator and failed saves write.
    public static func makeStaleIfErrorFeedRepository(
        feedURL: URL,
        store: some Store<String, [FeedItem]>,
        key: String = "feed",
        client: any HTTPTransport = URLSessionHTTPClient.shared,
        now: @escaping @Sendable () -> Date = { Date() },
        logger: Logger = Logger(label: "feed")
    ) -> some FeedRepository {
        let remote = RemoteFeedRepository(url: feedURL, client: client).loader
        return LoggingFeedRepository(
            decoratee: StrataFeedRepository(remote.servingStaleOnError(in: store, key: key).environment(LoadEnvironment(now: now, logger: logger))),
            logger: logger)
    }

    /// The feed screen's view model over the production repository, cached in `UserDefaults`.
    /// - Parameters:
    ///   - feedURL: the remote feed.
    ///   - cacheSuiteName: the defaults suite of the cache (`nil` for the standard defaults).
    ///   - client: the HTTP client.
    ///   - logger: where the logging decorator writes.
    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @MainActor
    public static func makeFeedViewModel(
        feedURL: URL,
        cacheSuiteName: String? = nil,
        client: any HTTPTransport = URLSessionHTTPClient.shared,
        logger: Logger = Logger(label: "feed")
    ) -> FeedViewModel {
        let repository = makeFeedRepository(
            feedURL: feedURL, cache: UserDefaultsFeedCacheStore(suiteName: cacheSuiteName), client: client, logger: logger)
        return FeedViewModel(loadFeed: LoadFeedUseCase(repository: repository))
    }
}
