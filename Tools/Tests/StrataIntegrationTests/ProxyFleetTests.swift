import AsyncHTTPClient
import Foundation
@_spi(StrataInternals) import Strata
import StrataAsyncHTTPClient
import StrataTesting
import Testing

/// `strata proxy` as a fleet: separate `strata proxy` processes on one PostgreSQL table, in front
/// of an origin this project did not write (Python's `http.server`, `Servers/origin_server.py`).
/// The origin counts what reaches it, so each test checks the proxies' promises at the upstream:
/// one call for a stampede over three nodes, a write on one node reaching the others, invalidation
/// by tag or prefix on every node, the shared-cache rules of RFC 9111, and a node killed mid-load.
@Suite(
    "strata proxy: a fleet of processes on one PostgreSQL",
    .enabled(if: SharedCacheTests.postgresURL != nil || ProcessInfo.processInfo.environment["CI"] == "true",
             SharedCacheTests.postgresSkipReason),
    .serialized, .timeLimit(.minutes(3)))
struct ProxyFleetTests {
    /// The origin server, a separate Python process.
    struct Origin {
        let child: Child
        let port: Int
        let log: URL

        static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Servers/origin_server.py")

        static func start(in directory: TemporaryDirectory, failsafe: Double = 60) async throws -> Origin {
            let python = try ExternalServer.executable("python3", hint: "install Python 3")
            let log = directory.appending("origin-stderr.log")
            let child = try Child.spawn(
                python, ["-u", script.path], pipeStdin: false, pipeStdout: true, stdoutFile: nil, stderrFile: log, failsafe: failsafe)
            let line = try await TwoProcessTests.offPool { child.readLine() }
            guard line.hasPrefix("listening "), let port = Int(line.dropFirst("listening ".count)) else {
                child.signal(SIGKILL)
                _ = try await TwoProcessTests.offPool { child.wait() }
                throw TestError("the origin did not start: '\(line)' \((try? String(contentsOf: log, encoding: .utf8)) ?? "")")
            }
            return Origin(child: child, port: port, log: log)
        }

        var url: String { "http://127.0.0.1:\(port)" }

        /// How many requests reached the origin for `"METHOD /path"`.
        func count(_ request: String) async throws -> Int {
            let reply = try await ProxyFleetTests.send(.get, "\(url)/_origin/counts", via: ProxyFleetTests.control)
            let counts = try JSONDecoder().decode([String: Int].self, from: reply.body)
            return counts[request] ?? 0
        }

        func control(_ path: String) async throws {
            let reply = try await ProxyFleetTests.send(.post, "\(url)\(path)", via: ProxyFleetTests.control)
            guard reply.status == .ok else { throw TestError("origin \(path): \(reply.status)") }
        }

        func stop() async {
            child.signal(SIGTERM)
            _ = try? await TwoProcessTests.offPool { [child] in child.wait() }
        }
    }

    /// One `strata proxy` process.
    struct Node {
        let name: String
        let child: Child
        let port: Int
        /// The port of its controls (`/_strata/…`), on their own listener.
        let adminPort: Int
        let log: URL
        /// The line it printed at start.
        var firstLine = ""

        /// The controls' token every test node is started with.
        static let adminToken = "test-admin-token"

        static func start(
            _ name: String, origin: Origin, table: String, in directory: TemporaryDirectory, extra: [String] = []
        ) async throws -> Node {
            let postgres = try #require(SharedCacheTests.postgresURL, "CI=true but STRATA_POSTGRES_URL is not set")
            let log = directory.appending("\(name)-stderr.log")
            let child = try Child.spawn(
                try TwoProcessTests.executable(),
                ["proxy", "--upstream", origin.url, "--port", "0", "--postgres-url", postgres, "--table", table, "--node", name,
                 "--admin-token", adminToken] + extra,
                pipeStdin: false, pipeStdout: true, stdoutFile: nil, stderrFile: log)
            let line = try await TwoProcessTests.offPool { child.readLine() }
            guard let (port, adminPort) = ports(in: line) else {
                child.signal(SIGKILL)
                _ = try await TwoProcessTests.offPool { child.wait() }
                throw TestError("strata proxy \(name) did not start: '\(line)' \((try? String(contentsOf: log, encoding: .utf8)) ?? "")")
            }
            return Node(name: name, child: child, port: port, adminPort: adminPort, log: log)
        }

        /// The public and control ports in the line `strata proxy` prints at start.
        static func ports(in line: String) -> (Int, Int)? {
            guard let range = line.range(of: "listening on http://127.0.0.1:"),
                  let port = Int(line[range.upperBound...].prefix(while: { $0.isNumber })),
                  let adminRange = line.range(of: "controls on http://127.0.0.1:"),
                  let adminPort = Int(line[adminRange.upperBound...].prefix(while: { $0.isNumber })) else { return nil }
            return (port, adminPort)
        }

        var url: String { "http://127.0.0.1:\(port)" }
        var adminURL: String { "http://127.0.0.1:\(adminPort)" }

        /// A control request, with the token.
        func control(_ method: HTTPRequest.Method, _ path: String) async throws -> HTTPReply {
            try await ProxyFleetTests.send(method, adminURL + path, [.authorization: "Bearer \(Self.adminToken)"], via: ProxyFleetTests.control)
        }

        func get(_ path: String, _ fields: HTTPFields = [:]) async throws -> HTTPReply {
            try await ProxyFleetTests.send(.get, url + path, fields)
        }

        /// The value of one sample of `/_strata/metrics`.
        func metric(_ name: String, _ labels: String = "") async throws -> Int {
            let reply = try await ProxyFleetTests.send(.get, adminURL + "/_strata/metrics", via: ProxyFleetTests.control)
            let text = String(decoding: reply.body, as: UTF8.self)
            let selector = labels.isEmpty ? "\(name){node=\"\(self.name)\"}" : "\(name){node=\"\(self.name)\",\(labels)}"
            for line in text.split(separator: "\n") where line.hasPrefix(selector + " ") {
                return Int(line.split(separator: " ").last ?? "") ?? -1
            }
            throw TestError("no metric \(selector) in:\n\(text)")
        }

        func stop() async {
            child.signal(SIGTERM)
            _ = try? await TwoProcessTests.offPool { [child] in child.wait() }
        }
    }

    /// The clients' transport: up to 256 connections per node, so that a stampede's requests are all
    /// in flight at once.
    static let transport: AsyncHTTPTransport = {
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = 256
        return AsyncHTTPTransport(client: HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration))
    }()

    /// The transport of the test's own questions (metrics, the origin's counts): never queued behind
    /// the clients' requests.
    static let control = AsyncHTTPTransport(
        client: HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: HTTPClient.Configuration()))

    static func send(
        _ method: HTTPRequest.Method, _ url: String, _ fields: HTTPFields = [:], body: Data? = nil, via: AsyncHTTPTransport = transport
    ) async throws -> HTTPReply {
        guard let target = URL(string: url) else { throw TestError("bad URL \(url)") }
        var authority = target.host ?? "127.0.0.1"
        if let port = target.port { authority += ":\(port)" }
        var path = target.path.isEmpty ? "/" : target.path
        if let query = target.query { path += "?" + query }
        let request = HTTPRequest(method: method, scheme: "http", authority: authority, path: path, headerFields: fields)
        return try await via.send(request, body: body, options: HTTPRequestOptions(timeout: .seconds(30)))
    }

    /// A fleet of `count` nodes on a fresh table, in front of a fresh origin; stopped after `body`.
    static func withFleet(
        _ count: Int, extra: [String] = [], _ body: (Origin, [Node]) async throws -> Void
    ) async throws {
        let directory = try TemporaryDirectory(prefix: "strata-proxy")
        defer { directory.remove() }
        let origin = try await Origin.start(in: directory)
        let table = "proxy_\(UUID().uuidString.prefix(8).lowercased())"
        var nodes: [Node] = []
        do {
            for index in 0..<count {
                nodes.append(try await Node.start("n\(index + 1)", origin: origin, table: table, in: directory, extra: extra))
            }
            // A node serves as soon as it prints its URL, and its backplane starts listening a moment
            // later; when it does, the node empties its memory tier (it may have missed changes). A
            // test that filled memory copies before then would see them go: wait for every node.
            for node in nodes {
                try await Self.eventually("\(node.name)'s backplane listens") {
                    try await node.metric("strata_backplane_listening_starts_total") >= 1
                }
            }
            try await body(origin, nodes)
        } catch {
            for node in nodes {
                Issue.record("\(node.name) stderr: \((try? String(contentsOf: node.log, encoding: .utf8)) ?? "")")
            }
            for node in nodes { await node.stop() }
            await origin.stop()
            throw error
        }
        for node in nodes { await node.stop() }
        await origin.stop()
    }

    /// Polls `condition` every 20 ms until it holds, for at most `seconds`: for what another process
    /// does in its own time (a notification arriving), never for a fixed delay.
    static func eventually(_ what: String, seconds: Double = 10, _ condition: () async throws -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            if try await condition() { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw TestError("not within \(seconds) s: \(what)")
    }

    struct Item: Decodable, Equatable {
        var name: String
        var version: Int
        var call: Int
        var auth: String?
        var varied: String??
    }

    static func item(_ reply: HTTPReply) throws -> Item {
        try JSONDecoder().decode(Item.self, from: reply.body)
    }

    // MARK: A remote called once per fleet

    @Test("150 concurrent misses of one key over three nodes: one upstream call, every client answered with it")
    func aStampedeOverThreeNodes_callsTheUpstreamOnce() async throws {
        try await Self.withFleet(3, extra: ["--lock-timeout", "20s"]) { origin, nodes in
            // The origin holds its answer until every node has a request waiting: one node's fetch
            // holds the key's lock, the other two wait for it.
            try await origin.control("/_origin/hold?on=1")
            let path = "/items/cold?cc=max-age%3D600"
            let replies = Task {
                try await withThrowingTaskGroup(of: HTTPReply.self) { group in
                    for index in 0..<150 {
                        let node = nodes[index % nodes.count]
                        group.addTask { try await node.get(path) }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
            }
            try await Self.eventually("one node fetches, two wait for its lock") {
                var waits = 0
                for node in nodes { waits += try await node.metric("strata_proxy_lock_waits_total") }
                return try await origin.count("GET /items/cold") == 1 && waits == 2
            }
            try await origin.control("/_origin/hold?on=0")
            let answered = try await replies.value
            #expect(answered.count == 150 && answered.allSatisfy { $0.status == .ok })
            #expect(Set(try answered.map { try Self.item($0).call }) == [1], "every answer is the one upstream call's")
            #expect(try await origin.count("GET /items/cold") == 1)
            #expect(answered.filter { $0.headerFields[HTTPField.Name("X-Cache")!] == "MISS" }.count == 1)
        }
    }

    @Test("a node killed while it fetches a key: its lock dies with it, and another node's client is answered within the lock timeout plus one load")
    func aNodeKilledMidLoad_releasesItsLock() async throws {
        try await Self.withFleet(2, extra: ["--lock-timeout", "20s"]) { origin, nodes in
            try await origin.control("/_origin/hold?on=1")
            let path = "/items/held?cc=max-age%3D600"
            let first = Task { try? await nodes[0].get(path) }
            try await Self.eventually("n1 fetches") { try await origin.count("GET /items/held") == 1 }
            let started = ContinuousClock.now
            let second = Task { try await nodes[1].get(path) }
            try await Self.eventually("n2 waits for the lock") { try await nodes[1].metric("strata_proxy_lock_waits_total") == 1 }
            nodes[0].child.signal(SIGKILL)
            _ = try await TwoProcessTests.offPool { [child = nodes[0].child] in child.wait() }
            try await origin.control("/_origin/hold?on=0")
            let reply = try await second.value
            let elapsed = ContinuousClock.now - started
            _ = await first.value
            #expect(reply.status == .ok)
            #expect(try Self.item(reply).call == 2, "n2 loaded it itself, once n1's lock was gone")
            #expect(elapsed < .seconds(20), "well within the 20 s lock timeout: the lock died with its holder")
            #expect(try await nodes[1].metric("strata_proxy_lock_wait_timeouts_total") == 0)
        }
    }

    // MARK: Coherence

    @Test("a PUT through node 1 reaches nodes 2 and 3: their memory copies go, and their next read is the new version")
    func aWriteOnOneNode_reachesTheOthers() async throws {
        try await Self.withFleet(3) { origin, nodes in
            let path = "/items/shared?cc=max-age%3D600"
            for node in nodes { _ = try await node.get(path) }
            for node in nodes.dropFirst() {
                // Each node keeps a memory copy once its read of the shared tier was not overtaken
                // by the first node's notice of the same write (a read it overlapped keeps nothing).
                try await Self.eventually("\(node.name) keeps a memory copy") {
                    let again = try await node.get(path)
                    let version = try Self.item(again).version
                    return again.headerFields[HTTPField.Name("X-Cache-Tier")!] == "memory" && version == 1
                }
            }
            let put = try await Self.send(.put, nodes[0].url + path, [.contentType: "application/json"], body: Data("{}".utf8))
            #expect(put.status == .ok)
            for node in nodes.dropFirst() {
                try await Self.eventually("\(node.name) hears the write") {
                    try await node.metric("strata_backplane_copies_dropped_total") >= 1
                }
                let after = try await node.get(path)
                #expect(try Self.item(after).version == 2, "\(node.name) serves the new version")
            }
            #expect(try await origin.count("GET /items/shared") == 2, "once before the write, once after, for the whole fleet")
        }
    }

    // MARK: Tags and clearing

    @Test("invalidate by tag on node 1: expire keeps a stale copy every node revalidates; remove deletes; clear empties the table")
    func invalidation_actsOnTheWholeFleet() async throws {
        try await Self.withFleet(2) { origin, nodes in
            let tagged = "/items/t1?cc=max-age%3D600&etag=1&tag=team-a,all"
            let other = "/items/t2?cc=max-age%3D600&etag=1&tag=team-b,all"
            for node in nodes {
                _ = try await node.get(tagged)
                _ = try await node.get(other)
            }
            #expect(try await origin.count("GET /items/t1") == 1)

            let expire = try await nodes[0].control(.post, "/_strata/invalidate?tag=team-a&mode=expire")
            #expect(expire.status == .ok)
            #expect(String(decoding: expire.body, as: UTF8.self).contains(#""invalidated":1"#))
            try await Self.eventually("n2 hears it") { try await nodes[1].metric("strata_backplane_invalidations_received_total") == 1 }
            let revalidated = try await nodes[1].get(tagged)
            #expect(revalidated.headerFields[HTTPField.Name("X-Cache")!] == "REVALIDATED", "expired, not removed: a conditional request")
            #expect(try await origin.count("GET /items/t1") == 2)
            #expect(try await nodes[1].get(other).headerFields[HTTPField.Name("X-Cache")!] == "HIT", "another tag is untouched")

            let remove = try await nodes[1].control(.post, "/_strata/invalidate?prefix=/items/t2&mode=remove")
            #expect(remove.status == .ok)
            try await Self.eventually("n1 hears it") { try await nodes[0].metric("strata_backplane_invalidations_received_total") == 1 }
            #expect(try await nodes[0].get(other).headerFields[HTTPField.Name("X-Cache")!] == "MISS")

            let clear = try await nodes[0].control(.post, "/_strata/clear?mode=remove")
            #expect(String(decoding: clear.body, as: UTF8.self).contains(#""invalidated":2"#))
            try await Self.eventually("n2 hears the clear") { try await nodes[1].metric("strata_backplane_invalidations_received_total") == 2 }
            #expect(try await nodes[1].get(tagged).headerFields[HTTPField.Name("X-Cache")!] == "MISS")
        }
    }

    // MARK: A shared cache in RFC 9111's sense

    @Test("private, no-store and Set-Cookie answers are never stored (a public one is, without its cookie); one user's answer never reaches another")
    func privateAnswers_areNeverShared() async throws {
        try await Self.withFleet(1) { origin, nodes in
            let node = nodes[0]
            for (path, name) in [("/items/p1?cc=private%2C%20max-age%3D600", "p1"), ("/items/p2?cc=no-store", "p2"),
                                 ("/items/p3?cc=max-age%3D600&cookie=1", "p3")] {
                _ = try await node.get(path)
                _ = try await node.get(path)
                #expect(try await origin.count("GET /items/\(name)") == 2, "\(name) is fetched every time")
            }
            // With Authorization, a max-age answer is not stored: each user gets their own.
            let path = "/items/me?cc=max-age%3D600"
            let alice = try await node.get(path, [.authorization: "Bearer alice"])
            let bob = try await node.get(path, [.authorization: "Bearer bob"])
            #expect(try Self.item(alice).auth == "Bearer alice")
            #expect(try Self.item(bob).auth == "Bearer bob")
            // Unless the answer says it may be shared.
            let shared = "/items/pub?cc=public%2C%20max-age%3D600"
            _ = try await node.get(shared, [.authorization: "Bearer alice"])
            let again = try await node.get(shared, [.authorization: "Bearer bob"])
            #expect(again.headerFields[HTTPField.Name("X-Cache")!] == "HIT")
            #expect(try await origin.count("GET /items/pub") == 1)
            // A public answer with a cookie is stored without it: only the client that fetched it
            // gets the cookie.
            let cookie = "/items/cookie?cc=public%2C%20max-age%3D600&cookie=1"
            let fetched = try await node.get(cookie)
            let served = try await node.get(cookie)
            #expect(fetched.headerFields[.setCookie] == "s=1")
            #expect(served.headerFields[HTTPField.Name("X-Cache")!] == "HIT")
            #expect(served.headerFields[.setCookie] == nil)
        }
    }

    @Test("s-maxage beats max-age; Age counts the origin's age; Vary keeps variants apart; a client's conditional GET is answered 304 from the cache")
    func sharedCacheRules() async throws {
        try await Self.withFleet(1) { origin, nodes in
            let node = nodes[0]
            let shared = "/items/s?cc=max-age%3D0%2C%20s-maxage%3D600&age=30"
            _ = try await node.get(shared)
            let hit = try await node.get(shared)
            #expect(hit.headerFields[HTTPField.Name("X-Cache")!] == "HIT")
            #expect(Int(hit.headerFields[.age] ?? "") ?? 0 >= 30, "Age includes the 30 s the origin said")

            let varied = "/items/v?cc=max-age%3D600&vary=Accept-Language"
            let french = try await node.get(varied, [.acceptLanguage: "fr"])
            let english = try await node.get(varied, [.acceptLanguage: "en"])
            #expect(try Self.item(french).varied == .some("fr"))
            #expect(try Self.item(english).varied == .some("en"), "not the French answer")
            #expect(try await origin.count("GET /items/v") == 2)

            let tagged = "/items/e?cc=max-age%3D600&etag=1"
            let first = try await node.get(tagged)
            let etag = try #require(first.headerFields[.eTag])
            let notModified = try await node.get(tagged, [.ifNoneMatch: etag])
            #expect(notModified.status == .notModified)
            #expect(notModified.body.isEmpty)
            #expect(try await origin.count("GET /items/e") == 1)
        }
    }

    @Test("a stale answer is served when the origin fails, unless it says must-revalidate; a PUT removes the stored answer")
    func staleOnError_andInvalidationByUnsafeMethods() async throws {
        try await Self.withFleet(1) { origin, nodes in
            let node = nodes[0]
            // Already past its 5 s lifetime when it arrives (Age: 10).
            let stale = "/items/old?cc=max-age%3D5&age=10"
            let strict = "/items/strict?cc=max-age%3D5%2C%20must-revalidate&age=10"
            _ = try await node.get(stale)
            _ = try await node.get(strict)
            try await origin.control("/_origin/fail?on=1")
            let served = try await node.get(stale)
            #expect(served.status == .ok)
            #expect(served.headerFields[HTTPField.Name("X-Cache")!] == "STALE")
            #expect(served.headerFields[HTTPField.Name("X-Cache-Tier")!] == "memory", "the node's own copy")
            #expect(try await node.metric("strata_proxy_stale_served_total", "reason=\"upstream_error\"") == 1)
            #expect(try await node.get(strict).status == .serviceUnavailable, "must-revalidate: the origin's error")
            try await origin.control("/_origin/fail?on=0")

            let path = "/items/w?cc=max-age%3D600"
            _ = try await node.get(path)
            #expect(try await node.get(path).headerFields[HTTPField.Name("X-Cache")!] == "HIT")
            let deleted = try await Self.send(.delete, node.url + path)
            #expect(deleted.status == .ok)
            #expect(try await node.get(path).headerFields[HTTPField.Name("X-Cache")!] == "MISS")
        }
    }

    // MARK: The latency features, in the proxy

    @Test("a stale response whose revalidation is slower than the soft timeout is served stale at once; the revalidation goes on and stores")
    func softTimeout_servesStale_andTheRevalidationGoesOn() async throws {
        try await Self.withFleet(1, extra: ["--soft-timeout", "200ms"]) { origin, nodes in
            let node = nodes[0]
            let path = "/items/slow?cc=max-age%3D5&age=10"   // stale as soon as it is stored
            #expect(try Self.item(try await node.get(path)).call == 1)
            try await origin.control("/_origin/hold?on=1")
            let early = try await node.get(path)
            #expect(early.headerFields[HTTPField.Name("X-Cache")!] == "STALE")
            #expect(early.headerFields[HTTPField.Name("X-Cache-Tier")!] == "memory", "the node's own copy")
            #expect(try Self.item(early).call == 1)
            #expect(try await node.metric("strata_proxy_stale_served_total", "reason=\"soft_timeout\"") == 1)
            try await Self.eventually("the revalidation reaches the origin") { try await origin.count("GET /items/slow") == 2 }
            try await origin.control("/_origin/hold?on=0")
            try await Self.eventually("the background revalidation stores the new answer") {
                try await node.metric("strata_proxy_stored_total") == 2
            }
        }
    }

    @Test("a hit past 80 % of its lifetime answers at once and starts one background revalidation")
    func refreshAhead_inTheProxy() async throws {
        try await Self.withFleet(1) { origin, nodes in
            let node = nodes[0]
            let path = "/items/late?cc=max-age%3D100&age=90"   // 90 % of its life gone on arrival
            _ = try await node.get(path)
            let hit = try await node.get(path)
            #expect(hit.headerFields[HTTPField.Name("X-Cache")!] == "HIT")
            #expect(try Self.item(hit).call == 1, "answered at once from the cache")
            try await Self.eventually("one background revalidation") { try await origin.count("GET /items/late") == 2 }
            #expect(try await node.metric("strata_proxy_refresh_ahead_total") == 1)
        }
    }

    // MARK: The demo

    @Test("strata demo --scenario fleet narrates the stampede, the write, the killed node and the database coming back")
    func theFleetDemo() async throws {
        let postgres = try #require(SharedCacheTests.postgresURL)
        let (status, stdout, stderr) = try await TwoProcessTests.run(["demo", "--scenario", "fleet", "--postgres-url", postgres])
        let text = String(decoding: stdout, as: UTF8.self)
        #expect(status == 0, "\(text)\n\(stderr)")
        #expect(text.contains("→ the upstream was asked 1 time(s)"))
        #expect(text.contains("node-3 now serves: \"Edited on node-1\""))
        #expect(text.contains("node-2 took the lock, fetched and answered 200"))
        #expect(text.contains("node-2, /posts/1: 200 from memory"))
        #expect(text.contains("node-3 repaired the shared tier: 0 repair(s) queued now."))
        #expect(text.contains("node-2, /posts/3: 200 from shared"))
    }
}

/// What `strata proxy` refuses before it starts.
@Suite("strata proxy: arguments", .timeLimit(.minutes(1)))
struct ProxyArgumentTests {
    @Test("an --admin-host other than loopback needs --admin-token: the controls would otherwise answer anyone who reaches the port")
    func aReachableAdminHost_needsAnAdminToken() async throws {
        let (status, _, stderr) = try await TwoProcessTests.run(
            ["proxy", "--upstream", "http://127.0.0.1:9", "--admin-host", "0.0.0.0", "--postgres-url", "postgres://u@127.0.0.1:1/db"])
        #expect(status != 0)
        #expect(stderr.contains("--admin-token"), "\(stderr)")
    }

    @Test("an upstream that is not an http(s) URL is refused, naming the option")
    func aBadUpstream_isRefused() async throws {
        let (status, _, stderr) = try await TwoProcessTests.run(["proxy", "--upstream", "ftp://example.test"])
        #expect(status != 0)
        #expect(stderr.contains("--upstream"), "\(stderr)")
    }
}
