import DemoServer
import FeedCachingExample
import FileFeedStoreExample
import Foundation
import Logging
@_spi(StrataInternals) import Strata

/// The S0 FeedCaching scenario, step by step: the article's `Logging(Caching(Remote))` feed repository
/// against a real server, caching in a real file through S1 FileFeedStore's adapters, with a simulated clock.
///
/// 1. Online: the server's feed is shown and saved.
/// 2. Server down: the saved feed is shown instead (the article's point).
/// 3. Cache cleared, still offline: the original network error reaches the screen, as a message a
///    person can read.
public struct FeedCachingScenario: Sendable {
    /// What one step of the scenario observed.
    public struct Step: Sendable {
        /// The step's heading.
        public var title: String
        /// The feed the app showed and where it came from; `nil` when the load failed.
        public var served: Served<[FeedCachingExample.FeedItem]>?
        /// The error the load threw (the original network error); `nil` when a feed was shown.
        public var error: (any Error)?
        /// What the screen said: where the feed came from, or what went wrong.
        public var screen: String
        /// Requests the app sent during this step (answered or not).
        public var requestsSent: Int
        /// Requests the server answered during this step.
        public var requestsAnswered: Int
        /// How many items the cache held after the step.
        public var cachedItems: Int
        /// What the logging decorator wrote during this step.
        public var log: [String]
    }

    public init() {}

    /// Runs the scenario, writing each line of the narration through `write`, and returns what each step observed.
    public func run(write: @escaping @Sendable (String) -> Void) async throws -> [FeedCachingScenario.Step] {
        let server = try await DemoServer.start()
        let cacheDirectory = FileManager.default.temporaryDirectory
            .appendingPathComponent("strata-feed-demo-\(UUID().uuidString)", isDirectory: true)
        defer { try? FileManager.default.removeItem(at: cacheDirectory) }
        let clock = DemoClock()
        let client = CountingHTTPClient()
        let logs = NarratedLog(omitting: ["error"])  // the error gets a line of its own
        let quiet = Logger(label: "strata.demo", factory: { _ in SwiftLogNoOpLogHandler() })

        // The app's composition root, as S0 and S1 describe it: one place, concrete types only here.
        let fileStore = FileStore<[FeedCachingExample.FeedItem]>(directory: cacheDirectory, logger: quiet)
        let feedStore = StrataFeedStore(store: fileStore, key: "feed", now: clock.dates)
        let repository = FeedComposer.makeFeedRepository(
            feedURL: server.feedURL, cache: FeedStoreCacheAdapter(feedStore), client: client,
            logger: logs.logger)
        let loadFeed = LoadFeedUseCase(repository: repository)

        write("Strata demo: caching a feed with a decorator (S0 FeedCaching, cached through S1 FileFeedStore's FeedStore)")
        write("  server  \(server.feedURL.absoluteString)  (Hummingbird, in this process)")
        write("  cache   \(cacheDirectory.path)  (FileStore → FeedStore → FeedCacheStore)")
        write("  clock   simulated: time moves only when the demo says so")
        write("  chain   LoggingFeedRepository(CachingFeedRepository(RemoteFeedRepository)), wired in FeedComposer")

        var steps: [Step] = []
        func step(_ title: String, _ situation: String) async throws {
            let sentBefore = client.requestCount
            let answeredBefore = server.requestCount()
            _ = logs.drain()
            var served: Served<[FeedCachingExample.FeedItem]>?
            var failure: (any Error)?
            do {
                served = try await loadFeed.loadServed()
            } catch {
                failure = error
            }
            let result = Step(
                title: title, served: served, error: failure,
                screen: served.map { FeedPresenter.sourceText(for: $0.provenance) }
                    ?? failure.map { FeedPresenter.errorMessage(for: $0) } ?? "",
                requestsSent: client.requestCount - sentBefore,
                requestsAnswered: server.requestCount() - answeredBefore,
                cachedItems: try await feedStore.load().count,
                log: logs.drain().map(\.text))
            steps.append(result)
            write("")
            write("\(steps.count). \(title)")
            write("   situation  \(situation)")
            if let served = result.served {
                write("   served     \(describe(served))")
            } else if let error = result.error {
                write("   served     nothing: the load failed")
                write("   error      \(type(of: error)): \(error)")
            }
            write("   network    \(Narration.network(sent: result.requestsSent, answered: result.requestsAnswered))")
            write("   cache      \(result.cachedItems == 0 ? "empty" : "holds \(result.cachedItems) item\(result.cachedItems == 1 ? "" : "s")")")
            write("   log        \(result.log.joined(separator: " · "))")
            write("   screen     \"\(result.screen)\"")
        }

        try await step("Online", "the server is up; nothing is cached yet")

        clock.skip(.seconds(2 * 3600))
        await server.goOffline()
        try await step("Two hours later, server down", "the server refuses connections; the feed saved in step 1 is on disk")

        try await feedStore.delete()
        try await step("Cache cleared, still offline", "nothing cached and no server: the network's own error must reach the screen")

        await server.stop()
        write("")
        write("The repository never changed between steps; the decorators decided what to show.")
        return steps
    }

    private func describe(_ served: Served<[FeedCachingExample.FeedItem]>) -> String {
        let items = served.value
        let first = items.first.map { " — \"\($0.title)\"" } ?? ""
        let source = switch served.provenance.origin {
        case .remote: "remote (fetched now)"
        case .disk: "local cache (the decorator's fallback)"
        default: "\(served.provenance.origin)"
        }
        let age = served.provenance.age.map { "age \(($0).formattedAge)" } ?? "age n/a"
        return "\(source), \(items.count) item\(items.count == 1 ? "" : "s")\(first), \(age)"
    }

}
