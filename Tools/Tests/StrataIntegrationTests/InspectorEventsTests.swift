import DemoServer
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import StrataDemo
import StrataInspector
import StrataTesting
import Testing
@_spi(StrataInternals) import Strata

/// The inspector's JSON and event API without a browser, mounted in the web demo: S4's chain per
/// page over the demo server, an outbox in real files, a circuit breaker. Every wait is on an event.
@Suite("The inspector's state and events, on the web demo", .timeLimit(.minutes(1)), .serialized)
struct InspectorEventsTests {
    static func state(_ base: URL, token: String) async throws -> InspectorState {
        var request = URLRequest(url: base.appendingPathComponent("inspector/api/state"))
        request.setValue(token, forHTTPHeaderField: "X-Strata-Token")
        let (data, _) = try await URLSession.shared.data(for: request)
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return try decoder.decode(InspectorState.self, from: data)
    }

    /// The next event of `events`, read off the cooperative pool.
    static func next(_ events: EventStreamReader) async throws -> EventStreamReader.Event {
        try await TwoProcessTests.offPool { try events.next() }
    }

    @Test("a change event at once and after each load; the state then shows the load, its reason and the tier that served it")
    func changeEvents_followTheLoads() async throws {
        try await FeedWebDemoTests.withWebDemo { demo, base in
            try await demo.feed.settled()
            let port = try #require(base.port)
            let events = try await TwoProcessTests.offPool { try EventStreamReader(port: port, path: "/inspector/api/events?token=\(demo.inspector.token)") }
            #expect(events.head.first == "HTTP/1.1 200 OK")
            #expect(try await Self.next(events).name == "change", "one at once, so the page reads the state")

            #expect(try await FeedWebDemoTests.post(base.appendingPathComponent("inspector/api/queries/refetch").appending(queryItems: [URLQueryItem(name: "key", value: "feed")]), token: demo.inspector.token) == 204)
            #expect(try await Self.next(events).name == "change")
            try await demo.feed.settled()
            // The change events went on until the load ended: the state says how it ended.
            let state = try await Self.state(base, token: demo.inspector.token)
            let load = try #require(state.loads.last)
            #expect(load.key == "feed" && load.reason == "refetch" && load.outcome == .value && load.tier == "remote",
                    "a refetch goes past S4's fresh local copy to the server")
            #expect(demo.server.requestCount(path: "/posts/pages/1") == 2)
            let feed = try #require(state.queries.first { $0.key == "feed" })
            #expect(feed.chain.contains(#"named "stale local""#))
            #expect(feed.tier == "remote")
        }
    }

    @Test("an offline post is an outbox entry with its method and URL, no body; the events follow the outbox too")
    func anOfflinePost_isShownAsAnOutboxEntry() async throws {
        try await FeedWebDemoTests.withWebDemo { demo, base in
            try await demo.feed.settled()
            await demo.goOffline()
            let port = try #require(base.port)
            let events = try await TwoProcessTests.offPool { try EventStreamReader(port: port, path: "/inspector/api/events?token=\(demo.inspector.token)") }
            _ = try await Self.next(events)
            try await demo.post(title: "Queued while offline", body: "the draft's own words")
            #expect(try await Self.next(events).name == "change")

            let state = try await Self.state(base, token: demo.inspector.token)
            #expect(!state.online)
            let outbox = try #require(state.outboxes.first)
            #expect(outbox.name == "posts" && outbox.pending == 1 && outbox.parked == 0)
            let entry = try #require(outbox.entries.first)
            #expect(entry.request == "POST \(demo.server.baseURL.absoluteString)/posts")
            #expect(entry.state == "pending" && entry.scope == "/posts")
            // The outbox shows what the write is, never its body; the feed shows the post pending.
            let outboxes = String(decoding: try JSONEncoder().encode(state.outboxes), as: UTF8.self)
            #expect(!outboxes.contains("the draft's own words"))
            let feed = try #require(state.queries.first)
            #expect(feed.pendingWrites == 1)
            #expect(feed.valueJSON?.contains("the draft's own words") == true)
        }
    }
}
