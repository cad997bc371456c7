import Foundation
import Testing
import Strata
import StrataDemo
import StrataTesting

/// URLSessionHTTPClient and HTTPLoader against the real demo server.
@Suite("HTTP against a real server")
struct HTTPIntegrationTests {
    @Test func get_decodesTheFeed() async throws {
        try await withDemoServer { server in
            let feed = try await HTTPLoader(url: server.feedURL).decoding([FeedItem].self).load()
            #expect(feed == DemoData.feed)
            #expect(server.requests.first?.method == "GET")
        }
    }

    @Test func faultStatus_isATypedErrorWithStatusURLAndHeaders() async throws {
        try await withDemoServer { server in
            server.faults = .init(status: 503, retryAfterSeconds: 7)
            do {
                _ = try await HTTPLoader(url: server.feedURL).load()
                Issue.record("expected a 503")
            } catch let error as HTTPError {
                #expect(error.statusCode == 503)
                #expect(error.url == server.feedURL)
                guard case .status(_, _, let headers, let body) = error else { return }
                #expect(HTTPResponse(url: server.feedURL, statusCode: 503, headers: headers).header("retry-after") == "7")
                #expect(String(decoding: body, as: UTF8.self).contains("injected fault"))
            }
        }
    }

    @Test func notFound_isAStatusError() async throws {
        try await withDemoServer { server in
            let post = HTTPLoader.get { (id: Int) in server.baseURL.appendingPathComponent("posts/\(id)") }.decoding(Post.self)
            await #expect {
                try await post.load(404)
            } throws: { error in
                (error as? HTTPError)?.statusCode == 404
            }
        }
    }

    @Test func truncatedBody_isADecodingErrorWithTheURL() async throws {
        try await withDemoServer { server in
            server.faults = .init(truncateBodies: true)
            await #expect {
                try await HTTPLoader(url: server.feedURL).decoding([FeedItem].self).load()
            } throws: { error in
                guard case HTTPError.decoding(let url, _, _) = error else { return false }
                return url == server.feedURL
            }
        }
    }

    @Test func serverDown_isATransportErrorWithTheURL() async throws {
        try await withDemoServer { server in
            await server.goOffline()
            await #expect {
                try await HTTPLoader(url: server.feedURL).load()
            } throws: { error in
                guard case HTTPError.transport(let url, _, _) = error else { return false }
                return url == server.feedURL
            }
            try await server.goOnline()
            #expect(try await HTTPLoader(url: server.feedURL).load().statusCode == 200, "back on the same port")
        }
    }

    @Test func postJSON_createsAPostThenGetReadsIt() async throws {
        try await withDemoServer { server in
            let create = HTTPLoader<NewPost>.postJSON(to: server.baseURL.appendingPathComponent("posts")).decoding(Post.self)
            let read = HTTPLoader.get { (id: Int) in server.baseURL.appendingPathComponent("posts/\(id)") }.decoding(Post.self)

            let created = try await create.load(NewPost(title: "Hello", body: "World"))

            #expect(created == Post(id: 1, title: "Hello", body: "World"))
            #expect(try await read.load(1) == created)
            #expect(server.requests.first?.headers["Content-Type"] == "application/json")
        }
    }

    @Test func cancellation_abortsTheRequestInFlight() async throws {
        try await withDemoServer { server in
            server.faults = .init(holdRequests: true)
            let load = Task { try await HTTPLoader(url: server.feedURL).load() }
            await server.waitForRequests(count: 1)

            load.cancel()

            await #expect(throws: CancellationError.self) { try await load.value }
            server.releaseHeldRequests()
        }
    }

    @Test func concurrentLoads_allSucceed() async throws {
        try await withDemoServer { server in
            let loader = HTTPLoader(url: server.feedURL).decoding([FeedItem].self)
            try await withThrowingTaskGroup(of: [FeedItem].self) { group in
                for _ in 0..<20 { group.addTask { try await loader.load() } }
                for try await feed in group { #expect(feed == DemoData.feed) }
            }
            #expect(server.requestCount() == 20)
        }
    }
}
