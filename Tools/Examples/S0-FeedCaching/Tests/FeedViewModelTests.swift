import Foundation
import Testing
import Strata
import StrataQueries
import StrataTesting
import FeedCachingExample

/// `FeedViewModel` needs Observation (macOS 14, iOS 17), so every test is marked available there.
@MainActor
@Suite("S0 FeedCaching: FeedViewModel")
struct FeedViewModelTests {
    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    func makeSUT(_ repository: some FeedRepository) -> FeedViewModel {
        FeedViewModel(loadFeed: LoadFeedUseCase(repository: repository))
    }

    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @Test func init_startsIdleWithoutLoading() {
        let remote = LoaderSpy<Void, [FeedItem]>(.success(uniqueFeed()))

        let sut = makeSUT(StrataFeedRepository(remote))

        #expect(sut.state == .idle)
        #expect(remote.loadCount == 0)
    }

    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @Test func load_whileTheRepositoryIsWorking_isLoadingThenLoadedFromTheServer() async throws {
        let feed = uniqueFeed()
        let remote = LoaderSpy<Void, [FeedItem]>(holdsLoads: true)
        let sut = makeSUT(StrataFeedRepository(remote.originating(from: .remote)))

        let loading = Task { await sut.load() }
        try await remote.waitForLoads(count: 1)
        #expect(sut.state == .loading)

        remote.complete(0, with: .success(feed))
        await loading.value

        #expect(sut.state == .loaded(items: feed, source: "from the server, just now"))
        #expect(sut.provenance?.origin == .remote)
    }

    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @Test func load_servedFromTheCache_saysHowOldTheSavedFeedIs() async throws {
        try await withScopedDefaultsSuite { suiteName in
            let clock = ManualClock()
            let cache = UserDefaultsFeedCacheStore(suiteName: suiteName, now: clock.wallClock)
            let cachedFeed = uniqueFeed()
            try await cache.save(cachedFeed)
            clock.advance(by: .seconds(2 * 3600))
            let sut = makeSUT(CachingFeedRepository(
                decoratee: StrataFeedRepository(LoaderSpy<Void, [FeedItem]>(.failure(TestError("offline")))), cache: cache))

            await sut.load()

            #expect(sut.state == .loaded(items: cachedFeed, source: "saved on this device 2h 0m ago"))
            #expect(sut.provenance?.origin == .disk)
        }
    }

    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @Test func load_fromARepositoryThatReportsNoSource_saysTheSourceIsUnknown() async throws {
        let feed = uniqueFeed()
        let sut = makeSUT(StrataFeedRepository(LoaderSpy<Void, [FeedItem]>(.success(feed))))

        await sut.load()

        #expect(sut.state == .loaded(items: feed, source: "source unknown"))
    }

    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @Test func load_whenTheServerCannotBeReached_failsWithAMessageAPersonCanRead() async throws {
        let url = URL(string: "http://127.0.0.1:9/feed")!
        let refused = HTTPError.transport(url: url, reason: "could not connect (connection refused)", underlying: nil)
        let sut = makeSUT(StrataFeedRepository(LoaderSpy<Void, [FeedItem]>(.failure(refused))))

        await sut.load()

        #expect(sut.state == .failed(message: "Can't reach the server. Check your connection and try again."))
    }

    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @Test(arguments: [
        (HTTPError.status(code: 503, url: URL(string: "https://example.com/feed")!, headerFields: [:], body: Data()),
         "The server is having trouble (error 503). Please try again later."),
        (HTTPError.status(code: 404, url: URL(string: "https://example.com/feed")!, headerFields: [:], body: Data()),
         "The feed isn't available right now (error 404)."),
        (HTTPError.decoding(url: URL(string: "https://example.com/feed")!, type: "Array<FeedItem>", underlying: TestError()),
         "The server sent a feed this app can't read. Please try again later."),
    ])
    func load_onAnHTTPFailure_failsWithAMessageThatSaysWhatWentWrong(_ error: HTTPError, _ message: String) async throws {
        let sut = makeSUT(StrataFeedRepository(LoaderSpy<Void, [FeedItem]>(.failure(error))))

        await sut.load()

        #expect(sut.state == .failed(message: message))
        #expect(!message.contains("example.com"))
    }

    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @Test func load_onAnUnexpectedError_failsWithAGenericMessageNotTheErrorText() async throws {
        let sut = makeSUT(StrataFeedRepository(LoaderSpy<Void, [FeedItem]>(.failure(TestError("EBADF 0x2a")))))

        await sut.load()

        #expect(sut.state == .failed(message: "Something went wrong while loading the feed. Please try again."))
    }

    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @Test func load_afterAFailure_canRecoverToLoaded() async throws {
        let feed = uniqueFeed()
        let remote = LoaderSpy<Void, [FeedItem]>(.failure(TestError("offline")), .success(feed))
        let sut = makeSUT(StrataFeedRepository(remote))

        await sut.load()
        await sut.load()

        #expect(sut.state == .loaded(items: feed, source: "source unknown"))
    }

    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @Test func load_whenCancelled_returnsToTheStateBeforeIt() async throws {
        let remote = LoaderSpy<Void, [FeedItem]>(holdsLoads: true)
        let sut = makeSUT(StrataFeedRepository(remote))

        let loading = Task { await sut.load() }
        try await remote.waitForLoads(count: 1)
        loading.cancel()
        await loading.value

        #expect(sut.state == .idle)
    }

    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @Test func theScreensStates_inOrder_loadingThenLoaded_thenKeptThroughAFailedRefresh_thenRefreshed() async throws {
        let (first, second) = (uniqueFeed(), uniqueFeed())
        let remote = LoaderSpy<Void, [FeedItem]>(holdsLoads: true)
        let clock = ManualClock()
        let query = QueryClient(environment: clock.environment()).query(
            ["feed"], chain: LoadFeedUseCase(repository: StrataFeedRepository(remote.originating(from: .remote))))
        let sut = FeedViewModel(feed: query)
        // A second observer, counted now (its iteration starts here): records every snapshot the screen is sent.
        var snapshots = query.snapshots().makeAsyncIterator()

        let loading = Task { await sut.load() }
        try await remote.waitForLoads(count: 1)
        remote.complete(0, with: .success(first))
        await loading.value
        let refreshing = Task { await sut.load() }
        try await remote.waitForLoads(count: 2)
        remote.complete(1, with: .failure(TestError("offline")))
        await refreshing.value
        let again = Task { await sut.load() }
        try await remote.waitForLoads(count: 3)
        remote.complete(2, with: .success(second))
        await again.value

        var states: [FeedViewModel.State] = []
        var phases: [QueryPhase] = []
        while phases.count < 6, let snapshot = await snapshots.next() {
            states.append(FeedViewModel.State(snapshot))
            phases.append(snapshot.phase)
        }
        let fromServer = "from the server, just now"
        // The observer's first snapshot is the query once it counts it: already loading.
        #expect(states == [
            .loading, .loaded(items: first, source: fromServer),
            .loaded(items: first, source: fromServer),   // refreshing: the feed stays shown
            .loaded(items: first, source: fromServer),   // the refresh failed: still shown, error recorded
            .loaded(items: first, source: fromServer), .loaded(items: second, source: fromServer),
        ])
        #expect(phases == [.fetching(.firstObserver), .idle, .fetching(.refetch), .idle, .fetching(.refetch), .idle])
        #expect(sut.state == .loaded(items: second, source: fromServer))
    }

    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @Test func viewModel_isReleasedAfterLoading() async throws {
        let tracker = LeakTracker()
        await loadOnce(tracking: tracker)
        try tracker.verifyNoLeaks()
    }

    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    private func loadOnce(tracking tracker: LeakTracker) async {
        let remote = tracker.track(LoaderSpy<Void, [FeedItem]>(.success(uniqueFeed())))
        let sut = tracker.track(makeSUT(StrataFeedRepository(remote)))
        await sut.load()
    }
}
