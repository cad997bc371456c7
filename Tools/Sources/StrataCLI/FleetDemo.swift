import DemoServer
import Foundation
@_spi(StrataInternals) import Strata
import StrataAsyncHTTPClient

/// `strata demo --scenario fleet`: three `strata proxy` processes (this binary, started again) on
/// one PostgreSQL table, in front of the demo server, narrated step by step: a stampede fetched
/// once for the fleet, a write on one node reaching the others, a node killed while it fetches,
/// and the database going away and coming back (through a TCP relay the demo closes and reopens).
struct FleetDemo {
    let postgresURL: String
    let write: @Sendable (String) -> Void

    func run() async throws {
        guard var components = URLComponents(string: postgresURL), let host = components.host else {
            throw FleetDemoError("the PostgreSQL URL is not a URL: \(postgresURL)")
        }
        let relay = TCPRelay(targetHost: host, targetPort: components.port ?? 5432)
        try await relay.start()
        components.host = "127.0.0.1"
        components.port = relay.port
        guard let relayedURL = components.string else { throw FleetDemoError("the relayed URL") }

        let server = try await DemoServer.start()
        server.faults = DemoServer.Faults(cacheControl: "max-age=60")
        // Three posts on the upstream, written to it directly.
        for title in ["Hello, fleet", "A second post", "A third post"] {
            let request = HTTPRequest(
                method: .post, scheme: "http", authority: "127.0.0.1:\(server.port)", path: "/posts",
                headerFields: [.contentType: "application/json"])
            _ = try await FleetDemoNode.transport.send(
                request, body: Data(#"{"title":"\#(title)","body":"…"}"#.utf8), options: HTTPRequestOptions(timeout: .seconds(10)))
        }
        let table = "demo_fleet_\(UUID().uuidString.prefix(8).lowercased())"
        write("The fleet: three `strata proxy` processes, one PostgreSQL table (\(table)), one upstream.")
        write("  upstream   \(server.baseURL.absoluteString)  (the demo server, Cache-Control: max-age=60)")
        write("  postgres   through a relay on 127.0.0.1:\(relay.port), which this demo can take away")
        var nodes: [FleetDemoNode] = []
        defer { for node in nodes { node.terminate() } }
        for index in 1...3 {
            let node = try await FleetDemoNode.start(
                name: "node-\(index)", upstream: server.baseURL.absoluteString, postgresURL: relayedURL, table: table)
            write("  node-\(index)     http://127.0.0.1:\(node.port)  (pid \(node.pid))")
            nodes.append(node)
        }

        // 1. A stampede.
        write("\n1. A stampede: 90 clients ask the three nodes for /feed at once, with nothing cached.")
        let started = ContinuousClock.now
        let replies = try await withThrowingTaskGroup(of: (String, String).self) { group in
            for index in 0..<90 {
                let node = nodes[index % 3]
                group.addTask { (node.name, try await node.get("/feed").headerFields[.xCacheName] ?? "?") }
            }
            return try await group.reduce(into: [:]) { counts, reply in counts["\(reply.0) \(reply.1)", default: 0] += 1 }
        }
        for line in replies.keys.sorted() { write("   \(line): \(replies[line] ?? 0)") }
        write("   → the upstream was asked \(server.requestCount(path: "/feed")) time(s), in \(Self.format(ContinuousClock.now - started)):")
        write("     one node held the key's lock in PostgreSQL; the others waited for what it stored.")

        // 2. A write on one node reaches the others.
        write("\n2. Every node reads /posts/1 (and keeps it in memory); then a PUT goes through node-1.")
        for node in nodes { _ = try await node.get("/posts/1") }
        let before = try await nodes[1].get("/posts/1")
        write("   node-2 serves it from \(before.headerFields[.xCacheTierName] ?? "?"): \(Self.title(before))")
        let put = try await nodes[0].send(.put, "/posts/1", body: #"{"title":"Edited on node-1","body":"…"}"#)
        let written = ContinuousClock.now
        write("   PUT /posts/1 through node-1: \(put.status.code). node-1 removes the stored copy and PostgreSQL tells the fleet.")
        for node in nodes.dropFirst() {
            try await node.waitForMetric("strata_backplane_copies_dropped_total", atLeast: 1)
            write("   \(node.name) dropped its memory copy \(Self.format(ContinuousClock.now - written)) after the write")
        }
        let after = try await nodes[2].get("/posts/1")
        write("   node-3 now serves: \(Self.title(after)) (X-Cache \(after.headerFields[.xCacheName] ?? "?"))")

        // 3. A node killed while it fetches.
        write("\n3. node-1 fetches /posts/2 and the upstream holds the answer; node-2 asks for it too and waits for node-1's lock.")
        server.faults.holdRequests = true
        let orphan = nodes[0]
        let waiting = Task { try? await orphan.get("/posts/2") }
        await server.waitForRequests(count: server.requests.count + 1)
        let killedAt = ContinuousClock.now
        let survivor = nodes[1]
        let second = Task { try await survivor.get("/posts/2") }
        try await nodes[1].waitForMetric("strata_proxy_lock_waits_total", atLeast: 1)
        orphan.kill()
        write("   node-1 is killed with SIGKILL mid-load. Its PostgreSQL session dies, and its advisory lock with it.")
        server.faults.holdRequests = false
        server.releaseHeldRequests()
        let reply = try await second.value
        _ = await waiting.value
        write("   node-2 took the lock, fetched and answered \(reply.status.code) \(Self.format(ContinuousClock.now - killedAt)) after the kill")
        write("   (its lock timeout is 5 s: it did not wait for it).")
        nodes.removeFirst()

        // 4. The database goes away and comes back.
        _ = try await nodes[0].get("/posts/1")  // node-2 keeps the edited post in memory again
        write("\n4. PostgreSQL goes away: the relay closes every connection and refuses new ones.")
        await relay.stop()
        let memoryHit = try await nodes[0].get("/posts/1")
        write("   node-2, /posts/1: \(memoryHit.status.code) from \(memoryHit.headerFields[.xCacheTierName] ?? "?") (its memory tier)")
        let upstreamRead = try await nodes[1].get("/posts/3")
        write("   node-3, /posts/3 (never cached): \(upstreamRead.status.code) from \(upstreamRead.headerFields[.xCacheTierName] ?? "?");"
            + " its write to PostgreSQL waits: \(try await nodes[1].metric("strata_shared_tier_repairs_queued")) repair(s) queued")
        write("   PostgreSQL comes back.")
        try await relay.start()
        try await nodes[1].waitForMetric("strata_shared_tier_repairs_queued", atMost: 0, timeout: .seconds(90))
        write("   node-3 repaired the shared tier: \(try await nodes[1].metric("strata_shared_tier_repairs_queued")) repair(s) queued now.")
        try await nodes[0].waitForMetric("strata_backplane_listening_starts_total", atLeast: 2, timeout: .seconds(30))
        write("   node-2 listens again; its memory tier was emptied, since it may have missed notifications.")
        let back = try await nodes[0].get("/posts/3")
        write("   node-2, /posts/3: \(back.status.code) from \(back.headerFields[.xCacheTierName] ?? "?") (node-3's repaired row)")
        write("\nUpstream requests in all: \(server.requests.count). Metrics of each node: GET /_strata/metrics on its control port.")
        for node in nodes { node.terminate() }
        nodes.removeAll()
        await relay.stop()
        await server.stop()
    }

    static func title(_ reply: HTTPReply) -> String {
        struct Post: Decodable { var title: String }
        return (try? JSONDecoder().decode(Post.self, from: reply.body).title).map { "\"\($0)\"" } ?? "(\(reply.body.count) bytes)"
    }

    static func format(_ duration: Duration) -> String {
        let milliseconds = Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
        return milliseconds < 1000 ? String(format: "%.1f ms", milliseconds) : String(format: "%.2f s", milliseconds / 1000)
    }
}

struct FleetDemoError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

extension HTTPField.Name {
    static let xCacheName = HTTPField.Name("X-Cache")!
    static let xCacheTierName = HTTPField.Name("X-Cache-Tier")!
}

/// One `strata proxy` process of the demo.
struct FleetDemoNode: Sendable {
    let name: String
    let pid: pid_t
    let port: Int
    /// The port of its controls (`/_strata/metrics`).
    let adminPort: Int
    static let transport = AsyncHTTPTransport()

    static func start(name: String, upstream: String, postgresURL: String, table: String) async throws -> FleetDemoNode {
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
        let arguments = [executable, "proxy", "--upstream", upstream, "--port", "0", "--postgres-url", postgresURL,
                         "--table", table, "--node", name, "--soft-timeout", "0"]
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw FleetDemoError("pipe failed") }
        _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
        posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        // Nothing else of this process reaches the node: not the relay's listening socket, which a
        // node holding it would keep open (and bound) after the relay closed it.
        typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        guard let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np"),
              unsafeBitCast(symbol, to: AddCloseFrom.self)(&actions, 3) == 0 else {
            throw FleetDemoError("this libc has no posix_spawn_file_actions_addclosefrom_np (glibc 2.34+ needed)")
        }
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        close(fds[1])
        guard result == 0 else { throw FleetDemoError("could not start \(name): posix_spawn \(result)") }
        let reader = fds[0]
        let line = await withCheckedContinuation { (continuation: CheckedContinuation<String, Never>) in
            Thread.detachNewThread {
                var bytes = Data()
                var byte: UInt8 = 0
                while read(reader, &byte, 1) == 1, byte != UInt8(ascii: "\n") { bytes.append(byte) }
                close(reader)
                continuation.resume(returning: String(decoding: bytes, as: UTF8.self))
            }
        }
        guard let range = line.range(of: "listening on http://127.0.0.1:"), let port = Int(line[range.upperBound...].prefix(while: { $0.isNumber })),
              let adminRange = line.range(of: "controls on http://127.0.0.1:"),
              let adminPort = Int(line[adminRange.upperBound...].prefix(while: { $0.isNumber })) else {
            Foundation.kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
            throw FleetDemoError("\(name) did not start (is PostgreSQL reachable?)")
        }
        return FleetDemoNode(name: name, pid: pid, port: port, adminPort: adminPort)
    }

    func send(_ method: HTTPRequest.Method, _ path: String, body: String? = nil, port: Int? = nil) async throws -> HTTPReply {
        let request = HTTPRequest(
            method: method, scheme: "http", authority: "127.0.0.1:\(port ?? self.port)", path: path,
            headerFields: body == nil ? [:] : [.contentType: "application/json"])
        return try await Self.transport.send(request, body: body.map { Data($0.utf8) }, options: HTTPRequestOptions(timeout: .seconds(30)))
    }

    func get(_ path: String) async throws -> HTTPReply { try await send(.get, path) }

    func metric(_ name: String) async throws -> Int {
        let text = String(decoding: try await send(.get, "/_strata/metrics", port: adminPort).body, as: UTF8.self)
        let prefix = "\(name){node=\"\(self.name)\"} "
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }),
              let value = Int(line.dropFirst(prefix.count)) else { throw FleetDemoError("\(self.name) has no \(name)") }
        return value
    }

    /// Asks for `name` every 10 ms until it reaches `atLeast` (or falls to `atMost`).
    func waitForMetric(_ name: String, atLeast: Int? = nil, atMost: Int? = nil, timeout: Duration = .seconds(10)) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let value = try await metric(name)
            if let atLeast, value >= atLeast { return }
            if let atMost, value <= atMost { return }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw FleetDemoError("\(self.name): \(name) did not get there within \(timeout)")
    }

    func kill() {
        Foundation.kill(pid, SIGKILL)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
    }

    func terminate() {
        Foundation.kill(pid, SIGTERM)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
    }
}
