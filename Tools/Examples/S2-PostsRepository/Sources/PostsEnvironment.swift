import Foundation
import Strata

/// The one place where the app chooses its posts stack.
///
/// Features receive `any PostRepo` and never learn which environment built it.
///
/// ```swift
/// let repo = PostsEnvironment.production(baseURL: apiURL, cacheDirectory: cachesURL).makePostRepo()
/// let post = try await repo.getPost(id: 1)
/// ```
public enum PostsEnvironment: Sendable {
    /// In-memory repository behind an in-memory cache: no network, no files. For previews, tests and
    /// working offline on the UI. Each ``makePostRepo(transport:)`` starts with no posts.
    case mock
    /// The HTTP API at `baseURL` behind a cache of one file per post in `cacheDirectory`, so posts
    /// read or created once are served locally from then on, across launches and without a network.
    case production(baseURL: URL, cacheDirectory: URL)

    /// Builds the repository for this environment.
    ///
    /// - Parameter transport: how production sends HTTP requests (the default is URLSession; the
    ///   demo passes a counting client). The mock ignores it.
    public func makePostRepo(transport: any HTTPTransport = URLSessionHTTPClient.shared) -> any PostRepo {
        switch self {
        case .mock:
            return PostRepoCacheDecorator(inner: InMemoryPostRepo(), cache: InMemoryPostCache())
        case .production(let baseURL, let cacheDirectory):
            let api = HTTPJSONAPIClient(baseURL: baseURL, transport: transport)
            return PostRepoCacheDecorator(inner: HTTPPostRepo(client: api), cache: DiskPostCache(directory: cacheDirectory))
        }
    }
}
