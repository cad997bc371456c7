import Foundation
import Testing
import Strata
@testable import StrataCLI
import DemoServer
import StrataTesting

/// `strata fetch` revalidates instead of downloading again: past `--max-age` it sends the stored
/// validators, serves the cached body on 304 and re-stamps it, and follows the server's
/// `Cache-Control`. Run in-process against the demo server, the wall clock moved by hand.
@Suite("strata fetch revalidation", .timeLimit(.minutes(3)))
final class FetchRevalidationTests {
    let directory: TemporaryDirectory
    let clock = ManualClock()

    init() throws {
        directory = try TemporaryDirectory(prefix: "strata-fetch-revalidation")
    }

    func fetch(_ url: URL, store: Fetcher.StoreKind = .file, maxAge: Duration = .seconds(300), json: Bool = false)
        async -> (Fetcher.ExitCode, CapturedOutput)
    {
        let output = CapturedOutput()
        var options = Fetcher.Options(
            url: url, cacheDirectory: directory.url, maxAge: maxAge, retries: 0, timeout: .seconds(90), json: json)
        options.store = store
        let code = await Fetcher(options: options, now: clock.wallClock).run(stdout: output.stdout, stderr: output.stderr)
        return (code, output)
    }

    func header(_ name: String, in request: DemoServer.RecordedRequest?) -> String? {
        request?.headers.first { $0.key.lowercased() == name.lowercased() }?.value
    }

    @Test(arguments: [Fetcher.StoreKind.file, .sqlite])
    func pastMaxAge_sendsTheValidators_servesTheCachedBodyOn304_andReStampsIt(store: Fetcher.StoreKind) async throws {
        try await withDemoServer { server in
            let (_, first) = await fetch(server.feedURL, store: store)
            clock.advance(by: .seconds(600))

            let (code, second) = await fetch(server.feedURL, store: store)

            #expect(code == .served)
            #expect(second.body == first.body)
            #expect(server.requestCount() == 2)
            #expect(server.notModifiedCount() == 1, "the second request got a 304, not the whole body again")
            #expect(header("If-None-Match", in: server.requests.last) == server.feedValidators.etag)
            #expect(header("If-Modified-Since", in: server.requests.last) == server.feedValidators.lastModified)
            #expect(second.report == [
                "strata fetch: served from remote (revalidated: 304 Not Modified, served the cached copy, fresh again), "
                    + "\(first.body.count) bytes",
            ])

            // Re-stamped: fresh again for the whole --max-age, so the next fetch asks nobody.
            clock.advance(by: .seconds(240))
            let (_, third) = await fetch(server.feedURL, store: store)
            #expect(third.body == first.body)
            #expect(server.requestCount() == 2)
            #expect(third.report.last?.hasPrefix("strata fetch: served from fresh cache (age 4m 0s)") == true)
        }
    }

    @Test func changedOnTheServer_downloadsTheNewBody() async throws {
        try await withDemoServer { server in
            _ = await fetch(server.feedURL)
            server.feed = updatedFeed
            clock.advance(by: .seconds(600))

            let (_, output) = await fetch(server.feedURL)

            let feed = try JSONDecoder().decode([FeedItem].self, from: output.body)
            #expect(feed == updatedFeed)
            #expect(header("If-None-Match", in: server.requests.last) != nil, "the request was conditional")
            #expect(server.notModifiedCount() == 0)
            #expect(output.report.last?.hasPrefix("strata fetch: served from remote (downloaded: 200, age 0s, saved to the cache)") == true)
        }
    }

    @Test func json_saysWhetherTheCopyWasRevalidated() async throws {
        try await withDemoServer { server in
            let (_, first) = await fetch(server.feedURL, json: true)
            clock.advance(by: .seconds(600))
            let (_, second) = await fetch(server.feedURL, json: true)

            let downloaded = try #require(try JSONSerialization.jsonObject(with: Data(first.report[0].utf8)) as? [String: Any])
            #expect(downloaded["httpStatus"] as? Int == 200)
            #expect(downloaded["revalidated"] as? Bool == false)
            #expect(downloaded["savedToCache"] as? Bool == true)
            let revalidated = try #require(try JSONSerialization.jsonObject(with: Data(second.report[0].utf8)) as? [String: Any])
            #expect(revalidated["servedFrom"] as? String == "remote")
            #expect(revalidated["httpStatus"] as? Int == 304)
            #expect(revalidated["revalidated"] as? Bool == true)
            #expect(revalidated["savedToCache"] as? Bool == true)
        }
    }

    @Test func cacheControlNoStore_isNeverCached() async throws {
        try await withDemoServer { server in
            server.faults.cacheControl = "no-store"
            let (_, first) = await fetch(server.feedURL)
            let (code, second) = await fetch(server.feedURL)

            #expect(code == .served)
            #expect(second.body == first.body)
            #expect(server.requestCount() == 2, "nothing was cached, so the second fetch asked again")
            #expect(header("If-None-Match", in: server.requests.last) == nil)
            let cached = try await FileStore<Data>(directory: directory.url, codec: DataCodec()).retrieve(server.feedURL.absoluteString)
            #expect(cached == nil)
            #expect(second.report.last?.hasPrefix(
                "strata fetch: served from remote (downloaded: 200, age 0s, not cached: Cache-Control no-store)") == true)
        }
    }

    @Test func cacheControlNoCache_revalidatesEveryTime_evenWithinMaxAge() async throws {
        try await withDemoServer { server in
            server.faults.cacheControl = "no-cache"
            _ = await fetch(server.feedURL)
            clock.advance(by: .seconds(1))

            let (_, output) = await fetch(server.feedURL, maxAge: .seconds(3600))

            #expect(server.requestCount() == 2)
            #expect(server.notModifiedCount() == 1)
            #expect(output.report.last?.contains("revalidated: 304 Not Modified") == true)
        }
    }

    /// The server's `max-age` shortens `--max-age`: past the server's 60 s the copy is revalidated
    /// although `--max-age` is an hour.
    @Test func serverMaxAgeShorterThanMaxAge_wins() async throws {
        try await withDemoServer { server in
            server.faults.cacheControl = "max-age=60"
            _ = await fetch(server.feedURL, maxAge: .seconds(3600))
            clock.advance(by: .seconds(59))
            _ = await fetch(server.feedURL, maxAge: .seconds(3600))
            #expect(server.requestCount() == 1, "within both lifetimes: served from the cache")
            clock.advance(by: .seconds(2))

            let (_, output) = await fetch(server.feedURL, maxAge: .seconds(3600))

            #expect(server.requestCount() == 2)
            #expect(server.notModifiedCount() == 1)
            #expect(output.report.last?.contains("revalidated: 304 Not Modified") == true)
        }
    }

    /// ... and never extends it: past `--max-age` the copy is revalidated although the server said
    /// it stays fresh for a day.
    @Test func serverMaxAgeLongerThanMaxAge_doesNotExtendIt() async throws {
        try await withDemoServer { server in
            server.faults.cacheControl = "max-age=86400"
            _ = await fetch(server.feedURL, maxAge: .seconds(60))
            clock.advance(by: .seconds(61))

            let (_, output) = await fetch(server.feedURL, maxAge: .seconds(60))

            #expect(server.requestCount() == 2)
            #expect(server.notModifiedCount() == 1)
            #expect(output.report.last?.contains("revalidated: 304 Not Modified") == true)
        }
    }

    @Test func serverDownAfterTheCopyExpired_servesTheStaleCopy() async throws {
        try await withDemoServer { server in
            let (_, first) = await fetch(server.feedURL)
            await server.goOffline()
            clock.advance(by: .seconds(600))

            let (code, output) = await fetch(server.feedURL)

            #expect(code == .served)
            #expect(output.body == first.body)
            #expect(output.report.last?.hasPrefix("strata fetch: served from stale cache (age 10m 0s)") == true)
        }
    }
}
