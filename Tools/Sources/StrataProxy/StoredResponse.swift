import Foundation
import Strata

/// A response as the proxy keeps it in the cache: status, header fields, body, and what the storing
/// decision worked out (the request fields it varies on, its tags, its age when received, whether it
/// may be served stale). Its freshness lifetime is the entry's ``CacheValidators/maxAge``, a column
/// of the shared store, so that an `expire` invalidation on the server ends it.
struct StoredResponse: Codable, Sendable, Hashable {
    /// The status code.
    var status: Int
    /// The header fields as received, hop-by-hop fields removed: `[name, value]` pairs in order.
    var fields: [[String]]
    /// The body.
    var body: Data
    /// The values the request that fetched it had for the fields the response varies on
    /// (``SharedCachePolicy/varyValues(names:request:)``).
    var varyValues: [String: String?]
    /// The response's purge tags (`Cache-Tag`, `Surrogate-Key`).
    var tags: [String]
    /// Its age when received (RFC 9111 §4.2.3 `corrected_initial_age`), in seconds.
    var initialAgeSeconds: Double
    /// Whether it may be served stale when the upstream fails (no `must-revalidate`,
    /// `proxy-revalidate`, `s-maxage` or `no-cache`).
    var mayServeStale: Bool

    /// The header fields as swift-http-types fields.
    var headerFields: HTTPFields {
        var result = HTTPFields()
        for pair in fields where pair.count == 2 {
            if let name = HTTPField.Name(pair[0]) { result.append(HTTPField(name: name, value: pair[1])) }
        }
        return result
    }

    /// The response head it answers with.
    var response: HTTPResponse {
        HTTPResponse(status: HTTPResponse.Status(code: status), headerFields: headerFields)
    }

    /// The age it was received with, as a duration.
    var initialAge: Duration { .milliseconds(Int64((initialAgeSeconds * 1000).rounded())) }

    static func pairs(_ fields: HTTPFields) -> [[String]] {
        fields.map { [$0.name.rawName, $0.value] }
    }
}

/// The header fields that concern one connection only (RFC 9110 §7.6.1), and those a proxy sets
/// itself: never stored, never forwarded as received.
enum HopByHop {
    static let names: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
        "proxy-authenticate", "proxy-authorization",
    ]

    /// `fields` without hop-by-hop fields (the fixed ones and those `Connection` names), nor
    /// `Content-Length` (the body's length is set again by whoever sends it).
    static func removing(from fields: HTTPFields, also extra: Set<String> = []) -> HTTPFields {
        var named = names.union(extra)
        named.insert("content-length")
        for value in fields[values: .connection] {
            for token in value.split(separator: ",") {
                named.insert(token.trimmingCharacters(in: .whitespaces).lowercased())
            }
        }
        var result = HTTPFields()
        for field in fields where !named.contains(field.name.canonicalName) { result.append(field) }
        return result
    }
}
