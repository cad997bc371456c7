import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@_spi(StrataInternals) import Strata
import DemoServer
import StrataSQLite
import StrataTesting

/// A fault the demo server injects, and what the chain must answer it with.
enum ServerFault: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case internalServerError = "500"
    case unavailableWithRetryAfter = "503 with Retry-After"
    case unavailable = "503 without Retry-After"
    case notFound = "404"
    case truncatedJSON = "200 with truncated JSON"
    case wrongShape = "200 with valid JSON of the wrong shape"
    case tooLargeDeclared = "body over the limit, Content-Length declared"
    case tooLargeChunked = "body over the limit, chunked (length unknown)"
    case slowerThanTimeout = "answer slower than the timeout"
    case resetMidBody = "connection reset mid-body"
    case serverDown = "server down"

    var testDescription: String { rawValue }

    /// The body limit the chains under test use: far above the demo feed, far below the oversized answers.
    static let bodyLimit = 1024 * 1024
    /// The size of the oversized answers: 16 MiB, generated lazily by the server (the dedicated tests
    /// below use 1 GiB to show reading stops early).
    static let oversized = 16 * 1024 * 1024
    /// The remote tier's deadline (on a manual clock: the test decides when it passes).
    static let timeout = Duration.seconds(5)

    /// Turns the fault on.
    func inject(into server: DemoServer) async {
        switch self {
        case .internalServerError: server.faults = .init(status: 500)
        case .unavailableWithRetryAfter: server.faults = .init(status: 503, retryAfterSeconds: 7)
        case .unavailable: server.faults = .init(status: 503)
        case .notFound: server.faults = .init(status: 404)
        case .truncatedJSON: server.faults = .init(truncateBodies: true)
        case .wrongShape: server.faults = .init(wrongShape: true)
        case .tooLargeDeclared: server.faults = .init(oversizedBody: Self.oversized, declaresOversizedLength: true)
        case .tooLargeChunked: server.faults = .init(oversizedBody: Self.oversized, declaresOversizedLength: false)
        case .slowerThanTimeout: server.faults = .init(holdRequests: true)
        case .resetMidBody: server.faults = .init(resetMidBody: true)
        case .serverDown: await server.goOffline()
        }
    }

    /// Whether `error` is the typed error the chain promises for this fault.
    func isExpected(_ error: any Error, server: DemoServer) -> Bool {
        switch (self, error) {
        case (.internalServerError, HTTPError.status(500, let url, _, _)),
             (.notFound, HTTPError.status(404, let url, _, _)):
            return url == server.feedURL
        case (.unavailableWithRetryAfter, HTTPError.status(503, _, let headers, _)):
            return headers[.retryAfter] == "7"
        case (.unavailable, HTTPError.status(503, _, let headers, _)):
            return headers[.retryAfter] == nil
        case (.truncatedJSON, HTTPError.decoding(let url, _, _)), (.wrongShape, HTTPError.decoding(let url, _, _)):
            return url == server.feedURL
        case (.tooLargeDeclared, HTTPError.bodyTooLarge(_, let limit, let received, let contentLength)):
            return limit == Self.bodyLimit && received == 0 && contentLength == Self.oversized
        case (.tooLargeChunked, HTTPError.bodyTooLarge(_, let limit, let received, _)):
            return limit == Self.bodyLimit && received > limit && received <= limit + 1024 * 1024
        case (.slowerThanTimeout, let error as TimeoutError):
            return error.timeout == Self.timeout
        case (.resetMidBody, HTTPError.transport(let url, _, _)), (.serverDown, HTTPError.transport(let url, _, _)):
            return url == server.feedURL
        default:
            return false
        }
    }
}

/// The stores the faults run against: the previous copy must survive in every one of them.
enum FaultStoreKind: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case memory = "MemoryStore"
    case file = "FileStore"
    case sqlite = "SQLiteStore"

    var testDescription: String { rawValue }

    func make(in directory: TemporaryDirectory) throws -> any Store<String, [FeedItem]> {
        switch self {
        case .memory: MemoryStore<String, [FeedItem]>()
        case .file: FileStore<[FeedItem]>(directory: directory.appending("files"), codec: JSONCodec<[FeedItem]>(), logger: quietLogger)
        case .sqlite: try SQLiteStore<[FeedItem]>(path: directory.appending("cache.sqlite"), logger: quietLogger)
        }
    }
}

/// Server faults against a real in-process server: each fails with its typed error (or the chain's
/// fallback serves), and the copy already cached in a real store is never touched.
@Suite("server faults", .timeLimit(.minutes(3)))
struct ServerFaultTests {
    /// The good copy every test starts with: not what the server serves, stamped an hour before the
    /// test's clock, with validators of its own.
    static let goodCopy = CacheEntry(
        value: updatedFeed, storedAt: Date(timeIntervalSince1970: 1_700_000_000),
        validators: CacheValidators(etag: "\"good-copy\"", lastModified: "Tue, 14 Nov 2023 22:13:20 GMT", maxAge: .seconds(60)))

    /// The remote tier as applications write it: HTTP with a body limit, decoded, bounded in time,
    /// written through to `store`.
    static func remote(
        _ server: DemoServer, store: some Store<String, [FeedItem]>, clock: ManualClock
    ) -> some Loader<Void, [FeedItem]> {
        // A client of its own, so the oversized answers never share a session with other tests.
        HTTPLoader(url: server.feedURL, maxBodyBytes: ServerFault.bodyLimit, transport: URLSessionHTTPClient())
            .decoding([FeedItem].self)
            .timingOut(after: ServerFault.timeout).environment(\.clock, clock)
            .writingThrough(in: store, key: "feed").environment(LoadEnvironment(now: clock.wallClock, logger: quietLogger))
    }

    /// Runs `load` against the faulty server, driving the manual clock past the deadline for the slow
    /// fault, and returns how it ended.
    static func run<T: Sendable>(
        _ fault: ServerFault, server: DemoServer, clock: ManualClock, _ load: @escaping @Sendable () async throws -> T
    ) async -> Result<T, any Error> {
        let task = Task { try await load() }
        if fault == .slowerThanTimeout {
            await server.waitForRequests(count: 1)
            do {
                try await clock.waitForSleepers(count: 1)
            } catch {
                task.cancel()  // the test was cancelled while waiting: so is its load
            }
            clock.advance(by: ServerFault.timeout)
        }
        let result = await task.result
        server.releaseHeldRequests()
        return result
    }

    /// The entry and (for the file store) the file's bytes: what must not change.
    static func snapshot(_ store: some Store<String, [FeedItem]>) async throws -> (CacheEntry<[FeedItem]>?, Data?) {
        let entry = try await store.retrieve("feed")
        let bytes = (store as? FileStore<[FeedItem]>).flatMap { try? Data(contentsOf: $0.fileURL(for: "feed")) }
        return (entry, bytes)
    }

    @Test(arguments: ServerFault.allCases, FaultStoreKind.allCases)
    func fault_failsWithItsTypedError_andLeavesTheCachedCopyUntouched(fault: ServerFault, kind: FaultStoreKind) async throws {
        let directory = try TemporaryDirectory(prefix: "strata-faults")
        let store = try kind.make(in: directory)
        try await store.insert(Self.goodCopy, for: "feed")
        let before = try await Self.snapshot(store)
        let clock = ManualClock()

        try await withDemoServer { server in
            let remote = Self.remote(server, store: store, clock: clock)
            await fault.inject(into: server)

            let result = await Self.run(fault, server: server, clock: clock) { try await remote.load() }

            switch result {
            case .success(let value):
                Issue.record("\(fault): expected a typed error, got a value of \(value.count) items")
            case .failure(let error):
                #expect(fault.isExpected(error, server: server), "\(fault): unexpected error \(error)")
            }
        }
        let after = try await Self.snapshot(store)
        #expect(after.0 == Self.goodCopy, "\(fault) in \(kind): the cached copy changed")
        #expect(after.0 == before.0)
        #expect(after.1 == before.1, "\(fault) in \(kind): the cache file's bytes changed")
    }

    @Test(arguments: ServerFault.allCases)
    func offlineFirstChain_servesTheCachedCopy_whenTheServerMisbehaves(fault: ServerFault) async throws {
        let directory = try TemporaryDirectory(prefix: "strata-faults")
        let store = FileStore<[FeedItem]>(directory: directory.url, codec: JSONCodec<[FeedItem]>(), logger: quietLogger)
        try await store.insert(Self.goodCopy, for: "feed")
        let fileBefore = try Data(contentsOf: store.fileURL(for: "feed"))
        let clock = ManualClock()
        clock.advance(by: .seconds(3600))

        try await withDemoServer { server in
            let chain = Self.remote(server, store: store, clock: clock).named("remote")
                .fallingBack(to: store.loader(key: "feed", freshness: .any).environment(\.now, clock.wallClock).named("stale cache"))
            await fault.inject(into: server)

            let result = await Self.run(fault, server: server, clock: clock) { try await chain.loadServed() }

            let served = try result.get()
            #expect(served.value == updatedFeed)
            #expect(served.provenance.tier == "stale cache")
            #expect(served.provenance.storedAt == Self.goodCopy.storedAt)
            let remoteFailure = served.events.compactMap { event -> (any Error)? in
                if case .tierFailed("remote", let error) = event { return error }
                return nil
            }.first
            #expect(remoteFailure.map { fault.isExpected($0, server: server) } == true, "\(fault): \(String(describing: remoteFailure))")
        }
        #expect(try await store.retrieve("feed") == Self.goodCopy)
        #expect(try Data(contentsOf: store.fileURL(for: "feed")) == fileBefore)
    }

    /// The control: with the server healthy, the same chain does replace the copy, so the assertions
    /// above would see a write if a fault let one through.
    @Test(arguments: FaultStoreKind.allCases)
    func healthyServer_replacesTheCachedCopy(kind: FaultStoreKind) async throws {
        let directory = try TemporaryDirectory(prefix: "strata-faults")
        let store = try kind.make(in: directory)
        try await store.insert(Self.goodCopy, for: "feed")
        let clock = ManualClock()

        try await withDemoServer { server in
            let value = try await Self.remote(server, store: store, clock: clock).load()
            #expect(value == DemoData.feed)
        }
        let entry = try #require(try await store.retrieve("feed"))
        #expect(entry.value == DemoData.feed)
        #expect(entry.storedAt == clock.date)
    }

    @Test(.timeLimit(.minutes(1)))
    func oversizedChunkedBody_isRefusedAfterAboutTheLimit_withoutReadingTheRest() async throws {
        try await withDemoServer { server in
            // A terabyte, generated as it is sent: no client reads it to the end.
            let size = 1 << 40
            server.faults = .init(oversizedBody: size, declaresOversizedLength: false)
            do {
                _ = try await HTTPLoader(url: server.feedURL, maxBodyBytes: ServerFault.bodyLimit, transport: URLSessionHTTPClient()).load()
                Issue.record("expected bodyTooLarge")
            } catch HTTPError.bodyTooLarge(let url, let limit, let received, let contentLength) {
                #expect(url == server.feedURL)
                #expect(limit == ServerFault.bodyLimit)
                #expect(contentLength == nil)
                // The client kept at most the limit plus the chunk that crossed it.
                #expect(received > limit && received <= limit + 1024 * 1024, "received \(received)")
            }
            // The client closed the connection, as the server saw it (awaited, not timed).
            // (FoundationNetworking reads on until the cancellation lands, so on loopback the server
            // gets some 100-250 MB out; see URLSessionHTTPClient's "Maximum body size".)
            let streamed = await server.waitForStreamedBodies(count: 1)
            #expect(streamed.count == 1 && streamed[0].closedByClient, "\(streamed)")
        }
    }

    @Test func oversizedDeclaredBody_failsOnTheContentLengthAlone() async throws {
        try await withDemoServer { server in
            server.faults = .init(oversizedBody: ServerFault.oversized, declaresOversizedLength: true)
            await #expect {
                try await HTTPLoader(url: server.feedURL, maxBodyBytes: ServerFault.bodyLimit, transport: URLSessionHTTPClient()).load()
            } throws: { error in
                guard case HTTPError.bodyTooLarge(_, _, 0, ServerFault.oversized?) = error else { return false }
                return "\(error)".contains("larger than the limit of \(ServerFault.bodyLimit) bytes")
            }
        }
    }

    @Test func bodyJustUnderTheLimit_isServed_andOneByteMoreIsRefused() async throws {
        try await withDemoServer { server in
            let size = try DemoServerJSON.feedBytes()
            let exact = try await HTTPLoader(url: server.feedURL, maxBodyBytes: size).load()
            #expect(exact.body.count == size)
            await #expect {
                try await HTTPLoader(url: server.feedURL, maxBodyBytes: size - 1).load()
            } throws: { error in
                if case HTTPError.bodyTooLarge(_, let limit, _, _) = error { return limit == size - 1 }
                return false
            }
        }
    }

    @Test func theClientsOwnLimit_appliesWhenTheRequestSetsNone() async throws {
        try await withDemoServer { server in
            server.faults = .init(oversizedBody: 8 * 1024 * 1024, declaresOversizedLength: false)
            let client = URLSessionHTTPClient(maxBodyBytes: 256 * 1024)
            await #expect {
                try await HTTPLoader(url: server.feedURL, transport: client).load()
            } throws: { error in
                if case HTTPError.bodyTooLarge(_, 262_144, _, _) = error { return true }
                return false
            }
            // A request's own limit wins over the client's.
            let large = try await HTTPLoader(url: server.feedURL, maxBodyBytes: 16 * 1024 * 1024, transport: client).load()
            #expect(large.body.count == 8 * 1024 * 1024)
        }
    }

    @Test func aSessionOfYourOwn_stillRefusesALargerBody() async throws {
        try await withDemoServer { server in
            server.faults = .init(oversizedBody: 4 * 1024 * 1024, declaresOversizedLength: true)
            let client = URLSessionHTTPClient(session: URLSession(configuration: .ephemeral), maxBodyBytes: 64 * 1024)
            await #expect {
                try await HTTPLoader(url: server.feedURL, transport: client).load()
            } throws: { error in
                if case HTTPError.bodyTooLarge(_, 65_536, _, _) = error { return true }
                return false
            }
        }
    }

    @Test func bodyTooLarge_isNotRetried() async throws {
        try await withDemoServer { server in
            server.faults = .init(oversizedBody: 2 * 1024 * 1024, declaresOversizedLength: true)
            let loader = HTTPLoader(url: server.feedURL, maxBodyBytes: 1024, transport: URLSessionHTTPClient()).retrying(.constant(attempts: 3, delay: .seconds(1))).environment(\.clock, ManualClock())
            await #expect(throws: HTTPError.self) { try await loader.load() }
            #expect(server.requestCount() == 1)
        }
    }
}

/// The demo feed's size on the wire.
enum DemoServerJSON {
    static func feedBytes() throws -> Int {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return try encoder.encode(DemoData.feed).count
    }
}
