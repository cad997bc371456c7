#if Inspector
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif
import Hummingbird
import NIOCore
import Testing
@_spi(StrataInternals) import Strata
import StrataQueries
@testable import StrataInspector
import StrataTesting

/// The inspector's page and JSON API over real HTTP: a Hummingbird application on 127.0.0.1 serving
/// a real client's queries, an outbox in memory and a circuit breaker; requests through URLSession.
@Suite("StrataInspector: page, JSON API, token", .timeLimit(.minutes(1)))
struct InspectorTests {
    struct Account: Codable, Equatable, Sendable {
        var name: String
        var password: String
    }

    /// Runs `body` with `inspector` served on a free port of 127.0.0.1, given its base URL.
    func withInspector(_ inspector: StrataInspector, _ body: (URL) async throws -> Void) async throws {
        try await inspector.serving { port in try await body(URL(string: "http://127.0.0.1:\(port)/inspector")!) }
    }

    func get(_ url: URL, token: String? = nil) async throws -> (Int, Data) {
        let (response, data) = try await getResponse(url, token: token)
        return (response.statusCode, data)
    }

    func getResponse(_ url: URL, token: String? = nil, host: String? = nil) async throws -> (response: HTTPURLResponse, data: Data) {
        var request = URLRequest(url: url)
        if let token { request.setValue(token, forHTTPHeaderField: "X-Strata-Token") }
        if let host { request.setValue(host, forHTTPHeaderField: "Host") }
        let (data, response) = try await URLSession.shared.data(for: request)
        return (try #require(response as? HTTPURLResponse), data)
    }

    func post(_ url: URL, token: String?) async throws -> Int {
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        if let token { request.setValue(token, forHTTPHeaderField: "X-Strata-Token") }
        let (_, response) = try await URLSession.shared.data(for: request)
        return (response as? HTTPURLResponse)?.statusCode ?? 0
    }

    @Test("the state shows each query, its chain and its value with secrets redacted; actions need the token")
    func stateAndActions() async throws {
        let remote = LoaderSpy<Void, Account>(.success(Account(name: "ada", password: "hunter2")))
        let queries = QueryClient()
        let account = queries.query(["account"], chain: remote.named("api https://api.example.com/me?token=abc123"))
        let observing = Task { for await _ in account.snapshots() {} }
        defer { observing.cancel() }
        try await account.waitForObservers(1)
        try await account.settled()
        let breaker = CircuitBreaker(name: "api")
        let inspector = StrataInspector(queries: queries, circuits: [breaker])

        try await withInspector(inspector) { base in
            let (status, page) = try await get(base)
            #expect(status == 200)
            let html = String(decoding: page, as: UTF8.self)
            #expect(html.contains("<title>Strata inspector</title>"))
            #expect(html.contains(inspector.token), "the page carries the session's token for its own requests")

            let (stateStatus, data) = try await get(base.appendingPathComponent("api/state"), token: inspector.token)
            #expect(stateStatus == 200)
            let text = String(decoding: data, as: UTF8.self)
            #expect(!text.contains("hunter2"), "a member named like a secret is redacted")
            #expect(!text.contains("abc123"), "a secret in a URL is redacted")
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .iso8601
            let state = try decoder.decode(InspectorState.self, from: data)
            let shown = try #require(state.queries.first)
            #expect(shown.key == "account")
            #expect(shown.state == .stale, "observed and idle; stale at once (staleAfter 0)")
            #expect(shown.observers == 1)
            #expect(shown.valueJSON?.contains("\"password\" : \"***\"") == true)
            #expect(state.circuits.map(\.name) == ["api"])
            #expect(state.circuits.first?.state == "closed")

            let refetch = base.appendingPathComponent("api/queries/refetch").appending(queryItems: [URLQueryItem(name: "key", value: "account")])
            #expect(try await post(refetch, token: nil) == 403)
            #expect(try await post(refetch, token: "not the token") == 403)
            // A refetch would have made the query fetch at once (the machine decides synchronously).
            #expect(account.current.phase == .idle, "a refused action does nothing")
            #expect(remote.loadCount == 1)
            #expect(try await post(refetch, token: inspector.token) == 204)
            try await account.settled()
            #expect(remote.loadCount == 2)

            #expect(try await post(base.appendingPathComponent("api/network").appending(queryItems: [URLQueryItem(name: "online", value: "false")]), token: inspector.token) == 204)
            #expect(!queries.isOnline)
            let unknown = base.appendingPathComponent("api/queries/refetch").appending(queryItems: [URLQueryItem(name: "key", value: "nope")])
            #expect(try await post(unknown, token: inspector.token) == 404)

            // Removing a query a screen still observes would orphan it: refused.
            let remove = base.appendingPathComponent("api/queries/remove").appending(queryItems: [URLQueryItem(name: "key", value: "account")])
            #expect(try await post(remove, token: inspector.token) == 409)
            #expect(queries.query(described: "account") != nil)
        }
    }

    @Test("a request addressed to another host name (DNS rebinding) is refused, the page and its token included")
    func anotherHostName_isRefused() async throws {
        let inspector = StrataInspector(queries: QueryClient())
        try await withInspector(inspector) { base in
            for path in ["", "api/state", "api/export", "api/events"] {
                var request = URLRequest(url: path.isEmpty ? base : base.appendingPathComponent(path))
                request.setValue("attacker.example:\(base.port ?? 0)", forHTTPHeaderField: "Host")
                let (data, response) = try await URLSession.shared.data(for: request)
                #expect((response as? HTTPURLResponse)?.statusCode == 403, "GET /\(path)")
                #expect(!String(decoding: data, as: UTF8.self).contains(inspector.token))
            }
            var action = URLRequest(url: base.appendingPathComponent("api/network").appending(queryItems: [URLQueryItem(name: "online", value: "false")]))
            action.httpMethod = "POST"
            action.setValue(inspector.token, forHTTPHeaderField: "X-Strata-Token")
            action.setValue("attacker.example", forHTTPHeaderField: "Host")
            #expect(((try await URLSession.shared.data(for: action)).1 as? HTTPURLResponse)?.statusCode == 403, "even with the token")
            #expect(inspector.queries.isOnline)
            // Addressed by a loopback name, the page is served.
            var local = URLRequest(url: base)
            local.setValue("localhost:\(base.port ?? 0)", forHTTPHeaderField: "Host")
            #expect(((try await URLSession.shared.data(for: local)).1 as? HTTPURLResponse)?.statusCode == 200)
        }
    }

    @Test("the export is the state as a download")
    func export() async throws {
        let queries = QueryClient()
        let inspector = StrataInspector(queries: queries)
        try await withInspector(inspector) { base in
            let (http, data) = try await getResponse(base.appendingPathComponent("api/export"), token: inspector.token)
            #expect(http.statusCode == 200)
            #expect(http.value(forHTTPHeaderField: "Content-Disposition")?.contains("attachment") == true)
            #expect(String(decoding: data, as: UTF8.self).contains("\"queries\""))
        }
    }

    // MARK: Who can reach it

    @Test("every data route needs the token: 403 without it or with another, 200 with it (the events also in their URL)")
    func dataRoutes_needTheToken() async throws {
        let inspector = StrataInspector(queries: QueryClient())
        try await withInspector(inspector) { base in
            for path in ["api/state", "api/export"] {
                let url = base.appendingPathComponent(path)
                #expect(try await get(url).0 == 403, "\(path) without the token")
                #expect(try await get(url, token: "not the token").0 == 403, "\(path) with another token")
                #expect(try await get(url, token: String(inspector.token.dropLast())).0 == 403, "\(path) with a prefix of the token")
                let (status, data) = try await get(url, token: inspector.token)
                #expect(status == 200, "\(path) with the token")
                #expect(String(decoding: data, as: UTF8.self).contains("\"queries\""))
                // Only the event stream takes the token in its URL.
                let inURL = url.appending(queryItems: [URLQueryItem(name: "token", value: inspector.token)])
                #expect(try await get(inURL).0 == 403, "\(path) with the token in its URL")
            }
            let port = try #require(base.port)
            #expect(try await Self.openEvents(port: port, path: "/inspector/api/events").status == 403)
            #expect(try await Self.openEvents(port: port, path: "/inspector/api/events?token=nope").status == 403)
            #expect(try await Self.openEvents(port: port, path: "/inspector/api/events", header: "X-Strata-Token: nope").status == 403)
            let inQuery = try await Self.openEvents(port: port, path: "/inspector/api/events?token=\(inspector.token)")
            #expect(inQuery.status == 200)
            #expect(inQuery.firstEvent == "event: change")
            let inHeader = try await Self.openEvents(port: port, path: "/inspector/api/events", header: "X-Strata-Token: \(inspector.token)")
            #expect(inHeader.status == 200)
            #expect(inHeader.firstEvent == "event: change")
        }
    }

    @Test("the peer policy is consulted over HTTP: allowing no peer, even loopback with the right host and token gets 403")
    func noAllowedPeer_isRefused() async throws {
        let inspector = StrataInspector(queries: QueryClient(), allowedPeers: .none)
        try await withInspector(inspector) { base in
            let (page, html) = try await getResponse(base, host: "localhost:\(base.port ?? 0)")
            #expect(page.statusCode == 403)
            #expect(!String(decoding: html, as: UTF8.self).contains(inspector.token))
            for path in ["api/state", "api/export"] {
                #expect(try await get(base.appendingPathComponent(path), token: inspector.token).0 == 403, "GET /\(path)")
            }
            #expect(try await Self.openEvents(port: try #require(base.port), path: "/inspector/api/events?token=\(inspector.token)").status == 403)
            let offline = base.appendingPathComponent("api/network").appending(queryItems: [URLQueryItem(name: "online", value: "false")])
            #expect(try await post(offline, token: inspector.token) == 403)
            #expect(inspector.queries.isOnline)
        }
    }

    @Test(
        "a forged Host: localhost from a peer that is not loopback gets 403; the same server answers loopback",
        .enabled(if: InspectorTests.nonLoopbackAddress != nil, "this machine has no IPv4 address but loopback"))
    func forgedHostFromAnotherPeer_isRefused() async throws {
        let address = try #require(Self.nonLoopbackAddress)
        let inspector = StrataInspector(queries: QueryClient())
        // Listening on every interface, as an app's public server would.
        try await inspector.serving(host: "0.0.0.0") { port in
            let remote = try #require(URL(string: "http://\(address):\(port)/inspector"))
            for path in ["", "api/state", "api/export"] {
                let (response, data) = try await getResponse(
                    path.isEmpty ? remote : remote.appendingPathComponent(path), token: inspector.token, host: "localhost:\(port)")
                #expect(response.statusCode == 403, "GET /\(path) from \(address)")
                #expect(!String(decoding: data, as: UTF8.self).contains(inspector.token))
            }
            let local = try #require(URL(string: "http://127.0.0.1:\(port)/inspector"))
            #expect(try await get(local).0 == 200)
            #expect(try await get(local.appendingPathComponent("api/state"), token: inspector.token).0 == 200)
        }
    }

    @Test("mounted with a request context that cannot tell the peer, it refuses unless the app allows any peer")
    func aContextWithoutThePeer_isRefusedUnlessAllowed() async throws {
        for (peers, expected) in [(StrataInspector.AllowedPeers.loopback, 403), (.any, 200)] {
            let inspector = StrataInspector(queries: QueryClient(), allowedPeers: peers)
            try await StrataInspector.serving(
                serverName: "basic", context: BasicRequestContext.self, routes: { inspector.addRoutes(to: $0) }
            ) { port in
                let base = try #require(URL(string: "http://127.0.0.1:\(port)/inspector"))
                #expect(try await get(base).0 == expected)
                #expect(try await get(base.appendingPathComponent("api/state"), token: inspector.token).0 == expected)
            }
        }
    }

    @Test("loopback is 127.0.0.0/8, ::1 and ::ffff:127.x; nothing else, and an unknown peer, is")
    func loopbackPeers() throws {
        func peer(_ ip: String) throws -> SocketAddress { try SocketAddress(ipAddress: ip, port: 4321) }
        for ip in ["127.0.0.1", "127.255.254.3", "::1", "::ffff:127.0.0.1", "::ffff:127.9.8.7"] {
            #expect(StrataInspector.AllowedPeers.isLoopback(try peer(ip)), "\(ip)")
            #expect(StrataInspector.AllowedPeers.loopback.allows(try peer(ip)), "\(ip)")
        }
        for ip in ["128.0.0.1", "126.255.255.255", "10.0.0.1", "192.0.2.2", "0.0.0.0", "::", "::2", "::127.0.0.1", "fe80::1", "::ffff:10.0.0.1", "::ffff:128.0.0.1", "2001:db8::1"] {
            #expect(!StrataInspector.AllowedPeers.isLoopback(try peer(ip)), "\(ip)")
            #expect(!StrataInspector.AllowedPeers.loopback.allows(try peer(ip)), "\(ip)")
        }
        #expect(!StrataInspector.AllowedPeers.isLoopback(try SocketAddress(unixDomainSocketPath: "/tmp/strata.sock")))
        #expect(!StrataInspector.AllowedPeers.loopback.allows(nil), "an unknown peer is refused")
        #expect(StrataInspector.AllowedPeers.any.allows(nil))
        #expect(!StrataInspector.AllowedPeers.none.allows(try peer("127.0.0.1")))
        let privateNetwork = StrataInspector.AllowedPeers.only { $0.ipAddress?.hasPrefix("10.") == true }
        #expect(privateNetwork.allows(try peer("10.1.2.3")))
        #expect(!privateNetwork.allows(try peer("127.0.0.1")))
        #expect(!privateNetwork.allows(nil))
    }

    @Test("tokens compare equal exactly when they are the same bytes; an empty token matches nothing")
    func tokenComparison() {
        let token = "0123456789abcdef"
        #expect(StrataInspector.tokensMatch(token, token))
        #expect(StrataInspector.tokensMatch(String(token), "0123456789abcdef"))
        #expect(!StrataInspector.tokensMatch(nil, token))
        #expect(!StrataInspector.tokensMatch("", token))
        #expect(!StrataInspector.tokensMatch("0123456789abcdeF", token), "the last byte differs")
        #expect(!StrataInspector.tokensMatch("1123456789abcdef", token), "the first byte differs")
        #expect(!StrataInspector.tokensMatch("0123456789abcde", token), "a prefix")
        #expect(!StrataInspector.tokensMatch(token + "0", token), "longer")
        #expect(!StrataInspector.tokensMatch(token + token, token), "twice")
        #expect(!StrataInspector.tokensMatch("", ""), "an empty token matches nothing")
        #expect(!StrataInspector.tokensMatch(nil, ""))
        // A byte that XORs to zero against the padding must not make a shorter string match.
        #expect(!StrataInspector.tokensMatch("a", "a\u{0}"))
        #expect(!StrataInspector.tokensMatch("a\u{0}", "a"))
        #expect(StrataInspector.tokensMatch("é≠", "é≠"))
        #expect(!StrataInspector.tokensMatch("e\u{301}", "é"), "bytes, not characters: the page sends what it was given")
    }

    // MARK: The page

    @Test("the page's policy runs only its own nonce'd script and style, a new nonce each time, and no page frames it")
    func thePagesContentSecurityPolicy() async throws {
        let inspector = StrataInspector(queries: QueryClient())
        try await withInspector(inspector) { base in
            var nonces: [String] = []
            for _ in 0..<2 {
                let (response, data) = try await getResponse(base)
                #expect(response.statusCode == 200)
                let csp = try #require(response.value(forHTTPHeaderField: "Content-Security-Policy"))
                #expect(csp.contains("frame-ancestors 'none'"))
                #expect(csp.contains("default-src 'none'"))
                #expect(!csp.contains("unsafe-inline"))
                #expect(!csp.contains("unsafe-eval"))
                #expect(response.value(forHTTPHeaderField: "X-Frame-Options") == "DENY")
                #expect(response.value(forHTTPHeaderField: "X-Content-Type-Options") == "nosniff")
                #expect(response.value(forHTTPHeaderField: "Referrer-Policy") == "no-referrer")
                let script = try #require(csp.firstMatch(of: /script-src 'nonce-([A-Za-z0-9+\/=_-]+)'/)).output.1
                let style = try #require(csp.firstMatch(of: /style-src 'nonce-([A-Za-z0-9+\/=_-]+)'/)).output.1
                #expect(script == style)
                let nonce = String(script)
                #expect(nonce.count >= 22, "at least 128 bits")
                let html = String(decoding: data, as: UTF8.self)
                #expect(html.matches(of: /<script/).count == 1)
                #expect(html.matches(of: /<style/).count == 1)
                #expect(html.contains("<script nonce=\"\(nonce)\">"))
                #expect(html.contains("<style nonce=\"\(nonce)\">"))
                #expect(!html.contains("{{NONCE}}"))
                // What the policy would refuse to run: inline handlers and style attributes.
                #expect(html.firstMatch(of: /<[^>]*\son[a-z]+\s*=/) == nil, "no inline event handler")
                #expect(html.firstMatch(of: /<[^>]*\sstyle\s*=/) == nil, "no style attribute")
                #expect(html.firstMatch(of: /style\s*:\s*"/) == nil, "no style attribute set by the script")
                nonces.append(nonce)
            }
            #expect(nonces[0] != nonces[1], "a new nonce for each response")
            // The API's answers are not to be sniffed or cached either.
            let (state, _) = try await getResponse(base.appendingPathComponent("api/state"), token: inspector.token)
            #expect(state.value(forHTTPHeaderField: "X-Content-Type-Options") == "nosniff")
            #expect(state.value(forHTTPHeaderField: "Cache-Control") == "no-store")
        }
    }

    @Test("a token of the caller's own is escaped in the page, and still authorizes")
    func aCallersToken_isEscaped() async throws {
        let token = #""</script><script>alert(1)</script>'&"#
        let inspector = StrataInspector(queries: QueryClient(), token: token)
        try await withInspector(inspector) { base in
            let (status, data) = try await get(base)
            #expect(status == 200)
            let html = String(decoding: data, as: UTF8.self)
            #expect(!html.contains(token))
            #expect(!html.contains("alert(1)</script>"))
            #expect(html.contains(#"<meta name="strata-token" content="&quot;&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;&#39;&amp;">"#))
            #expect(html.matches(of: /<script/).count == 1, "no script but the page's own")
            #expect(try await get(base.appendingPathComponent("api/state"), token: token).0 == 200)
            #expect(try await get(base.appendingPathComponent("api/state"), token: "&quot;").0 == 403)
        }
    }

    // MARK: Helpers

    /// The first IPv4 address of this machine that is not a loopback one, if it has one.
    static let nonLoopbackAddress: String? = {
        let devices = (try? System.enumerateDevices()) ?? []
        return devices.lazy.compactMap(\.address).first { address in
            if case .v4 = address { return !StrataInspector.AllowedPeers.isLoopback(address) }
            return false
        }?.ipAddress
    }()

    /// `GET path` on 127.0.0.1:`port` over a plain socket (URLSession hands a body over only once it
    /// has ended, and an event stream does not end): the status line, and for a `200` the first
    /// line of the first event. Blocking, so on a thread of its own; each read gives up after 10 s.
    static func openEvents(port: Int, path: String, header: String? = nil) async throws -> (status: Int, firstEvent: String?) {
        let request = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nAccept: text/event-stream\r\n\(header.map { $0 + "\r\n" } ?? "")\r\n"
        let text = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<String, any Error>) in
            Thread.detachNewThread {
                continuation.resume(with: Result { try readUntilFirstEvent(port: port, request: request) })
            }
        }
        let lines = text.components(separatedBy: "\r\n").flatMap { $0.components(separatedBy: "\n") }
        let status = lines.first.flatMap { Int($0.split(separator: " ").dropFirst().first ?? "") } ?? 0
        return (status, status == 200 ? lines.first { $0.hasPrefix("event:") } : nil)
    }

    /// What `request` to 127.0.0.1:`port` reads until the head has ended and, for a `200`, an event
    /// has begun.
    private static func readUntilFirstEvent(port: Int, request: String) throws -> String {
        #if canImport(Glibc)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #else
        let fd = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw TestError("socket failed: errno \(errno)") }
        defer { close(fd) }
        var limit = timeval(tv_sec: 10, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw TestError("could not connect to 127.0.0.1:\(port): errno \(errno)") }
        let bytes = Array(request.utf8)
        guard bytes.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, 0) }) == bytes.count else {
            throw TestError("send failed: errno \(errno)")
        }
        var received: [UInt8] = []
        while true {
            let text = String(decoding: received, as: UTF8.self)
            if let end = text.range(of: "\r\n\r\n") {
                if !text.hasPrefix("HTTP/1.1 200") || text[end.upperBound...].contains("event:") { return text }
            }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let count = recv(fd, &chunk, chunk.count, 0)
            guard count > 0 else { throw TestError("the server closed or sent nothing in time; received: \(text)") }
            received += chunk[..<count]
        }
    }
}
#endif
