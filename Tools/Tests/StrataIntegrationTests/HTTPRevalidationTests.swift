import Foundation
import Testing
import Strata
import DemoServer
import StrataTesting

/// The revalidating HTTP cache against the real demo server (ETag, Last-Modified, 304) and a real
/// FileStore in a temporary directory, with the wall clock moved by hand.
@Suite("HTTP revalidation, end to end", .timeLimit(.minutes(3)))
final class HTTPRevalidationTests {
    let directory: TemporaryDirectory
    let clock = ManualClock()

    init() throws {
        directory = try TemporaryDirectory(prefix: "strata-revalidation")
    }

    var store: FileStore<[FeedItem]> { FileStore(directory: directory.url, logger: quietLogger) }

    func feed(_ server: DemoServer, policy: FreshnessPolicy = .maxAge(.zero), honorsCacheControl: Bool = true) -> EnvironmentLoader<RevalidatedLoader<Void, FileStore<[FeedItem]>>> {
        HTTPLoader(url: server.feedURL)
            .revalidated(in: store, key: "feed", freshness: policy, honorsCacheControl: honorsCacheControl, decoding: [FeedItem].self)
            .environment(clock.environment(logger: quietLogger))
    }

    func entryBytes() throws -> Data {
        try Data(contentsOf: store.fileURL(for: "feed"))
    }

    @Test func firstLoad_is200_andStoresTheServersValidators() async throws {
        try await withDemoServer { server in
            let served = try await feed(server).loadServed()

            #expect(served.value == DemoData.feed)
            #expect(served.provenance.origin == .remote)
            let entry = try #require(try await store.retrieve("feed"))
            #expect(entry.value == DemoData.feed)
            #expect(entry.storedAt == clock.date)
            #expect(entry.validators == server.feedValidators)
            let etag = try #require(entry.validators.etag)
            #expect(etag.count == 66 && etag.hasPrefix("\"") && etag.hasSuffix("\""), "a strong ETag: a quoted SHA-256")
            #expect(server.requests.first.map { header("If-None-Match", in: $0) } == .some(nil))
        }
    }

    @Test func secondLoad_sendsIfNoneMatch_gets304_andOnlyTheStampChanges() async throws {
        try await withDemoServer { server in
            let loader = feed(server)
            _ = try await loader.load()
            let before = try entryBytes()
            clock.advance(by: .seconds(90))

            let served = try await loader.loadServed()

            #expect(served.value == DemoData.feed)
            #expect(server.requestCount() == 2)
            #expect(server.notModifiedCount() == 1)
            let second = try #require(server.requests.last)
            #expect(header("If-None-Match", in: second) == server.feedValidators.etag)
            #expect(header("If-Modified-Since", in: second) == server.feedValidators.lastModified)
            #expect(served.provenance.origin == .remote)
            #expect(served.provenance.age == .zero)
            #expect(served.events.contains { if case .revalidated(_, "feed") = $0 { true } else { false } })

            let after = try entryBytes()
            #expect(after.count == before.count)
            let changed = zip(before, after).enumerated().filter { $0.element.0 != $0.element.1 }.map(\.offset)
            #expect(!changed.isEmpty && changed.allSatisfy { (5..<13).contains($0) }, "only the 8-byte storedAt differs: \(changed)")
            #expect(try await store.retrieve("feed")?.storedAt == clock.date)
        }
    }

    @Test func changedContent_is200_withANewETag() async throws {
        try await withDemoServer { server in
            let loader = feed(server)
            _ = try await loader.load()
            let firstETag = try await store.retrieve("feed")?.validators.etag
            server.feed = updatedFeed

            let served = try await loader.loadServed()

            #expect(served.value == updatedFeed)
            #expect(server.notModifiedCount() == 0)
            #expect(header("If-None-Match", in: try #require(server.requests.last)) == firstETag)
            let entry = try #require(try await store.retrieve("feed"))
            #expect(entry.value == updatedFeed)
            #expect(entry.validators == server.feedValidators)
            #expect(entry.validators.etag != firstETag)
        }
    }

    @Test func noStore_writesNothing_andLeavesAnExistingEntryAlone() async throws {
        try await withDemoServer { server in
            server.faults.cacheControl = "no-store"
            _ = try await feed(server).load()
            #expect(!FileManager.default.fileExists(atPath: store.fileURL(for: "feed").path))

            server.faults.cacheControl = nil
            _ = try await feed(server).load()
            let saved = try entryBytes()
            server.faults.cacheControl = "no-store"
            server.feed = updatedFeed

            #expect(try await feed(server).load() == updatedFeed)
            #expect(try entryBytes() == saved)
        }
    }

    @Test func serverMaxAge_servesFromTheStoreUntilItEnds_thenRevalidates() async throws {
        try await withDemoServer { server in
            server.faults.cacheControl = "max-age=60"
            let loader = feed(server, policy: .maxAge(.seconds(3600)))
            _ = try await loader.load()
            #expect(try await store.retrieve("feed")?.validators.maxAge == .seconds(60))

            clock.advance(by: .seconds(59))
            #expect(try await loader.loadServed().provenance.origin == .disk)
            #expect(server.requestCount() == 1)

            clock.advance(by: .seconds(1))
            #expect(try await loader.loadServed().provenance.origin == .remote)
            #expect(server.requestCount() == 2)
            #expect(server.notModifiedCount() == 1)
        }
    }

    @Test func noCache_revalidatesEveryLoad_evenWithinTheClientsPolicy() async throws {
        try await withDemoServer { server in
            server.faults.cacheControl = "no-cache"
            let loader = feed(server, policy: .maxAge(.seconds(3600)))
            for _ in 0..<3 { _ = try await loader.load() }
            #expect(server.requestCount() == 3)
            #expect(server.notModifiedCount() == 2)
        }
    }

    @Test func serverError_passesThroughTyped_andAFallbackServesTheStaleCopy() async throws {
        try await withDemoServer { server in
            _ = try await feed(server).load()
            let saved = try entryBytes()
            server.faults = .init(status: 503)
            clock.advance(by: .seconds(600))
            let chain = feed(server).named("remote")
                .fallingBack(to: store.loader(key: "feed", freshness: .any).environment(\.now, clock.wallClock).named("stale local"))

            await #expect {
                try await feed(server).load()
            } throws: { error in
                (error as? HTTPError)?.statusCode == 503
            }
            let served = try await chain.loadServed()

            #expect(served.value == DemoData.feed)
            #expect(served.provenance.tier == "stale local")
            #expect(served.provenance.age == .seconds(600))
            #expect(try entryBytes() == saved)
        }
    }

    /// `name`'s value in a recorded request, compared case-insensitively (clients differ in case).
    func header(_ name: String, in request: DemoServer.RecordedRequest) -> String? {
        request.headers.first { $0.key.lowercased() == name.lowercased() }?.value
    }
}
