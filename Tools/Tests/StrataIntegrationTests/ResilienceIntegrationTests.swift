import Foundation
import Logging
import MetricsTestKit
import Testing
@_spi(StrataInternals) import Strata
import DemoServer
import StrataDemo
import StrataTesting

/// timeout, circuitBreaker, coalesced and the observers against the real in-process server.
@Suite("resilience against a real server", .timeLimit(.minutes(3)))
struct ResilienceIntegrationTests {
    @Test func aResponseSlowerThanTheTimeoutIsCancelledAndAFallbackServes() async throws {
        try await withDemoServer { server in
            do {
                let directory = try TemporaryDirectory(prefix: "strata-resilience")
                defer { directory.remove() }
                let store = FileStore<[FeedItem]>(directory: directory.url)
                try await store.insert(DemoData.feed, for: "feed", storedAt: Date())
                server.faults = .init(holdRequests: true)
                let clock = ManualClock()
                let chain = HTTPLoader(url: server.feedURL).decoding([FeedItem].self)
                    .timingOut(after: .seconds(2)).environment(\.clock, clock)
                    .fallingBack(to: store.loader(key: "feed").named("stale local"))

                let load = Task { try await chain.loadServed() }
                await server.waitForRequests(count: 1)
                try await clock.waitForSleepers()
                clock.advance(by: .seconds(2))
                let served = try await load.value
                server.releaseHeldRequests()

                #expect(served.value == DemoData.feed)
                #expect(served.provenance.tier == "stale local")
                let timedOut = served.events.contains { if case .timedOut = $0 { true } else { false } }
                #expect(timedOut)
            }
        }
    }

    @Test func aTimeoutAloneIsATypedError() async throws {
        try await withDemoServer { server in
            server.faults = .init(holdRequests: true)
            let clock = ManualClock()
            let load = Task { try await HTTPLoader(url: server.feedURL).timingOut(after: .seconds(1)).environment(\.clock, clock).load() }
            await server.waitForRequests(count: 1)
            try await clock.waitForSleepers()
            clock.advance(by: .seconds(1))
            let error = await #expect(throws: TimeoutError.self) { try await load.value }
            #expect(error?.tier.hasPrefix("HTTP GET http://127.0.0.1:") == true)
            server.releaseHeldRequests()
        }
    }

    @Test func refusedConnectionsOpenTheCircuitAndTheCacheAnswersWithoutTouchingTheNetwork() async throws {
        try await withDemoServer { server in
            do {
                let directory = try TemporaryDirectory(prefix: "strata-resilience")
                defer { directory.remove() }
                let store = FileStore<[FeedItem]>(directory: directory.url)
                try await store.insert(DemoData.feed, for: "feed", storedAt: Date())
                let clock = ManualClock()
                let breaker = CircuitBreaker(
                    name: "demo", policy: CircuitBreakerPolicy(minimumThroughput: 3, breakDuration: .seconds(30)), clock: clock)
                let client = CountingHTTPClient()
                let chain = HTTPLoader(url: server.feedURL, transport: client).decoding([FeedItem].self)
                    .guarded(by: breaker)
                    .fallingBack(to: store.loader(key: "feed").named("cache"))
                await server.goOffline()

                for _ in 0..<3 { _ = try await chain.load() }
                #expect(breaker.state == .open)
                #expect(client.requestCount == 3)

                let served = try await chain.loadServed()
                #expect(served.value == DemoData.feed)
                #expect(client.requestCount == 3, "an open circuit does not call the server")

                try await server.goOnline()
                clock.advance(by: .seconds(30))
                _ = try await chain.load()
                #expect(breaker.state == .closed, "the half-open trial reached the server again")
                #expect(client.requestCount == 4)
            }
        }
    }

    @Test func oneThousandConcurrentIdenticalLoadsMakeExactlyOneRequest() async throws {
        try await withDemoServer { server in
            server.faults = .init(holdRequests: true)
            let feed = HTTPLoader(url: server.feedURL).decoding([FeedItem].self).coalesced()
            let results = try await withThrowingTaskGroup(of: [FeedItem].self) { group in
                for _ in 0..<1000 { group.addTask { try await feed.load() } }
                try await feed.waitForWaiters(count: 1000)
                await server.waitForRequests(count: 1)
                server.releaseHeldRequests()
                return try await group.reduce(into: [[FeedItem]]()) { $0.append($1) }
            }
            #expect(results.count == 1000)
            #expect(results.allSatisfy { $0 == DemoData.feed })
            #expect(server.requestCount() == 1)
        }
    }

    @Test func aServiceUnavailableWithRetryAfterIsLoggedMeteredAndRetried() async throws {
        try await withDemoServer { server in
            server.faults = .init(status: 503, remainingFaults: 1, retryAfterSeconds: 2)
            let clock = ManualClock()
            let capture = LogCapture(level: .info)
            let metrics = TestMetrics()
            let secretURL = URL(string: "http://user:hunter2@127.0.0.1:\(server.port)/feed?token=abc123")!
            let chain = HTTPLoader(url: secretURL).decoding([FeedItem].self)
                .retrying(.constant(attempts: 2, delay: .seconds(1))).environment(\.clock, clock)
                .metered("feed", metricsFactory: metrics)
                .logged(to: capture.logger)

            let load = Task { try await chain.load() }
            try await clock.waitForSleepers()
            clock.advance(by: .seconds(2))
            let value = try await load.value
            #expect(value == DemoData.feed)

            let retries = try metrics.expectCounter("strata_retries_total", [("loader", "feed")])
            let misses = try metrics.expectCounter("strata_cache_misses_total", [("loader", "feed")])
            #expect(retries.totalValue == 1)
            #expect(misses.totalValue == 1)
            let log = capture.entries.map { $0.line() }.joined(separator: "\n")
            #expect(log.contains("retrying"))
            #expect(log.contains("served from remote"))
            #expect(!log.contains("hunter2"))
            #expect(!log.contains("abc123"))
        }
    }
}
