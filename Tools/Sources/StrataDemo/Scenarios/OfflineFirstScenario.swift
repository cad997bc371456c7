import DemoServer
import Foundation
import Logging
import OfflineFirstExample
import Strata

/// The S4 OfflineFirst scenario, step by step: the example's chain (`DataLoaderComposer`) against a
/// real server and a real file cache, with a simulated clock so "a day later" takes no time.
public struct OfflineFirstScenario: Sendable {
    /// What one step of the scenario observed.
    public struct Step: Sendable {
        public var title: String
        public var served: Served<[FeedItem]>
        /// Requests the app sent during this step (answered or not).
        public var requestsSent: Int
        /// Requests the server answered during this step.
        public var requestsAnswered: Int
    }

    public init() {}

    /// Runs the scenario, writing each line of the narration through `write`, and returns what each step observed.
    public func run(write: @Sendable (String) -> Void) async throws -> [Step] {
        let server = try await DemoServer.start()
        let cacheDirectory = FileManager.default.temporaryDirectory
            .appendingPathComponent("strata-demo-\(UUID().uuidString)", isDirectory: true)
        defer { try? FileManager.default.removeItem(at: cacheDirectory) }
        let clock = DemoClock()
        let client = CountingHTTPClient()
        let quiet = Logger(label: "strata.demo", factory: { _ in SwiftLogNoOpLogHandler() })

        /// A "launch" of the app: a new store object and chain on the same cache directory. The chain
        /// is S4's, over the feed's bytes; the app decodes what it serves.
        @Sendable func launch() -> some Loader<Void, [FeedItem]> {
            let store = LocalDataStore(
                fileStore: FileStore(directory: cacheDirectory, codec: DataCodec(), logger: quiet), now: clock.dates)
            return DataLoaderComposer.makeDataLoader(
                serverURL: server.feedURL, expecting: [FeedItem].self, store: store,
                defaultLoader: DefaultLoader(resource: "default_feed", in: .module), client: client)
                .decoding([FeedItem].self)
                .environment(\.logger, quiet)
        }

        write("Strata demo: the offline-first feed (S4 OfflineFirst)")
        write("  server  \(server.feedURL.absoluteString)  (Hummingbird, in this process)")
        write("  cache   \(cacheDirectory.path)  (FileStore)")
        write("  clock   simulated: time moves only when the demo says so")
        write("  chain   fresh local (max age 24h) → remote + cache → stale local → bundled default")
        write("  built   by DataLoaderComposer, the example's composition root (Tools/Examples/S4-OfflineFirst)")

        var steps: [Step] = []
        func step(_ title: String, _ situation: String) async throws {
            let sentBefore = client.requestCount
            let answeredBefore = server.requestCount()
            let served = try await launch().loadServed()
            let result = Step(
                title: title, served: served, requestsSent: client.requestCount - sentBefore,
                requestsAnswered: server.requestCount() - answeredBefore)
            steps.append(result)
            write("")
            write("\(steps.count). \(title)")
            write("   situation  \(situation)")
            write("   served     \(describe(result.served))")
            write("   network    \(Narration.network(sent: result.requestsSent, answered: result.requestsAnswered))")
            write("   tiers      \(describeTiers(result.served))")
        }

        await server.goOffline()
        try await step("First launch, offline", "no network (connections refused), nothing cached")

        try await server.goOnline()
        try await step("Online", "the server is up; the cache holds nothing fresh")

        clock.skip(.seconds(2 * 3600))
        try await step("Relaunch two hours later", "the cached feed is 2h old, within the 24h max age")

        clock.skip(.seconds(23 * 3600))
        await server.goOffline()
        try await step("A day later, server down", "the cached feed is 25h old (expired) and the server refuses connections")

        try await server.goOnline()
        try await step("Server back", "the cached feed is still expired; the server answers again")

        await server.stop()
        write("")
        write("Every step above ran the same chain; only the world around it changed.")
        return steps
    }

    private func describe(_ served: Served<[FeedItem]>) -> String {
        let items = served.value
        let first = items.first.map { " — \"\($0.title)\"" } ?? ""
        let source = switch served.provenance.origin {
        case .remote: "remote (fetched now, saved to the cache)"
        case .disk: "local cache (\(served.provenance.tier))"
        case .bundled: "bundled default"
        default: "\(served.provenance.origin)"
        }
        let age = served.provenance.age.map { "age \(($0).formattedAge)" } ?? "age n/a"
        return "\(source), \(items.count) item\(items.count == 1 ? "" : "s")\(first), \(age)"
    }

    private func describeTiers(_ served: Served<[FeedItem]>) -> String {
        var parts: [String] = []
        for event in served.events {
            switch event {
            case .tierFailed(let tier, let error): parts.append("\(tier) ✗ \(shortReason(error))")
            case .cacheWritten: parts.append("saved ✓")
            case .cacheWriteFailed(_, _, let error): parts.append("save failed ✗ \(error)")
            case .retrying(_, let attempt, _, _): parts.append("retry \(attempt)")
            case .timedOut(let tier, let after): parts.append("\(tier) ✗ timed out after \(after.formattedAge)")
            case .breakerRejected(let breaker): parts.append("circuit \(breaker) open ✗")
            case .breakerStateChanged(let breaker, _, let state): parts.append("circuit \(breaker) \(state)")
            case .coalesced: parts.append("joined a load in flight")
            case .revalidated: parts.append("not modified ✓")
            case .refreshStarted: parts.append("refreshing in the background")
            case .servedStale(_, let reason): parts.append("stale (\(reason.rawValue))")
            case .waitedForFleetLock(_, let waited, _): parts.append("waited \(waited.formattedAge) for another process")
            case .served: continue
            }
        }
        parts.append("\(served.provenance.tier) ✓")
        return parts.joined(separator: " · ")
    }

    private func shortReason(_ error: any Error) -> String {
        switch error {
        case DataLoaderError.emptyCache: "nothing cached"
        case DataLoaderError.expiredCache(let age): "expired (\(age.formattedAge) old)"
        case let error as HTTPError:
            if case .transport(_, let reason, _) = error { reason } else { "\(error)" }
        default: "\(error)"
        }
    }
}
