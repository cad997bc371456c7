import Foundation
import Logging
import Testing
import Strata
import StrataTesting
import FeedCachingExample

@Suite("S0 FeedCaching: LoggingFeedRepository")
struct LoggingFeedRepositoryTests {
    let log = LogCapture()

    func makeSUT(_ decoratee: LoaderSpy<Void, [FeedItem]>) -> LoggingFeedRepository {
        LoggingFeedRepository(decoratee: StrataFeedRepository(decoratee), logger: log.logger)
    }

    @Test func fetchFeed_onSuccess_logsTheStartThenTheItemCount() async throws {
        _ = try await makeSUT(LoaderSpy(.success(uniqueFeed(count: 3)))).fetchFeed()

        #expect(log.entries == [
            .init(level: .info, message: "feed load started"),
            .init(level: .info, message: "feed load succeeded", metadata: ["count": "3"]),
        ])
    }

    @Test func fetchFeed_onSuccess_returnsTheDecorateesFeedUnchanged() async throws {
        let feed = uniqueFeed()

        #expect(try await makeSUT(LoaderSpy(.success(feed))).fetchFeed() == feed)
    }

    @Test func fetchFeed_onFailure_logsTheErrorAsStructuredMetadata() async throws {
        _ = try? await makeSUT(LoaderSpy(.failure(TestError("offline")))).fetchFeed()

        #expect(log.entries == [
            .init(level: .info, message: "feed load started"),
            .init(level: .error, message: "feed load failed", metadata: ["error": "offline", "error.type": "TestError"]),
        ])
    }

    @Test func fetchFeed_onFailure_rethrowsTheSameError() async throws {
        let sut = makeSUT(LoaderSpy(.failure(TestError("offline"))))

        await #expect(throws: TestError("offline")) { try await sut.fetchFeed() }
    }

    @Test func fetchFeed_whenCancelled_logsNoFailureAndThrowsCancellation() async throws {
        let decoratee = LoaderSpy<Void, [FeedItem]>(holdsLoads: true)
        let sut = makeSUT(decoratee)

        let task = Task { try await sut.fetchFeed() }
        try await decoratee.waitForLoads(count: 1)
        task.cancel()

        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(log.entries.map(\.level) == [.info, .debug])
        #expect(log.entries.last?.message == "feed load cancelled")
    }

    @Test func stackedOverTheCache_logsASuccessWhenTheCacheAnswers() async throws {
        let cachedFeed = uniqueFeed(count: 4)
        let sut = LoggingFeedRepository(
            decoratee: CachingFeedRepository(
                decoratee: StrataFeedRepository(LoaderSpy<Void, [FeedItem]>(.failure(TestError("offline")))),
                cache: FeedCacheSpy(holding: cachedFeed)),
            logger: log.logger)

        #expect(try await sut.fetchFeed() == cachedFeed)
        #expect(log.entries.last == .init(level: .info, message: "feed load succeeded", metadata: ["count": "4"]))
    }
}
