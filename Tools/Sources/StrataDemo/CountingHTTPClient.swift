import Foundation
import Logging
@_spi(StrataInternals) import Strata

/// The S4 composition root: the one place where concrete loaders meet.
///
/// fresh local (max age) → remote + cache → stale local → bundled default.
public enum OfflineFirstFeed {
    /// The cache key of the feed.
    public static let cacheKey = "feed"

    /// The default feed shipped in this module's bundle (`Resources/default_feed.json`).
    public static var bundledDefaults: BundledLoader {
        BundledLoader(resource: "default_feed", withExtension: "json", in: .module)
    }

    /// Builds the offline-first feed chain.
    /// - Parameters:
    ///   - store: where the feed is cached.
    ///   - feedURL: the remote feed.
    ///   - defaults: the bundled default feed (the last tier).
    ///   - maxAge: how long a cached feed is served without asking the server (S4: 24 hours).
    ///   - client: the HTTP client.
    ///   - now: the wall clock (inject one to move time in tests and the demo).
    public static func makeLoader(
        store: FileStore<[FeedItem]>,
        feedURL: URL,
        defaults: BundledLoader = OfflineFirstFeed.bundledDefaults,
        maxAge: FreshnessPolicy = .maxAge(.hours(24)),
        client: any HTTPTransport = URLSessionHTTPClient.shared,
        now: @escaping @Sendable () -> Date = { Date() },
        logger: Logger = Logger(label: "strata.demo")
    ) -> some Loader<Void, [FeedItem]> {
        let remote = HTTPLoader(url: feedURL, transport: client).decoding([FeedItem].self)
        return store.loader(key: cacheKey, freshness: maxAge).named("fresh local")
            .fallingBack(to: remote.writingThrough(to: store, key: cacheKey).named("remote"))
            .fallingBack(to: store.loader(key: cacheKey, freshness: .any).named("stale local"))
            .fallingBack(to: defaults.decoding([FeedItem].self).named("bundled default"))
            .environment(LoadEnvironment(now: now, logger: logger))
    }
}

/// An ``HTTPTransport`` that counts the requests it sends (the demo shows whether the network was used).
public final class CountingHTTPClient: HTTPTransport, Sendable {
    private let base: any HTTPTransport
    private let count = Locked(0)

    public init(_ base: any HTTPTransport = URLSessionHTTPClient.shared) {
        self.base = base
    }

    /// Requests sent so far, answered or not.
    public var requestCount: Int { count.withLock { $0 } }

    public func send(_ request: HTTPRequest, body: Data?, options: HTTPRequestOptions) async throws -> HTTPReply {
        count.withLock { $0 += 1 }
        return try await base.send(request, body: body, options: options)
    }
}
