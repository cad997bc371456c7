import AsyncHTTPClient
import Foundation
@_spi(StrataInternals) import Strata
import StrataAsyncHTTPClient
import StrataTesting
import Testing

/// RFC semantics of `strata proxy` against the Python origin: ranges with `If-Range`, refusals
/// that belong to one request, RFC 5861's windows, RFC 9213's targeted fields, the clients'
/// forwarding fields, credentials kept for `Vary` only as digests.
@Suite(
    "strata proxy: HTTP semantics", .serialized, .timeLimit(.minutes(2)),
    .enabled(if: SharedCacheTests.postgresURL != nil || ProcessInfo.processInfo.environment["CI"] == "true",
             SharedCacheTests.postgresSkipReason))
struct ProxyHTTPSemanticsTests {
    static func cache(_ reply: HTTPReply) -> String? { reply.headerFields[HTTPField.Name("X-Cache")!] }

    @Test("If-Range travels with Range: after a write, a resumed download gets the whole new version, never a slice of it; a range never removes the stored response")
    func ifRange_travelsWithRange() async throws {
        try await ProxyFleetTests.withFleet(1) { origin, nodes in
            let node = nodes[0]
            let path = "/items/download?cc=max-age%3D600&etag=1&ranges=1"
            let whole = try await node.get(path)
            #expect(whole.status == .ok)
            let slice = try await node.get(path, [.range: "bytes=0-4", HTTPField.Name("If-Range")!: "\"v1\""])
            #expect(slice.status == .partialContent)
            #expect(slice.body.count == 5)
            _ = try await ProxyFleetTests.send(.put, node.url + path, body: Data("{}".utf8))
            let resumed = try await node.get(path, [.range: "bytes=5-", HTTPField.Name("If-Range")!: "\"v1\""])
            #expect(resumed.status == .ok, "v1 is gone: the whole of v2, not its bytes from 5 on")
            #expect(try ProxyFleetTests.item(resumed).version == 2)
            // The stored v2 (stored again by the plain GET) stays through a range request.
            _ = try await node.get(path)
            _ = try await node.get(path, [.range: "bytes=0-1"])
            #expect(Self.cache(try await node.get(path)) == "HIT")
        }
    }

    @Test("a refusal that is one request's own (its Authorization) never removes the stored response")
    func aRequestSpecificRefusal_keepsTheStoredResponse() async throws {
        try await ProxyFleetTests.withFleet(1) { origin, nodes in
            let node = nodes[0]
            let path = "/items/shared-auth?cc=max-age%3D5&age=10&etag=1"   // stale on arrival, with a validator
            _ = try await node.get(path)
            let withCredentials = try await node.get(path, [.authorization: "Bearer alice"])
            #expect(withCredentials.status == .ok)
            let plain = try await node.get(path)
            #expect(Self.cache(plain) == "REVALIDATED", "the stored response is still there to revalidate")
        }
    }

    @Test("stale-while-revalidate: served stale at once within its window while one revalidation runs")
    func staleWhileRevalidate_servesStaleAndRevalidates() async throws {
        try await ProxyFleetTests.withFleet(1) { origin, nodes in
            let node = nodes[0]
            let path = "/items/swr?cc=max-age%3D5%2C%20stale-while-revalidate%3D600&age=10"
            _ = try await node.get(path)
            try await origin.control("/_origin/hold?on=1")
            let stale = try await node.get(path)
            #expect(Self.cache(stale) == "STALE")
            #expect(try await node.metric("strata_proxy_stale_served_total", "reason=\"stale_while_revalidate\"") == 1)
            try await ProxyFleetTests.eventually("one revalidation reaches the origin") { try await origin.count("GET /items/swr") == 2 }
            try await origin.control("/_origin/hold?on=0")
        }
    }

    @Test("CDN-Cache-Control (and a configured targeted field) takes precedence over Cache-Control for the proxy; the client gets the origin's Cache-Control")
    func targetedFields_takePrecedence() async throws {
        try await ProxyFleetTests.withFleet(1, extra: ["--targeted-cache-control", "Strata-Cache-Control"]) { origin, nodes in
            let node = nodes[0]
            // Cache-Control says no-store; the targeted field says store for ten minutes.
            let cdn = "/items/cdn?cc=no-store&cdn=max-age%3D600"
            let first = try await node.get(cdn)
            #expect(first.headerFields[.cacheControl] == "no-store")
            #expect(Self.cache(try await node.get(cdn)) == "HIT")
            #expect(try await origin.count("GET /items/cdn") == 1)
            let configured = "/items/configured?cc=max-age%3D600&strata=no-store"
            _ = try await node.get(configured)
            #expect(Self.cache(try await node.get(configured)) == "MISS", "Strata-Cache-Control: no-store wins over Cache-Control")
        }
    }

    @Test("several Vary variants of one target are kept at once (up to --max-variants; the least recently stored goes), and another node reads each from the table")
    func varyVariants_areKeptSideBySide() async throws {
        try await ProxyFleetTests.withFleet(2, extra: ["--max-variants", "2"]) { origin, nodes in
            let path = "/items/variants?cc=max-age%3D600&vary=Accept-Encoding"
            func get(_ node: ProxyFleetTests.Node, _ encoding: String) async throws -> HTTPReply {
                try await node.get(path, [.acceptEncoding: encoding])
            }
            #expect(Self.cache(try await get(nodes[0], "gzip")) == "MISS")
            #expect(Self.cache(try await get(nodes[0], "br")) == "MISS")
            let gzip = try await get(nodes[0], "gzip")
            #expect(Self.cache(gzip) == "HIT", "br did not replace gzip")
            #expect(try ProxyFleetTests.item(gzip).varied == .some("gzip"))
            #expect(Self.cache(try await get(nodes[0], "br")) == "HIT")
            try await ProxyFleetTests.eventually("the rows are written") {
                try await nodes[0].metric("strata_shared_tier_repairs_queued") == 0
            }
            let shared = try await get(nodes[1], "br")
            #expect(Self.cache(shared) == "HIT")
            #expect(try ProxyFleetTests.item(shared).varied == .some("br"))
            // A third variant: the least recently stored (gzip) goes.
            #expect(Self.cache(try await get(nodes[0], "identity")) == "MISS")
            try await ProxyFleetTests.eventually("node 2 hears that gzip went") {
                Self.cache(try await get(nodes[1], "gzip")) == "MISS"
            }
            #expect(try await origin.count("GET /items/variants") >= 4)
        }
    }

    @Test("a client's X-Forwarded-For and Forwarded never reach the upstream from an untrusted client")
    func forwardingFields_areDropped() async throws {
        try await ProxyFleetTests.withFleet(1) { origin, nodes in
            let node = nodes[0]
            let forged = try await node.get(
                "/items/who?echo=X-Forwarded-For", [HTTPField.Name("X-Forwarded-For")!: "10.0.0.1", HTTPField.Name("Forwarded")!: "for=10.0.0.1"])
            let body = try #require(try JSONSerialization.jsonObject(with: forged.body) as? [String: Any])
            #expect(body["echo"] is NSNull, "\(body)")
        }
    }
}
