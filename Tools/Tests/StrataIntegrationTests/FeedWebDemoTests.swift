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

/// `strata demo --web` without a browser: its JSON API and its event stream over real HTTP, the
/// feed loaded through S4's chain from the in-process demo server into real files, posts through
/// an outbox in real files. Every wait is on an event the demo sends; the clock is simulated.
@Suite("The web demo's API and events", .timeLimit(.minutes(1)), .serialized)
struct FeedWebDemoTests {
    /// Runs `body` with a started demo served on a free port of 127.0.0.1; stops it after.
    static func withWebDemo(_ body: (FeedWebDemo, URL) async throws -> Void) async throws {
        let demo = try await FeedWebDemo.start()
        do {
            try await demo.serving { port in try await body(demo, URL(string: "http://127.0.0.1:\(port)")!) }
        } catch {
            await demo.stop()
            throw error
        }
        await demo.stop()
    }

    static func post(_ url: URL, token: String?, json: String? = nil) async throws -> Int {
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        if let token { request.setValue(token, forHTTPHeaderField: "X-Strata-Token") }
        if let json {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = Data(json.utf8)
        }
        let (_, response) = try await URLSession.shared.data(for: request)
        return (response as? HTTPURLResponse)?.statusCode ?? 0
    }

    /// Reads `events` until a view satisfies `predicate` (each read gives up after 10 s).
    static func firstView(
        _ what: String, in events: EventStreamReader, where predicate: @escaping @Sendable (FeedView) -> Bool
    ) async throws -> FeedView {
        try await TwoProcessTests.offPool {
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .iso8601
            var seen: [String] = []
            while true {
                let event: EventStreamReader.Event
                do {
                    event = try events.next()
                } catch {
                    throw TestError("waited for \(what): \(error); events seen: \(seen)")
                }
                guard event.name == "feed" else { continue }
                let view = try decoder.decode(FeedView.self, from: Data(event.data.utf8))
                if predicate(view) { return view }
                seen.append("\(view.state) \(view.phase) \(view.source ?? "-") \(view.items.count) items, \(view.pendingPosts) pending")
            }
        }
    }

    @Test("every control needs the session's token: 403 without it or with another, and nothing changes")
    func controlsWithoutTheToken_areRefused() async throws {
        try await Self.withWebDemo { demo, base in
            try await demo.feed.settled()
            let before = (now: demo.now, reason: demo.feed.current.lastFetchReason)
            let controls = [
                "api/network?online=false", "api/clock?advance=86400", "api/next-page", "api/previous-page", "api/refresh", "api/posts",
                "api/write-fault?status=422",
            ]
            for control in controls {
                let target = try #require(URL(string: base.absoluteString + "/" + control))
                #expect(try await Self.post(target, token: nil, json: #"{"title":"x"}"#) == 403, "\(control) without a token")
                #expect(try await Self.post(target, token: "not-the-token", json: #"{"title":"x"}"#) == 403, "\(control) with another token")
            }
            #expect(demo.server.isOnline)
            #expect(demo.queries.isOnline)
            #expect(try await demo.outbox.entries().isEmpty)
            #expect(demo.now == before.now, "the clock did not move")
            // A refresh or a next page would have set the query fetching at once.
            #expect(demo.feed.current.phase == .idle)
            #expect(demo.feed.current.lastFetchReason == before.reason)
            #expect(demo.feed.current.value?.pages.count == 1)
            #expect(demo.server.requestCount(path: "/posts/pages/1") == 1, "no refresh ran")
            #expect(demo.server.faults.writeFault == nil, "the server still accepts posts")
            #expect(demo.posting.current.status == .idle, "no post was started")
            #expect(demo.server.posts.count == 12, "the sample posts only")
            // With the token, bad input is a 400, not a change.
            #expect(try await Self.post(URL(string: base.absoluteString + "/api/write-fault?status=500")!, token: demo.inspector.token) == 400)
            #expect(demo.server.faults.writeFault == nil)
            // A post far larger than a title: refused before it is decoded into anything, and nothing is posted.
            let huge = #"{"title":""# + String(repeating: "x", count: 4 << 20) + #""}"#
            let hugeStatus = try await Self.post(base.appendingPathComponent("api/posts"), token: demo.inspector.token, json: huge)
            #expect(hugeStatus == 400 || hugeStatus == 413, "a 4 MB title: \(hugeStatus)")
            #expect(demo.posting.current.status == .idle)
            #expect(try await Self.post(URL(string: base.absoluteString + "/api/clock?advance=soon")!, token: demo.inspector.token) == 400)
            #expect(try await Self.post(base.appendingPathComponent("api/posts"), token: demo.inspector.token, json: #"{"title":"   "}"#) == 400)
            #expect(try await demo.outbox.entries().isEmpty)
        }
    }

    @Test("the event stream sends the view at once and after every change: offline, a day later, a pending post, online again")
    func theEventStream_followsTheScenario() async throws {
        try await Self.withWebDemo { demo, base in
            let port = try #require(base.port)
            let events = try await TwoProcessTests.offPool { try EventStreamReader(port: port, path: "/api/events?token=\(demo.inspector.token)") }
            #expect(events.head.first == "HTTP/1.1 200 OK")
            #expect(events.head.contains { $0.lowercased() == "content-type: text/event-stream" })

            let loaded = try await Self.firstView("the first page", in: events) { $0.items.count == 5 }
            #expect(loaded.items.map(\.title) == (8...12).reversed().map { "Sample post \($0)" })
            #expect(loaded.source == "remote")
            #expect(loaded.state == "fresh")
            #expect(loaded.hasNextPage)

            let token = demo.inspector.token
            #expect(try await Self.post(URL(string: base.absoluteString + "/api/network?online=false")!, token: token) == 204)
            let offline = try await Self.firstView("offline", in: events) { !$0.networkOnline }
            #expect(!offline.serverOnline)

            #expect(try await Self.post(URL(string: base.absoluteString + "/api/clock?advance=86400")!, token: token) == 204)
            let dayLater = try await Self.firstView("a stale feed", in: events) { $0.isStale }
            #expect(dayLater.age == "1d 0h")
            #expect(dayLater.state == "stale")

            #expect(try await Self.post(base.appendingPathComponent("api/refresh"), token: token) == 204)
            let fromCache = try await Self.firstView("the cached copy", in: events) { $0.source == "stale local" && $0.state != "refreshing" }
            #expect(fromCache.items.count == 5, "the cached page, while the server refuses connections")
            #expect(fromCache.isStale)

            #expect(try await Self.post(base.appendingPathComponent("api/posts"), token: token, json: #"{"title":"Written offline"}"#) == 202)
            let pending = try await Self.firstView("the pending post", in: events) { $0.pendingPosts == 1 }
            let first = try #require(pending.items.first)
            #expect(first.id == nil && first.title == "Written offline" && first.pending)
            #expect(pending.outboxPending == 1)

            #expect(try await Self.post(URL(string: base.absoluteString + "/api/network?online=true")!, token: token) == 204)
            let delivered = try await Self.firstView("the delivered post", in: events) { $0.pendingPosts == 0 && $0.items.first?.id == 13 && $0.state == "fresh" }
            #expect(delivered.items.first?.title == "Written offline")
            #expect(delivered.source == "remote")
            #expect(delivered.outboxPending == 0)
            #expect(demo.server.posts.values.filter { $0.title == "Written offline" }.count == 1, "created once")
        }
    }

    /// `GET url` with `token` in `X-Strata-Token` and `host` as the `Host`, if given.
    static func get(_ url: URL, token: String? = nil, host: String? = nil) async throws -> (response: HTTPURLResponse, body: String) {
        var request = URLRequest(url: url)
        if let token { request.setValue(token, forHTTPHeaderField: "X-Strata-Token") }
        if let host { request.setValue(host, forHTTPHeaderField: "Host") }
        let (data, response) = try await URLSession.shared.data(for: request)
        return (try #require(response as? HTTPURLResponse), String(decoding: data, as: UTF8.self))
    }

    @Test("the feed and its events need the token as the inspector's data do: 403 without it, 200 with it")
    func theDataRoutes_needTheToken() async throws {
        try await Self.withWebDemo { demo, base in
            let feed = base.appendingPathComponent("api/feed")
            #expect(try await Self.get(feed).response.statusCode == 403)
            #expect(try await Self.get(feed, token: "not-the-token").response.statusCode == 403)
            let (answer, body) = try await Self.get(feed, token: demo.inspector.token)
            #expect(answer.statusCode == 200)
            #expect(body.contains("\"items\""))
            let port = try #require(base.port)
            for path in ["/api/events", "/api/events?token=not-the-token", "/inspector/api/events"] {
                let events = try await TwoProcessTests.offPool { try EventStreamReader(port: port, path: path) }
                #expect(events.head.first == "HTTP/1.1 403 Forbidden", "\(path)")
            }
            #expect(try await Self.get(base.appendingPathComponent("inspector/api/state")).response.statusCode == 403)
        }
    }

    @Test("the page runs only its own script and style (a nonce per response), cannot be framed, and carries the token for its own requests")
    func thePage_hasAStrictContentSecurityPolicy() async throws {
        try await Self.withWebDemo { demo, base in
            var nonces: Set<String> = []
            for _ in 0..<2 {
                let (response, html) = try await Self.get(base)
                #expect(response.statusCode == 200)
                let csp = try #require(response.value(forHTTPHeaderField: "Content-Security-Policy"))
                #expect(csp.contains("frame-ancestors 'none'"))
                #expect(!csp.contains("unsafe-inline"))
                #expect(response.value(forHTTPHeaderField: "X-Frame-Options") == "DENY")
                #expect(response.value(forHTTPHeaderField: "X-Content-Type-Options") == "nosniff")
                #expect(response.value(forHTTPHeaderField: "Referrer-Policy") == "no-referrer")
                let nonce = String(try #require(csp.firstMatch(of: /script-src 'nonce-([^']+)'/)).output.1)
                #expect(csp.contains("style-src 'nonce-\(nonce)'"))
                #expect(html.contains("<script nonce=\"\(nonce)\">") && html.contains("<style nonce=\"\(nonce)\">"))
                #expect(html.matches(of: /<script/).count == 1 && html.matches(of: /<style/).count == 1)
                #expect(html.firstMatch(of: /<[^>]*\son[a-z]+\s*=/) == nil, "no inline event handler")
                #expect(html.firstMatch(of: /<[^>]*\sstyle\s*=/) == nil, "no style attribute")
                #expect(html.contains(#"<meta name="strata-token" content="\#(demo.inspector.token)">"#))
                nonces.insert(nonce)
            }
            #expect(nonces.count == 2, "a new nonce for each response")
        }
    }

    @Test(
        "served on every interface, the demo refuses a peer that is not loopback, even with Host: localhost and the token",
        .enabled(if: RawSocket.nonLoopbackAddress() != nil, "this machine has no IPv4 address besides loopback"))
    func aPeerThatIsNotLoopback_isRefused() async throws {
        let other = try #require(RawSocket.nonLoopbackAddress())
        let demo = try await FeedWebDemo.start()
        do {
            try await demo.serving(host: "0.0.0.0") { port in
                let remote = try #require(URL(string: "http://\(other):\(port)"))
                for path in ["", "api/feed", "inspector", "inspector/api/state"] {
                    let url = path.isEmpty ? remote : remote.appendingPathComponent(path)
                    let (response, body) = try await Self.get(url, token: demo.inspector.token, host: "localhost:\(port)")
                    #expect(response.statusCode == 403, "/\(path) from \(other)")
                    #expect(!body.contains(demo.inspector.token))
                }
                let control = try #require(URL(string: "http://\(other):\(port)/api/network?online=false"))
                var request = URLRequest(url: control)
                request.httpMethod = "POST"
                request.setValue(demo.inspector.token, forHTTPHeaderField: "X-Strata-Token")
                request.setValue("localhost:\(port)", forHTTPHeaderField: "Host")
                #expect((try await URLSession.shared.data(for: request).1 as? HTTPURLResponse)?.statusCode == 403)
                #expect(demo.queries.isOnline)
                #expect(try await Self.get(try #require(URL(string: "http://127.0.0.1:\(port)"))).response.statusCode == 200)
            }
        } catch {
            await demo.stop()
            throw error
        }
        await demo.stop()
    }
}
