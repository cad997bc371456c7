#if Inspector
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Hummingbird
import Testing
@_spi(StrataInternals) import Strata
import StrataInspector
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

    func get(_ url: URL) async throws -> (Int, Data) {
        let (data, response) = try await URLSession.shared.data(from: url)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, data)
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

            let (stateStatus, data) = try await get(base.appendingPathComponent("api/state"))
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
            var request = URLRequest(url: base.appendingPathComponent("api/export"))
            request.httpMethod = "GET"
            let (data, response) = try await URLSession.shared.data(for: request)
            let http = try #require(response as? HTTPURLResponse)
            #expect(http.statusCode == 200)
            #expect(http.value(forHTTPHeaderField: "Content-Disposition")?.contains("attachment") == true)
            #expect(String(decoding: data, as: UTF8.self).contains("\"queries\""))
        }
    }
}
#endif
