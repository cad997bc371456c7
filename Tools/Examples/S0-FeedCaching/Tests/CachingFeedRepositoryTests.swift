import Foundation
import Testing
import Strata
import StrataTesting
import FeedCachingExample

/// The article's caching policy, written twice: by hand (`CachingFeedRepository`) and with Strata's
/// `staleIfError(in:key:)`. Every test runs against both, so they are held to the same behaviour.
enum CachingPolicy: String, CaseIterable, Sendable, CustomStringConvertible {
    case handWrittenDecorator
    case strataStaleIfError

    var description: String { rawValue }
}

@Suite("S0 FeedCaching: CachingFeedRepository and staleIfError")
struct CachingFeedRepositoryTests {
    func makeSUT(
        _ policy: CachingPolicy, remote: LoaderSpy<Void, [FeedItem]>, cache: FeedCacheSpy
    ) -> any FeedRepository {
        switch policy {
        case .handWrittenDecorator:
            CachingFeedRepository(decoratee: StrataFeedRepository(remote), cache: cache)
        case .strataStaleIfError:
            StrataFeedRepository(remote.servingStaleOnError(in: cache, key: "feed").environment(\.logger, quietLogger))
        }
    }

    // MARK: The article's four tests

    @Test(arguments: CachingPolicy.allCases)
    func fetchFeed_onRemoteSuccess_savesTheFetchedFeedInTheCache(_ policy: CachingPolicy) async throws {
        let feed = uniqueFeed()
        let cache = FeedCacheSpy()

        _ = try await makeSUT(policy, remote: LoaderSpy(.success(feed)), cache: cache).fetchFeed()

        #expect(cache.messages == [.save(feed)])
    }

    @Test(arguments: CachingPolicy.allCases)
    func fetchFeed_onRemoteSuccess_returnsTheRemoteFeedNotTheCachedOne(_ policy: CachingPolicy) async throws {
        let remoteFeed = uniqueFeed()
        let cache = FeedCacheSpy(holding: uniqueFeed())

        let feed = try await makeSUT(policy, remote: LoaderSpy(.success(remoteFeed)), cache: cache).fetchFeed()

        #expect(feed == remoteFeed)
    }

    @Test(arguments: CachingPolicy.allCases)
    func fetchFeed_onRemoteFailure_returnsTheCachedFeed(_ policy: CachingPolicy) async throws {
        let cachedFeed = uniqueFeed()
        let cache = FeedCacheSpy(holding: cachedFeed)

        let feed = try await makeSUT(policy, remote: LoaderSpy(.failure(TestError("offline"))), cache: cache).fetchFeed()

        #expect(feed == cachedFeed)
        #expect(cache.messages == [.load])
    }

    @Test(arguments: CachingPolicy.allCases)
    func fetchFeed_onRemoteFailureWithAnEmptyCache_throwsTheOriginalRemoteError(_ policy: CachingPolicy) async throws {
        let sut = makeSUT(policy, remote: LoaderSpy(.failure(TestError("offline"))), cache: FeedCacheSpy())

        await #expect(throws: TestError("offline")) { try await sut.fetchFeed() }
    }

    // MARK: What the article leaves out

    @Test(arguments: CachingPolicy.allCases)
    func fetchFeed_whenSavingFails_stillReturnsTheRemoteFeed(_ policy: CachingPolicy) async throws {
        let feed = uniqueFeed()
        let cache = FeedCacheSpy()
        cache.failSaves(with: TestError("disk full"))

        let loaded = try await makeSUT(policy, remote: LoaderSpy(.success(feed)), cache: cache).fetchFeed()

        #expect(loaded == feed)
        #expect(cache.messages == [.save(feed)])
    }

    @Test(arguments: CachingPolicy.allCases)
    func fetchFeed_onRemoteFailureWithAnUnreadableCache_throwsTheOriginalRemoteError(_ policy: CachingPolicy) async throws {
        let cache = FeedCacheSpy(holding: uniqueFeed())
        cache.failLoads(with: TestError("disk broken"))
        let sut = makeSUT(policy, remote: LoaderSpy(.failure(TestError("offline"))), cache: cache)

        await #expect(throws: TestError("offline")) { try await sut.fetchFeed() }
    }

    @Test(arguments: CachingPolicy.allCases)
    func fetchFeed_onRemoteFailure_savesNothing(_ policy: CachingPolicy) async throws {
        let cachedFeed = uniqueFeed()
        let cache = FeedCacheSpy(holding: cachedFeed)

        _ = try await makeSUT(policy, remote: LoaderSpy(.failure(TestError("offline"))), cache: cache).fetchFeed()

        #expect(cache.messages == [.load])
        #expect(cache.storedFeed == cachedFeed)
    }

    @Test(arguments: CachingPolicy.allCases)
    func fetchFeed_whenCancelledInFlight_neitherServesTheCacheNorSaves(_ policy: CachingPolicy) async throws {
        let remote = LoaderSpy<Void, [FeedItem]>(holdsLoads: true)
        let cache = FeedCacheSpy(holding: uniqueFeed())
        let sut = makeSUT(policy, remote: remote, cache: cache)

        let task = Task { try await sut.fetchFeed() }
        try await remote.waitForLoads(count: 1)
        task.cancel()

        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(cache.messages.isEmpty)
    }

    @Test(arguments: CachingPolicy.allCases)
    func loadServed_onRemoteFailure_reportsTheCachedCopysAgeAndTheFailedTier(_ policy: CachingPolicy) async throws {
        try await withScopedDefaultsSuite { suiteName in
            let clock = ManualClock()
            let cache = UserDefaultsFeedCacheStore(suiteName: suiteName, now: clock.wallClock)
            let cachedFeed = uniqueFeed()
            try await cache.save(cachedFeed)
            clock.advance(by: .seconds(3 * 3600))
            let remote = LoaderSpy<Void, [FeedItem]>(.failure(TestError("offline")), name: "remote")
            let sut: any FeedRepository = switch policy {
            case .handWrittenDecorator:
                CachingFeedRepository(decoratee: StrataFeedRepository(remote), cache: cache)
            case .strataStaleIfError:
                StrataFeedRepository(remote.servingStaleOnError(in: cache.store, key: cache.key).environment(LoadEnvironment(now: clock.wallClock, logger: quietLogger)))
            }

            let served = try await LoadFeedUseCase(repository: sut).loadServed()

            #expect(served.value == cachedFeed)
            #expect(served.provenance.origin == .disk)
            #expect(served.provenance.age == .seconds(3 * 3600))
            #expect(served.events.contains { event in
                guard case .tierFailed(let tier, let error) = event else { return false }
                return tier == "remote" && error as? TestError == TestError("offline")
            })
        }
    }

    // MARK: The one difference

    @Test func handWrittenDecorator_onRemoteFailureWithACachedEmptyFeed_throwsTheOriginalError() async throws {
        let sut = makeSUT(.handWrittenDecorator, remote: LoaderSpy(.failure(TestError("offline"))), cache: FeedCacheSpy(holding: []))

        await #expect(throws: TestError("offline")) { try await sut.fetchFeed() }
    }

    @Test func staleIfError_onRemoteFailureWithACachedEmptyFeed_servesTheEmptyFeed() async throws {
        let sut = makeSUT(.strataStaleIfError, remote: LoaderSpy(.failure(TestError("offline"))), cache: FeedCacheSpy(holding: []))

        #expect(try await sut.fetchFeed() == [])
    }
}
