import FeedCachingExample
import FileFeedStoreExample
import Foundation
import Strata
import StrataTesting
import Testing

/// S1's store behind S0's caching decorator, through `FeedStoreCacheAdapter`.
@Suite("S1 FileFeedStore: FeedStoreCacheAdapter with CachingFeedRepository")
struct FeedStoreCacheAdapterTests {
    /// `CachingFeedRepository(remote, FeedStoreCacheAdapter(CodableFeedStore))`, with the store tracked for leaks.
    func makeSUT(
        remote: LoaderSpy<Void, [FeedItem]>, storeURL: URL, leaks: LeakTracker
    ) -> (sut: CachingFeedRepository, store: CodableFeedStore) {
        let store = leaks.track(CodableFeedStore(storeURL: storeURL))
        leaks.track(remote)
        let sut = CachingFeedRepository(decoratee: StrataFeedRepository(remote), cache: FeedStoreCacheAdapter(store))
        return (sut, store)
    }

    @Test func fetchFeed_onRemoteSuccess_savesTheFeedInTheFeedStore() async throws {
        try await withStoreLocation { location in
            try await withLeakTracking { leaks in
                let feed = uniqueFeed()
                let storeURL = location.appending("feed.json")
                let (sut, _) = makeSUT(remote: LoaderSpy(.success(feed)), storeURL: storeURL, leaks: leaks)

                let fetched = try await sut.fetchFeed()

                #expect(fetched == feed)
                #expect(try await leaks.track(CodableFeedStore(storeURL: storeURL)).load() == feed)
            }
        }
    }

    @Test func fetchFeed_onRemoteFailure_servesTheFeedStoresFeed() async throws {
        try await withStoreLocation { location in
            try await withLeakTracking { leaks in
                let cached = uniqueFeed()
                let (sut, store) = makeSUT(remote: LoaderSpy(.failure(TestError("offline"))), storeURL: location.appending("feed.json"), leaks: leaks)
                try await store.save(cached)

                #expect(try await sut.fetchFeed() == cached)
            }
        }
    }

    @Test func fetchFeed_onRemoteFailureWithAnEmptyFeedStore_throwsTheOriginalError() async throws {
        try await withStoreLocation { location in
            try await withLeakTracking { leaks in
                let (sut, _) = makeSUT(remote: LoaderSpy(.failure(TestError("offline"))), storeURL: location.appending("feed.json"), leaks: leaks)

                await #expect(throws: TestError("offline")) { try await sut.fetchFeed() }
            }
        }
    }

    @Test func fetchFeed_onRemoteFailureAfterTheFeedStoreWasDeleted_throwsTheOriginalError() async throws {
        try await withStoreLocation { location in
            try await withLeakTracking { leaks in
                let (sut, store) = makeSUT(remote: LoaderSpy(.failure(TestError("offline"))), storeURL: location.appending("feed.json"), leaks: leaks)
                try await store.save(uniqueFeed())

                try await store.delete()

                await #expect(throws: TestError("offline")) { try await sut.fetchFeed() }
            }
        }
    }

    @Test func loadServed_overAStrataFileStore_reportsTheSavedFeedsAge() async throws {
        try await withStoreLocation { location in
            try await withLeakTracking { leaks in
                let clock = ManualClock()
                let fileStore = leaks.track(FileStore<[FeedItem]>(directory: location.url, logger: quietLogger))
                let feedStore = StrataFeedStore(store: fileStore, key: "feed", now: clock.wallClock)
                let cached = uniqueFeed()
                try await feedStore.save(cached)
                clock.advance(by: .seconds(90 * 60))
                let remote = leaks.track(LoaderSpy<Void, [FeedItem]>(.failure(TestError("offline"))))
                let sut = CachingFeedRepository(decoratee: StrataFeedRepository(remote), cache: FeedStoreCacheAdapter(feedStore))

                let served = try await LoadFeedUseCase(repository: sut).loadServed()

                #expect(served.value == cached)
                #expect(served.provenance.origin == .disk)
                #expect(served.provenance.age == .seconds(90 * 60))
            }
        }
    }

    @Test func adapter_forwardsSaveAndLoadToTheFeedStore() async throws {
        try await withLeakTracking { leaks in
            let memory = leaks.track(MemoryStore<String, [FeedItem]>())
            let sut = FeedStoreCacheAdapter(StrataFeedStore(store: memory, key: "feed"))
            let feed = uniqueFeed()

            #expect(try await sut.load() == [])
            try await sut.save(feed)

            #expect(try await sut.load() == feed)
            #expect(try await memory.retrieve("feed")?.value == feed)
        }
    }
}
