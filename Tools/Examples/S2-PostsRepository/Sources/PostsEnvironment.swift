import Foundation
import Strata
import StrataOutbox

/// The one place where the app chooses its posts stack.
///
/// Features receive `any PostRepo` and never learn which environment built it.
///
/// ```swift
/// let outbox = PostsEnvironment.makeOutbox(directory: supportURL.appendingPathComponent("outbox"))
/// let environment = PostsEnvironment.production(baseURL: apiURL, cacheDirectory: cachesURL, outbox: outbox)
/// let repo = environment.makePostRepo()
/// Task { try await outbox.run() }                        // sends queued posts when it can
/// let post = try await repo.getPost(id: 1)
/// let result = try await repo.submitPost(title: "Hi", body: "…")   // .created(post) or .pending(…)
/// ```
public enum PostsEnvironment: Sendable {
    /// In-memory repository behind an in-memory cache: no network, no files. For previews, tests and
    /// working offline on the UI. Each ``makePostRepo(transport:delivered:)`` starts with no posts.
    case mock
    /// The HTTP API at `baseURL` behind a cache of one file per post in `cacheDirectory`, so posts
    /// read or created once are served locally from then on, across launches and without a network;
    /// and, in front, ``PostRepoOutboxDecorator`` on `outbox`, so a post written while the server
    /// cannot be reached is queued and sent later, once.
    ///
    /// Keep the outbox's directory out of caches the system may purge (``makeOutbox(directory:environment:retry:)``):
    /// a cache can be rebuilt from the server, a queued post cannot.
    case production(baseURL: URL, cacheDirectory: URL, outbox: Outbox)

    /// An outbox keeping its writes as files in `directory` (Strata's `FileOutboxStorage`: atomic,
    /// checksummed, one file per write), named `posts` in logs and metrics.
    /// - Parameters:
    ///   - environment: the outbox's wall clock, clock for backoffs, and logger.
    ///   - retry: the backoff after a failed send.
    public static func makeOutbox(
        directory: URL, environment: LoadEnvironment = .live, retry: OutboxRetryPolicy = OutboxRetryPolicy()
    ) -> Outbox {
        Outbox(
            storage: FileOutboxStorage(directory: directory, logger: environment.logger), name: "posts",
            environment: environment, retry: retry)
    }

    /// Builds the repository for this environment.
    ///
    /// - Parameters:
    ///   - transport: how production sends HTTP requests (the default is URLSession; the demo passes
    ///     a counting client). The mock ignores it.
    ///   - delivered: production calls it after a queued post was created (see
    ///     ``PostRepoOutboxDecorator/init(inner:outbox:delivered:)``). The mock never queues.
    public func makePostRepo(
        transport: any HTTPTransport = URLSessionHTTPClient.shared,
        delivered: (@Sendable (PendingPost, Post) async -> Void)? = nil
    ) -> any PostRepo {
        switch self {
        case .mock:
            return PostRepoCacheDecorator(inner: InMemoryPostRepo(), cache: InMemoryPostCache())
        case .production(let baseURL, let cacheDirectory, let outbox):
            let api = HTTPJSONAPIClient(baseURL: baseURL, transport: transport)
            let cached = PostRepoCacheDecorator(inner: HTTPPostRepo(client: api), cache: DiskPostCache(directory: cacheDirectory))
            return PostRepoOutboxDecorator(inner: cached, outbox: outbox, delivered: delivered)
        }
    }
}
