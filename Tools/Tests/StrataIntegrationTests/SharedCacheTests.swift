import Foundation
import Testing
@_spi(StrataInternals) import Strata
import DemoServer
import StrataTesting

/// Two `strata fetch` processes, one after the other, on one cache: the second is served from what
/// the first saved, whichever store holds it.
@Suite("strata fetch --store: a cache shared across processes", .timeLimit(.minutes(3)))
struct SharedCacheTests {
    static let postgresURL = ProcessInfo.processInfo.environment["STRATA_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }
    static let postgresSkipReason: Comment = "STRATA_POSTGRES_URL is not set; run eval \"$(scripts/postgres.sh start)\""

    func secondProcessIsServedFromTheFirstsCache(store: String) async throws {
        try await withDemoServer { server in
            let cache = try TemporaryDirectory(prefix: "strata-shared-\(store)")
            defer { cache.remove() }
            // A URL of its own: PostgreSQL's cache table outlives the test process, and a later run's
            // server can get the same port (a loop run's first fetch was served a 21-minute-old copy
            // an earlier run had stored under the same URL).
            let url = server.feedURL.appending(queryItems: [URLQueryItem(name: "run", value: UUID().uuidString)])
            let arguments = ["fetch", url.absoluteString, "--store", store, "--cache-dir", cache.url.path, "--max-age", "1h"]

            let first = try await TwoProcessTests.run(arguments)
            #expect(first.status == 0, "\(first.stderr)")
            #expect(first.stderr.contains("served from remote"))
            let second = try await TwoProcessTests.run(arguments)
            #expect(second.status == 0, "\(second.stderr)")
            #expect(second.stderr.contains("served from fresh cache"), "\(second.stderr)")
            #expect(second.stdout == first.stdout)
            #expect(server.requestCount() == 1, "the second process never asked the server")
        }
    }

    @Test(arguments: ["file", "sqlite"])
    func localStores(store: String) async throws {
        try await secondProcessIsServedFromTheFirstsCache(store: store)
    }

    @Test(.enabled(if: postgresURL != nil || ProcessInfo.processInfo.environment["CI"] == "true", postgresSkipReason))
    func postgres() async throws {
        _ = try #require(Self.postgresURL, "CI=true but STRATA_POSTGRES_URL is not set: .ci/run must start PostgreSQL")
        try await secondProcessIsServedFromTheFirstsCache(store: "postgres")
    }

    @Test func anUnreachableSharedCacheStillServesFromTheNetwork() async throws {
        try await withDemoServer { server in
            let (status, stdout, stderr) = try await TwoProcessTests.run(
                ["fetch", server.feedURL.absoluteString, "--store", "postgres", "--postgres-url", "postgres://u:secret@127.0.0.1:1/db"])
            #expect(status == 0, "\(stderr)")
            #expect(try JSONDecoder().decode([FeedItem].self, from: stdout) == DemoData.feed)
            #expect(stderr.contains("served from remote"))
            #expect(!stderr.contains("secret"))
        }
    }
}
