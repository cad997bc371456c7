import Foundation
import Testing
import Strata
import StrataTesting
import FeedCachingExample

@Suite("S0 FeedCaching: LoadFeedUseCase")
struct LoadFeedUseCaseTests {
    @Test func execute_deliversTheRepositorysFeed() async throws {
        let feed = uniqueFeed()
        let repository = LoaderSpy<Void, [FeedItem]>(.success(feed))

        #expect(try await LoadFeedUseCase(repository: StrataFeedRepository(repository)).execute() == feed)
        #expect(repository.loadCount == 1)
    }

    @Test func execute_passesTheRepositorysErrorThrough() async throws {
        let sut = LoadFeedUseCase(repository: StrataFeedRepository(LoaderSpy<Void, [FeedItem]>(.failure(TestError("offline")))))

        await #expect(throws: TestError("offline")) { try await sut.execute() }
    }

    @Test func loadServed_reportsWhereTheRepositoryChainGotTheFeed() async throws {
        let sut = LoadFeedUseCase(repository: StrataFeedRepository(LoaderSpy<Void, [FeedItem]>(.success(uniqueFeed())).originating(from: .remote)))

        #expect(try await sut.loadServed().provenance.origin == .remote)
    }

    @Test func asLoader_letsStrataOperatorsDecorateAnyRepository() async throws {
        let cached = uniqueFeed()
        let store = MemoryStore<String, [FeedItem]>()
        try await store.insert(cached, for: "feed", storedAt: Date())
        let failing = StrataFeedRepository(LoaderSpy<Void, [FeedItem]>(.failure(TestError("offline"))))

        let feed = try await failing.asLoader().servingStaleOnError(in: store, key: "feed").environment(\.logger, quietLogger).load()

        #expect(feed == cached)
    }
}
