import DemoServer
import Foundation
import OfflineFirstExample
import Testing
import Strata
import StrataTesting

/// S4's requirements 1–7, each its own test, against a real server on 127.0.0.1 and a real file cache,
/// with time moved by a manual clock.
@Suite("S4 OfflineFirst: requirements 1–7")
final class OfflineFirstRequirementTests {
    let directory: TemporaryDirectory
    let clock = ManualClock()
    let store: LocalDataStore

    init() throws {
        directory = try TemporaryDirectory(prefix: "strata-s4-example")
        store = LocalDataStore(directory: directory.url, now: clock.wallClock)
    }

    func makeSUT(_ server: DemoServer, defaultLoader: DefaultLoader = DefaultLoader()) -> some DataLoader {
        DataLoaderComposer.makeDataLoader(serverURL: server.feedURL, store: store, defaultLoader: defaultLoader)
    }

    /// The feed in `data` (compared decoded: JSONEncoder's key order is not stable between runs).
    func feed(_ data: Data?) throws -> [FeedItem]? {
        try data.map { try JSONDecoder().decode([FeedItem].self, from: $0) }
    }

    func withServer(_ body: (DemoServer) async throws -> Void) async throws {
        let server = try await DemoServer.start()
        do { try await body(server) } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }

    @Test("1. fetches the latest data from the server and shows it")
    func fetchesLatestFromServer() async throws {
        try await withServer { server in
            let served = try await makeSUT(server).loadServed()
            #expect(try feed(served.value) == server.feed)
            #expect(served.provenance.origin == .remote)
        }
    }

    @Test("2. saves the latest fetched data locally")
    func savesFetchedDataLocally() async throws {
        try await withServer { server in
            _ = try await makeSUT(server).loadData()
            let saved = try #require(try await store.saved())
            #expect(try feed(saved.value) == server.feed)
            #expect(saved.storedAt == clock.date)
        }
    }

    @Test("3. checks whether local data is within its validity period", arguments: [(86_399, true), (86_400, false)])
    func checksValidityPeriod(age: Int, valid: Bool) async throws {
        try await withServer { server in
            _ = try await makeSUT(server).loadData()
            clock.advance(by: .seconds(age))
            let served = try await makeSUT(server).loadServed()
            #expect((served.provenance.tier == "fresh local") == valid)
        }
    }

    @Test("4. shows valid local data first, with no network")
    func showsValidLocalDataWithoutNetwork() async throws {
        try await withServer { server in
            _ = try await makeSUT(server).loadData()
            clock.advance(by: .seconds(3600))
            let served = try await makeSUT(server).loadServed()
            #expect(served.provenance.origin == .disk)
            #expect(served.provenance.age == .seconds(3600))
            #expect(server.requestCount() == 1)
        }
    }

    @Test("5. fetches from the server when local data has expired")
    func fetchesWhenExpired() async throws {
        try await withServer { server in
            _ = try await makeSUT(server).loadData()
            server.feed = [FeedItem(id: UUID(), title: "newer", imageURL: URL(string: "https://example.com/n.png")!)]
            clock.advance(by: .seconds(25 * 3600))
            let served = try await makeSUT(server).loadServed()
            #expect(served.provenance.origin == .remote)
            #expect(try feed(served.value) == server.feed)
            #expect(try feed(try await store.saved()?.value) == server.feed)
        }
    }

    @Test("6. shows stale local data when it has expired and the server fails")
    func showsStaleDataWhenExpiredAndServerFails() async throws {
        try await withServer { server in
            _ = try await makeSUT(server).loadData()
            let saved = server.feed
            clock.advance(by: .seconds(25 * 3600))
            server.faults = .init(status: 500)
            let served = try await makeSUT(server).loadServed()
            #expect(try feed(served.value) == saved)
            #expect(served.provenance.tier == "stale local")
            #expect(served.provenance.age == .seconds(25 * 3600))
        }
    }

    @Test("7. shows bundled default data on first launch with no network and no local data")
    func showsDefaultOnFirstLaunchOffline() async throws {
        try await withServer { server in
            await server.goOffline()
            let served = try await makeSUT(server).loadServed()
            #expect(served.value == (try await DefaultLoader().loadData()))
            #expect(served.provenance.origin == .bundled)
            #expect(try await store.saved() == nil)
        }
    }

    @Test("with no network, no local data and no default, every tier's reason is reported")
    func everythingMissing() async throws {
        try await withServer { server in
            await server.goOffline()
            do {
                _ = try await makeSUT(server, defaultLoader: DefaultLoader(resource: "missing", in: .main)).loadData()
                Issue.record("expected a failure")
            } catch let error as FallbackError {
                #expect(error.failures.map(\.tier) == ["fresh local", "remote", "stale local", "bundled default"])
                #expect(error.failures[0].error as? DataLoaderError == .emptyCache)
                #expect(error.failures[2].error as? DataLoaderError == .emptyCache)
                #expect(error.failures[3].error as? DataLoaderError == .noSuchFile)
            }
        }
    }

    @Test("expecting a payload: an answer that does not decode is never saved, and the stale copy is served")
    func expectingAPayload_keepsABadAnswerOutOfTheCache() async throws {
        try await withServer { server in
            let sut = DataLoaderComposer.makeDataLoader(serverURL: server.feedURL, expecting: [FeedItem].self, store: store)
            _ = try await sut.loadData()
            let before = try #require(try await store.saved())
            clock.advance(by: .seconds(25 * 3600))
            server.faults = .init(truncateBodies: true)

            let served = try await sut.loadServed()

            #expect(served.provenance.tier == "stale local")
            let remoteFailure = served.events.compactMap { event -> (any Error)? in
                if case .tierFailed("remote", let error) = event { return error }
                return nil
            }.first
            if case .decoding(let url, _, _)? = remoteFailure as? HTTPError {
                #expect(url == server.feedURL)
            } else {
                Issue.record("expected the remote tier to fail with HTTPError.decoding, got \(String(describing: remoteFailure))")
            }
            let after = try #require(try await store.saved())
            #expect(after.value == before.value && after.storedAt == before.storedAt)
        }
    }
}

@Suite("S4 OfflineFirst: loaders and policies")
struct DataLoaderUnitTests {
    let clock = ManualClock()

    @Test func localLoader_onEmptyCacheThrowsEmptyCache() async throws {
        let directory = try TemporaryDirectory()
        let sut = LocalLoader(store: LocalDataStore(directory: directory.url, now: clock.wallClock), cachePolicy: NullPolicy())
        await #expect(throws: DataLoaderError.emptyCache) { try await sut.loadData() }
    }

    @Test func localLoader_onExpiredCacheThrowsExpiredCache() async throws {
        let directory = try TemporaryDirectory()
        let store = LocalDataStore(directory: directory.url, now: clock.wallClock)
        _ = try await ClosureLoader { Data("x".utf8) }.cache(in: store).loadData()
        clock.advance(by: .seconds(24 * 3600))

        await #expect(throws: DataLoaderError.expiredCache(age: .seconds(24 * 3600))) {
            try await LocalLoader(store: store, cachePolicy: TwentyFourHoursPolicy()).loadData()
        }
        #expect(try await LocalLoader(store: store, cachePolicy: NullPolicy()).loadData() == Data("x".utf8))
    }

    @Test func defaultLoader_missingResourceThrowsNoSuchFile() async throws {
        await #expect(throws: DataLoaderError.noSuchFile) {
            try await DefaultLoader(resource: "not_there", in: .main).loadData()
        }
    }

    @Test func defaultLoader_servesTheBundledDefaultData() async throws {
        let data = try await DefaultLoader().loadData()
        #expect(String(decoding: data, as: UTF8.self).contains("Default data"))
    }

    @Test(arguments: [(-1, true), (0, false), (1, false)])
    func twentyFourHoursPolicy_boundary(offset: Int, valid: Bool) {
        let stored = clock.date
        let now = stored.addingTimeInterval(TimeInterval(24 * 3600 + offset))
        #expect(TwentyFourHoursPolicy().freshness.isFresh(storedAt: stored, now: now) == valid)
    }

    @Test func nullPolicy_acceptsAnyAge() {
        #expect(NullPolicy().freshness.isFresh(storedAt: clock.date, now: clock.date.addingTimeInterval(365 * 86_400)))
    }

    @Test func cacheDecorator_writesOnlyWhatItFetched() async throws {
        let directory = try TemporaryDirectory()
        let store = LocalDataStore(directory: directory.url, now: clock.wallClock)
        let failing = ClosureLoader<Void, Data> { throw TestError("offline") }
        await #expect(throws: TestError("offline")) { try await failing.cache(in: store).loadData() }
        #expect(try await store.saved() == nil)
    }

    @Test func fallbackComposite_hasTheArticlesInitialiser() async throws {
        let sut = DataLoaderWithFallbackComposite(
            primary: ClosureLoader<Void, Data> { throw TestError() }.named("p"),
            fallback: ClosureLoader { Data("f".utf8) }.named("f"))
        #expect(try await sut.loadData() == Data("f".utf8))
    }
}
