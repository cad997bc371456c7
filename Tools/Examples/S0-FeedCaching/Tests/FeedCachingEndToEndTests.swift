import Foundation
import Testing
import Strata
import DemoServer
import StrataTesting
import FeedCachingExample

/// Real parts only: the composition root's repositories over HTTP to an in-process Hummingbird server,
/// caching in a `UserDefaults` suite of the test's own.
@Suite("S0 FeedCaching: against the demo server")
struct FeedCachingEndToEndTests {
    /// The feed the demo server serves, in the example's type (same JSON shape).
    static let serverFeed = DemoData.feed.map { FeedItem(id: $0.id, title: $0.title, imageURL: $0.imageURL) }

    /// The production repository (`Logging(Caching(Remote))`) or its `staleIfError` twin, on `server`.
    func makeSUT(_ policy: CachingPolicy, server: DemoServer, cache: UserDefaultsFeedCacheStore, log: LogCapture) -> any FeedRepository {
        switch policy {
        case .handWrittenDecorator:
            FeedComposer.makeFeedRepository(feedURL: server.feedURL, cache: cache, logger: log.logger)
        case .strataStaleIfError:
            FeedComposer.makeStaleIfErrorFeedRepository(feedURL: server.feedURL, store: cache.store, key: cache.key, logger: log.logger)
        }
    }

    @Test(arguments: CachingPolicy.allCases)
    func fetchFeed_online_returnsTheServersFeedAndSavesIt(_ policy: CachingPolicy) async throws {
        try await withDemoServer { server in
            try await withScopedDefaultsSuite { suiteName in
                let cache = UserDefaultsFeedCacheStore(suiteName: suiteName)
                let sut = makeSUT(policy, server: server, cache: cache, log: LogCapture())

                let feed = try await sut.fetchFeed()

                #expect(feed == Self.serverFeed)
                #expect(server.requestCount() == 1)
                #expect(try await UserDefaultsFeedCacheStore(suiteName: suiteName).load() == Self.serverFeed)
            }
        }
    }

    @Test(arguments: CachingPolicy.allCases)
    func fetchFeed_afterTheServerGoesOffline_servesTheCachedFeed(_ policy: CachingPolicy) async throws {
        try await withDemoServer { server in
            try await withScopedDefaultsSuite { suiteName in
                let cache = UserDefaultsFeedCacheStore(suiteName: suiteName)
                let log = LogCapture()
                let sut = makeSUT(policy, server: server, cache: cache, log: log)
                _ = try await sut.fetchFeed()

                await server.goOffline()
                let served = try await LoadFeedUseCase(repository: sut).loadServed()

                #expect(served.value == Self.serverFeed)
                #expect(served.provenance.origin == .disk)
                #expect(server.requestCount() == 1)
                #expect(log.entries.map(\.message) == ["feed load started", "feed load succeeded", "feed load started", "feed load succeeded"])
            }
        }
    }

    @Test(arguments: CachingPolicy.allCases)
    func fetchFeed_offlineWithAnEmptyCache_throwsTheOriginalTransportError(_ policy: CachingPolicy) async throws {
        try await withDemoServer { server in
            try await withScopedDefaultsSuite { suiteName in
                let log = LogCapture()
                let sut = makeSUT(policy, server: server, cache: UserDefaultsFeedCacheStore(suiteName: suiteName), log: log)
                await server.goOffline()

                let error = try await #require(throws: HTTPError.self) { try await sut.fetchFeed() }

                guard case .transport(let url, _, _) = error else {
                    Issue.record("expected a transport error, got \(error)")
                    return
                }
                #expect(url == server.feedURL)
                #expect(log.entries.last?.level == .error)
                #expect(log.entries.last?.metadata["error.type"] == "HTTPError")
            }
        }
    }

    @Test(arguments: CachingPolicy.allCases)
    func fetchFeed_whenTheServerFailsWith503_servesTheCachedFeed(_ policy: CachingPolicy) async throws {
        try await withDemoServer { server in
            try await withScopedDefaultsSuite { suiteName in
                let sut = makeSUT(policy, server: server, cache: UserDefaultsFeedCacheStore(suiteName: suiteName), log: LogCapture())
                _ = try await sut.fetchFeed()

                server.faults = .init(status: 503)

                #expect(try await sut.fetchFeed() == Self.serverFeed)
                #expect(server.requestCount() == 2)
            }
        }
    }

    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @MainActor
    @Test func composedViewModel_online_thenOffline_keepsTheServersFeed_andARelaunchShowsTheSavedOne() async throws {
        try await withDemoServer { server in
            try await withScopedDefaultsSuite { suiteName in
                let viewModel = FeedComposer.makeFeedViewModel(feedURL: server.feedURL, cacheSuiteName: suiteName, logger: quietLogger)

                await viewModel.load()
                #expect(viewModel.state == .loaded(items: Self.serverFeed, source: "from the server, just now"))

                // Offline, the reload is answered by the saved copy: older than the server's copy the
                // screen shows, so the screen keeps that one (a query never shows an older value).
                await server.goOffline()
                await viewModel.load()
                #expect(viewModel.state == .loaded(items: Self.serverFeed, source: "from the server, just now"))

                // A relaunch, still offline: a new screen has only the saved copy, and says so.
                let relaunched = FeedComposer.makeFeedViewModel(feedURL: server.feedURL, cacheSuiteName: suiteName, logger: quietLogger)
                await relaunched.load()
                guard case .loaded(let items, let source) = relaunched.state else {
                    Issue.record("expected the saved feed, got \(relaunched.state)")
                    return
                }
                #expect(items == Self.serverFeed)
                #expect(source.hasPrefix("saved on this device"))
            }
        }
    }
}
