import Foundation
import NIOCore
import NIOHTTP1
import Strata

/// A response as the proxy keeps it in the cache: status, header fields, body, and what the storing
/// decision worked out (the request fields it varies on, its tags, its age when received, whether it
/// may be served stale). Its freshness lifetime is the entry's ``CacheValidators/maxAge``, a column
/// of the shared store, so that an `expire` invalidation on the server ends it.
struct StoredResponse: Codable, Sendable, Hashable {
    /// The status code.
    var status: Int {
        didSet { encodedHead = Self.encodedHead(status: status, fields: headerFields) }
    }
    /// The header fields as received, hop-by-hop fields removed. Kept as swift-http-types fields,
    /// so a hit copies them instead of parsing names again; stored as `[name, value]` pairs.
    var headerFields: HTTPFields {
        didSet { encodedHead = Self.encodedHead(status: status, fields: headerFields) }
    }
    /// The status line and ``headerFields`` as HTTP/1.1 writes them (RFC 9112 §4, §5), without the
    /// fields a hit sets itself (``fieldsAHitSets``): a hit on the fast path copies these bytes
    /// instead of encoding the head again. Derived from the two above, kept in step by their
    /// `didSet`, never stored in a tier.
    private(set) var encodedHead: ByteBuffer
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
    /// RFC 5861 windows past its lifetime, in seconds: served while revalidating in the background
    /// (`stale-while-revalidate`), served when the upstream fails (`stale-if-error`).
    var staleWhileRevalidateSeconds: Double?
    var staleIfErrorSeconds: Double?
    /// For a target whose responses vary (`Vary`): this entry is not a response but the target's
    /// index of variants. The names are the fields they vary on; each variant is stored under
    /// ``CachingProxy/variantKey(_:values:)`` of the target's key and a request's values.
    var variantNames: [String]?
    /// The variants' digests, most recently stored first (at most the proxy's variant limit).
    var variantDigests: [String] = []

    /// The index of a target's variants.
    static func variantIndex(names: [String], digests: [String]) -> StoredResponse {
        var index = StoredResponse(
            status: 0, headerFields: [:], body: Data(), varyValues: [:], tags: [], initialAgeSeconds: 0, mayServeStale: false)
        index.variantNames = names
        index.variantDigests = digests
        return index
    }

    init(
        status: Int, headerFields: HTTPFields, body: Data, varyValues: [String: String?], tags: [String],
        initialAgeSeconds: Double, mayServeStale: Bool, staleWhileRevalidate: Duration? = nil, staleIfError: Duration? = nil
    ) {
        self.staleWhileRevalidateSeconds = staleWhileRevalidate.map { $0 / .seconds(1) }
        self.staleIfErrorSeconds = staleIfError.map { $0 / .seconds(1) }
        self.status = status
        self.headerFields = headerFields
        self.encodedHead = Self.encodedHead(status: status, fields: headerFields)
        self.body = body
        self.varyValues = varyValues
        self.tags = tags
        self.initialAgeSeconds = initialAgeSeconds
        self.mayServeStale = mayServeStale
    }

    enum CodingKeys: String, CodingKey {
        case status, fields, body, varyValues, tags, initialAgeSeconds, mayServeStale, staleWhileRevalidate, staleIfError
        case variantNames, variantDigests
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        status = try container.decode(Int.self, forKey: .status)
        var fields = HTTPFields()
        for pair in try container.decode([[String]].self, forKey: .fields) where pair.count == 2 {
            // A name that is no longer valid is dropped rather than failing the whole entry.
            if let name = HTTPField.Name(pair[0]) { fields.append(HTTPField(name: name, value: pair[1])) }
        }
        headerFields = fields
        encodedHead = Self.encodedHead(status: status, fields: fields)
        body = try container.decode(Data.self, forKey: .body)
        varyValues = try container.decode([String: String?].self, forKey: .varyValues)
        tags = try container.decode([String].self, forKey: .tags)
        initialAgeSeconds = try container.decode(Double.self, forKey: .initialAgeSeconds)
        mayServeStale = try container.decode(Bool.self, forKey: .mayServeStale)
        staleWhileRevalidateSeconds = try container.decodeIfPresent(Double.self, forKey: .staleWhileRevalidate)
        staleIfErrorSeconds = try container.decodeIfPresent(Double.self, forKey: .staleIfError)
        variantNames = try container.decodeIfPresent([String].self, forKey: .variantNames)
        variantDigests = try container.decodeIfPresent([String].self, forKey: .variantDigests) ?? []
        // Three digits (RFC 9110 §15), or the 0 of a variant index: anything else is a damaged
        // entry, a miss (swift-http-types traps on a code past 999; a head must not say `HTTP/1.1 0`).
        guard variantNames != nil ? status == 0 : (100...999).contains(status) else {
            throw DecodingError.dataCorruptedError(forKey: .status, in: container, debugDescription: "status \(status) is not three digits")
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(status, forKey: .status)
        try container.encode(headerFields.map { [$0.name.rawName, $0.value] }, forKey: .fields)
        try container.encode(body, forKey: .body)
        try container.encode(varyValues, forKey: .varyValues)
        try container.encode(tags, forKey: .tags)
        try container.encode(initialAgeSeconds, forKey: .initialAgeSeconds)
        try container.encode(mayServeStale, forKey: .mayServeStale)
        try container.encodeIfPresent(staleWhileRevalidateSeconds, forKey: .staleWhileRevalidate)
        try container.encodeIfPresent(staleIfErrorSeconds, forKey: .staleIfError)
        try container.encodeIfPresent(variantNames, forKey: .variantNames)
        if !variantDigests.isEmpty { try container.encode(variantDigests, forKey: .variantDigests) }
    }

    /// The response head it answers with.
    var response: HTTPResponse {
        HTTPResponse(status: HTTPResponse.Status(code: status), headerFields: headerFields)
    }

    /// What it costs the memory tier's byte budget: its body, its header fields and their encoded
    /// copy.
    var byteCount: Int {
        body.count + headerFields.reduce(0) { $0 + $1.name.rawName.utf8.count + $1.value.utf8.count + 4 }
            + encodedHead.readableBytes + 64
    }

    /// The fields a hit on the fast path writes itself, after ``encodedHead``; a stored field of
    /// one of these names is left out of it (as `replaceOrAdd` would replace it).
    static let fieldsAHitSets: Set<String> = ["age", "x-cache", "x-cache-tier", "x-strata-node", "content-length"]

    /// `HTTP/1.1 <code> <reason>` and `name: value` for each field but those named in `leavingOut`
    /// (lowercased), each line ending in CRLF; no
    /// blank line (a hit adds its own fields first). Field values come validated from
    /// swift-http-types (no CR, LF or NUL), so the bytes are a well-formed head.
    static func encodedHead(status: Int, fields: HTTPFields, leavingOut: Set<String> = fieldsAHitSets) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeStaticString("HTTP/1.1 ")
        buffer.writeString(String(status))
        buffer.writeStaticString(" ")
        if (100...999).contains(status) { buffer.writeString(HTTPResponseStatus(statusCode: status).reasonPhrase) }
        buffer.writeStaticString("\r\n")
        for field in fields where !leavingOut.contains(field.name.canonicalName) {
            buffer.writeString(field.name.rawName)
            buffer.writeStaticString(": ")
            buffer.writeString(field.value)
            buffer.writeStaticString("\r\n")
        }
        return buffer
    }

    /// The age it was received with, as a duration.
    var initialAge: Duration { .milliseconds(Int64((initialAgeSeconds * 1000).rounded())) }
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
