import DemoServer
import Foundation
import Logging
@_spi(StrataInternals) import Strata

/// Resilience operators against the real demo server, on a simulated clock:
///
/// 1. 50 screens ask for the feed at once: ``Loader/coalesced()`` sends one request.
/// 2. The server hangs: ``Loader/timingOut(after:clock:)`` gives up after 2 s and the cache answers.
/// 3. The server goes down: once half of the last loads (at least 3) have failed — the timeout counts —
///    the circuit opens, and the next load is served from the cache without touching the network.
/// 4. 30 s later the server is back: the half-open trial reaches it and the circuit closes.
public struct ResilienceScenario: Sendable {
    /// What one step observed.
    public struct Step: Sendable {
        public var title: String
        /// Loads the app made during the step.
        public var loads: Int
        /// Requests sent to the server during the step.
        public var requestsSent: Int
        /// Where the last load's value came from.
        public var servedFrom: String
        /// The circuit's state after the step.
        public var circuit: CircuitState
    }

    public init() {}

    /// Runs the scenario, narrating through `write`; returns what each step observed.
    public func run(write: @escaping @Sendable (String) -> Void) async throws -> [Step] {
        let server = try await DemoServer.start()
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("strata-resilience-demo-\(UUID().uuidString)", isDirectory: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let clock = DemoClock()
        let client = CountingHTTPClient()
        let quiet = Logger(label: "strata.demo", factory: { _ in SwiftLogNoOpLogHandler() })
        let logs = NarratedLog()

        // The composition root: network-first, guarded, with the file cache behind it.
        let store = FileStore<[FeedItem]>(directory: directory, logger: quiet)
        let breaker = CircuitBreaker(
            name: "demo api",
            policy: CircuitBreakerPolicy(failureRatio: 0.5, minimumThroughput: 3, breakDuration: .seconds(30)),
            clock: clock)
        let feed = HTTPLoader(url: server.feedURL, transport: client).decoding([FeedItem].self)
            .timingOut(after: .seconds(2))
            .guarded(by: breaker)
            .writingThrough(in: store, key: "feed")
            .named("remote")
            .fallingBack(to: store.loader(key: "feed").named("cache"))
            .coalesced()
            .logged(to: logs.logger)
            .environment(LoadEnvironment(now: clock.dates, clock: clock, logger: quiet))

        write("Strata demo: resilience (timeout, circuit breaker, coalescing) against a real server")
        write("  server  \(server.feedURL.absoluteString)  (Hummingbird, in this process)")
        write("  clock   simulated: timeouts and breaks pass only when the demo says so")
        write("  the chain, outer → inner:")
        for line in "\(feed)".split(separator: "\n") { write("    \(line)") }

        var steps: [Step] = []
        func record(_ title: String, loads: Int, sentBefore: Int, served: Served<[FeedItem]>) {
            let step = Step(title: title, loads: loads, requestsSent: client.requestCount - sentBefore,
                            servedFrom: served.provenance.tier, circuit: breaker.state)
            steps.append(step)
            write("    → \(loads) load\(loads == 1 ? "" : "s"), \(step.requestsSent) request\(step.requestsSent == 1 ? "" : "s") sent; "
                + "served from \(step.servedFrom); circuit \(step.circuit)")
            for line in logs.drain() where line.level >= .notice { write("      log: \(line.level) \(line.message)") }
        }

        write("")
        write("1. 50 screens ask for the feed at the same moment")
        server.faults = .init(holdRequests: true)
        var sent = client.requestCount
        let results = try await withThrowingTaskGroup(of: Served<[FeedItem]>.self) { group in
            for _ in 0..<50 { group.addTask { try await feed.loadServed() } }
            try await feed.base.base.awaitWaiters(count: 50)
            await server.waitForRequests(count: 1)
            server.faults = .none
            server.releaseHeldRequests()
            return try await group.reduce(into: [Served<[FeedItem]>]()) { $0.append($1) }
        }
        record("coalesced", loads: results.count, sentBefore: sent, served: results[0])

        write("")
        write("2. The server hangs: no answer within the 2 s timeout")
        server.faults = .init(holdRequests: true)
        sent = client.requestCount
        let requestsBefore = server.requests.count
        let hanging = Task { try await feed.loadServed() }
        await server.waitForRequests(count: requestsBefore + 1)
        await clock.untilSomeoneWaits()
        clock.skip(.seconds(2))
        let afterTimeout = try await hanging.value
        server.faults = .none
        server.releaseHeldRequests()
        record("timeout", loads: 1, sentBefore: sent, served: afterTimeout)

        write("")
        write("3. The server goes down: connections are refused (the circuit opens at 50 % of ≥ 3 recent loads failing)")
        await server.goOffline()
        sent = client.requestCount
        var last = afterTimeout
        for _ in 0..<3 { last = try await feed.loadServed() }
        record("failing", loads: 3, sentBefore: sent, served: last)
        write("   once more, with the circuit open:")
        sent = client.requestCount
        record("open", loads: 1, sentBefore: sent, served: try await feed.loadServed())

        write("")
        write("4. 30 s later the server is back")
        try await server.goOnline()
        clock.skip(.seconds(30))
        sent = client.requestCount
        record("recovered", loads: 1, sentBefore: sent, served: try await feed.loadServed())

        await server.stop()
        return steps
    }
}
