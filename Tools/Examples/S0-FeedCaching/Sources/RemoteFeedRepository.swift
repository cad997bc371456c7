import Foundation
import Strata

/// The feed from the server: `GET url`, decoded as `[FeedItem]`.
///
/// It is a Strata loader with a `FeedRepository` face:
///
/// ```swift
/// HTTPLoader(url: url, transport: client).decoding([FeedItem].self)
/// ```
///
/// It throws Strata's `HTTPError`: `.transport` when the server cannot be reached, `.status` for a
/// non-2xx answer, `.decoding` for a body that is not a feed. Each case names the URL.
public struct RemoteFeedRepository: FeedRepository {
    /// The Strata loader doing the work, for chains that want to decorate it with Strata's operators
    /// (``FeedComposer/makeStaleIfErrorFeedRepository(feedURL:store:key:client:now:logger:)``).
    public let loader: DecodingLoader<HTTPLoader<Void>, [FeedItem]>

    /// A repository that loads the feed at `url` through `client`.
    public init(url: URL, client: any HTTPTransport = URLSessionHTTPClient.shared) {
        self.loader = HTTPLoader(url: url, transport: client).decoding([FeedItem].self)
    }

    public func fetchFeed() async throws -> [FeedItem] {
        try await loader.load()
    }
}

extension RemoteFeedRepository: CustomStringConvertible {
    /// `HTTP GET <url>`, with credentials and query values redacted.
    public var description: String { "\(loader)" }
}
