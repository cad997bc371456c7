import DemoServer
import Foundation
import OfflineFirstExample
@_spi(StrataInternals) import Strata
import StrataDemo
import StrataTesting
import Testing

/// S4 OfflineFirst end to end: the example's one chain (`DataLoaderComposer`), built as the demo
/// scenario builds it, over the feed, against a real Hummingbird server on 127.0.0.1 and a real
/// FileStore in a temporary directory, with time moved by a manual clock. The seven requirements
/// each, then `strata demo --scenario offline-first` itself.
@Suite("S4 OfflineFirst: the chain against the demo server, and strata demo --scenario offline-first", .timeLimit(.minutes(3)))
final class OfflineFirstScenarioTests {
    let directory: TemporaryDirectory
    let clock = ManualClock()
    let client = CountingHTTPClient()

    init() throws {
        directory = try TemporaryDirectory(prefix: "strata-s4")
    }

    /// A "launch": a new store object and chain over the same cache directory. The chain is S4's,
    /// over the feed's bytes, decoded at the end as the scenario does.
    func launch(
        _ server: DemoServer, defaultLoader: DefaultLoader? = nil, fileStore: FileStore<Data>? = nil
    ) -> some Loader<Void, [FeedItem]> {
        DataLoaderComposer.makeDataLoader(
            serverURL: server.feedURL, expecting: [FeedItem].self, store: store(fileStore ?? self.fileStore()),
            defaultLoader: defaultLoader ?? testDefaults, client: client)
            .decoding([FeedItem].self)
            .environment(\.logger, quietLogger)
    }

    func fileStore() -> FileStore<Data> {
        FileStore(directory: directory.url, codec: DataCodec(), logger: quietLogger)
    }

    func store(_ fileStore: FileStore<Data>) -> LocalDataStore {
        LocalDataStore(fileStore: fileStore, now: clock.wallClock)
    }

    func cached() async throws -> CacheEntry<Data>? {
        try await store(fileStore()).saved()
    }

    /// The feed in a cached entry.
    func feed(_ entry: CacheEntry<Data>) throws -> [FeedItem] {
        try JSONDecoder().decode([FeedItem].self, from: entry.value)
    }

    @Test("1. fetches the latest data from the server and shows it")
    func requirement1_fetchesFromTheServer() async throws {
        try await withDemoServer { server in
            let served = try await launch(server).loadServed()

            #expect(served.value == DemoData.feed)
            #expect(served.provenance.origin == .remote)
            #expect(served.provenance.tier == "remote")
            #expect(server.requestCount() == 1)
        }
    }

    @Test("2. saves the latest fetched data locally")
    func requirement2_savesLocally() async throws {
        try await withDemoServer { server in
            _ = try await launch(server).load()

            let saved = try #require(try await cached())
            #expect(try feed(saved) == DemoData.feed)
            #expect(saved.storedAt == clock.date)
        }
    }

    @Test("3. checks the local data against its validity period", arguments: [
        (secondsAfterSave: 24 * 3600 - 1, servedFromCache: true),
        (secondsAfterSave: 24 * 3600, servedFromCache: false),
        (secondsAfterSave: 24 * 3600 + 1, servedFromCache: false),
    ])
    func requirement3_validityPeriod(secondsAfterSave: Int, servedFromCache: Bool) async throws {
        try await withDemoServer { server in
            _ = try await launch(server).load()
            clock.advance(by: .seconds(secondsAfterSave))

            let served = try await launch(server).loadServed()

            #expect((served.provenance.origin == .disk) == servedFromCache)
            #expect(server.requestCount() == (servedFromCache ? 1 : 2))
        }
    }

    @Test("4. shows valid local data first, without touching the network")
    func requirement4_validLocalFirst() async throws {
        try await withDemoServer { server in
            _ = try await launch(server).load()
            server.feed = updatedFeed
            clock.advance(by: .seconds(2 * 3600))
            let requestsBefore = client.requestCount

            let served = try await launch(server).loadServed()

            #expect(served.value == DemoData.feed)
            #expect(served.provenance.origin == .disk)
            #expect(served.provenance.tier == "fresh local")
            #expect(served.provenance.age == .seconds(2 * 3600))
            #expect(client.requestCount == requestsBefore, "no request was sent")
            #expect(server.requestCount() == 1)
        }
    }

    @Test("5. fetches from the server when the local data has expired, and saves it")
    func requirement5_expiredFetchesRemote() async throws {
        try await withDemoServer { server in
            _ = try await launch(server).load()
            server.feed = updatedFeed
            clock.advance(by: .seconds(25 * 3600))

            let served = try await launch(server).loadServed()

            #expect(served.value == updatedFeed)
            #expect(served.provenance.origin == .remote)
            let saved = try #require(try await cached())
            #expect(try feed(saved) == updatedFeed)
            #expect(saved.storedAt == clock.date)
        }
    }

    enum ServerFailure: String, CaseIterable, Sendable {
        case offline, status503, truncatedBody
    }

    @Test("6. shows stale local data when it has expired and the server fails", arguments: ServerFailure.allCases)
    func requirement6_expiredAndServerFailsShowsStale(failure: ServerFailure) async throws {
        try await withDemoServer { server in
            _ = try await launch(server).load()
            let savedBefore = try #require(try await cached())
            clock.advance(by: .seconds(25 * 3600))
            switch failure {
            case .offline: await server.goOffline()
            case .status503: server.faults = .init(status: 503, retryAfterSeconds: 30)
            case .truncatedBody: server.faults = .init(truncateBodies: true)
            }

            let served = try await launch(server).loadServed()

            #expect(served.value == DemoData.feed)
            #expect(served.provenance.origin == .disk)
            #expect(served.provenance.tier == "stale local")
            #expect(served.provenance.age == .seconds(25 * 3600))
            let remoteFailure = served.events.compactMap { event -> (any Error)? in
                if case .tierFailed("remote", let error) = event { return error }
                return nil
            }.first
            let httpError = try #require(remoteFailure as? HTTPError)
            #expect(httpError.url == server.feedURL)
            switch failure {
            case .offline: if case .transport = httpError {} else { Issue.record("expected a transport error, got \(httpError)") }
            case .status503: #expect(httpError.statusCode == 503)
            case .truncatedBody: if case .decoding = httpError {} else { Issue.record("expected a decoding error, got \(httpError)") }
            }
            let savedAfter = try #require(try await cached())
            #expect(savedAfter.value == savedBefore.value && savedAfter.storedAt == savedBefore.storedAt, "bad responses never overwrite the cache")
        }
    }

    @Test("7. shows the bundled default on first launch with no network and no local data")
    func requirement7_bundledDefaultOnFirstLaunchOffline() async throws {
        try await withDemoServer { server in
            await server.goOffline()

            let served = try await launch(server).loadServed()

            #expect(served.value == defaultFeed)
            #expect(served.provenance.origin == .bundled)
            #expect(served.provenance.tier == "bundled default")
            #expect(try await cached() == nil, "defaults are not written to the cache")
        }
    }

    @Test("every tier failing gives one error naming each tier, the first tier's first")
    func everyTierFails_namesEachTier() async throws {
        try await withDemoServer { server in
            await server.goOffline()
            let missing = DefaultLoader(resource: "no_such_default", in: .module)

            do {
                _ = try await launch(server, defaultLoader: missing).load()
                Issue.record("expected every tier to fail")
            } catch let error as FallbackError {
                #expect(error.failures.map(\.tier) == ["fresh local", "remote", "stale local", "bundled default"])
                #expect(error.failures[0].error as? DataLoaderError == .emptyCache)
                #expect((error.failures[1].error as? HTTPError)?.url == server.feedURL)
                #expect(error.failures[2].error as? DataLoaderError == .emptyCache)
                #expect(error.failures[3].error as? DataLoaderError == .noSuchFile)
            }
        }
    }

    @Test("cancelling a load stops the HTTP request and writes nothing")
    func cancellation_stopsTheRequestAndWritesNothing() async throws {
        try await withDemoServer { server in
            server.faults = .init(holdRequests: true)
            let chain = launch(server)

            let load = Task { try await chain.load() }
            await server.waitForRequests(count: 1)
            load.cancel()

            await #expect(throws: CancellationError.self) { try await load.value }
            server.releaseHeldRequests()
            let entry = try await cached()
            #expect(entry == nil)
        }
    }

    @Test("the store and chain objects are released after a load")
    func noLeaks() async throws {
        try await withDemoServer { server in
            try await withLeakTracking { leaks in
                let chain = launch(server, fileStore: leaks.track(fileStore()))
                _ = try await chain.load()
            }
        }
    }

    @Test("strata demo --scenario offline-first narrates the five steps with the right tier and network use")
    func narration() async throws {
        let lines = Locked<[String]>([])
        let steps = try await OfflineFirstScenario().run { line in lines.withLock { $0.append(line) } }

        #expect(steps.map(\.served.provenance.origin) == [.bundled, .remote, .disk, .disk, .remote])
        #expect(steps.map(\.served.provenance.tier) == ["bundled default", "remote", "fresh local", "stale local", "remote"])
        #expect(steps.map(\.requestsSent) == [1, 1, 0, 1, 1])
        #expect(steps.map(\.requestsAnswered) == [0, 1, 0, 0, 1])
        #expect(steps[2].served.provenance.age == .seconds(2 * 3600))
        #expect(steps[3].served.provenance.age == .seconds(25 * 3600))

        let output = lines.withLock { $0 }.joined(separator: "\n")
        #expect(output.contains("1. First launch, offline"))
        #expect(output.contains("no request made"))
        #expect(output.contains("stale local ✓"))
    }
}
