import Foundation
import Testing
@_spi(StrataInternals) import Strata
import DemoServer
import StrataTesting

/// URLSessionHTTPClient and HTTPLoader against the real demo server.
@Suite("HTTP against a real server", .timeLimit(.minutes(3)))
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
                #expect(headers[HTTPField.Name("retry-after")!] == "7")
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
            #expect(try await HTTPLoader(url: server.feedURL).load().status.code == 200, "back on the same port")
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

@Suite("retry against a real server", .timeLimit(.minutes(3)))
struct RetryIntegrationTests {
    @Test func serviceUnavailableWithRetryAfter_isRetriedAfterTheServersDelay() async throws {
        try await withDemoServer { server in
            server.faults = .init(status: 503, remainingFaults: 2, retryAfterSeconds: 4)
            let clock = ManualClock()
            let feed = HTTPLoader(url: server.feedURL)
                .retrying(.constant(attempts: 3, delay: .seconds(1))).environment(\.clock, clock)
                .decoding([FeedItem].self)

            let load = Task { try await feed.loadServed() }
            for expected in 1...2 {
                try await clock.waitForSleepers(count: 1)
                #expect(server.requestCount() == expected)
                clock.advance(by: .seconds(4))
            }
            let served = try await load.value

            #expect(served.value == DemoData.feed)
            #expect(server.requestCount() == 3)
            let waits = served.events.compactMap { event -> Duration? in
                if case .retrying(_, _, let delay, _) = event { return delay }
                return nil
            }
            #expect(waits == [.seconds(4), .seconds(4)])
        }
    }

    @Test func refusedConnections_areRetriedThenReportedAsTransportErrors() async throws {
        try await withDemoServer { server in
            await server.goOffline()
            let clock = ManualClock()
            let feed = HTTPLoader(url: server.feedURL).retrying(.constant(attempts: 2, delay: .seconds(1))).environment(\.clock, clock)

            let load = Task { try await feed.load() }
            try await clock.waitForSleepers(count: 1)
            clock.advance(by: .seconds(1))

            await #expect {
                try await load.value
            } throws: { error in
                if case HTTPError.transport = error { return true }
                return false
            }
        }
    }

    @Test func errorRate_hitsTheShareOfRequestsTheRandomSourceDecides() async throws {
        let draws = Locked([0.1, 0.9, 0.4, 0.6])
        let server = try await DemoServer.start(random: { draws.withLock { $0.removeFirst() } })
        server.faults = .init(status: 500, errorRate: 0.5)
        var statuses: [Int] = []
        for _ in 0..<4 {
            do {
                statuses.append(try await HTTPLoader(url: server.feedURL).load().status.code)
            } catch let error as HTTPError {
                statuses.append(error.statusCode ?? -1)
            }
        }
        await server.stop()
        #expect(statuses == [500, 200, 500, 200])
    }
}
