import Foundation
import HTTPTypes
@_spi(StrataInternals) import Strata

/// An HTTP write as an ``Outbox`` stores it: method, URL, header fields and body.
///
/// Credentials are not stored: `Authorization`, `Proxy-Authorization` and `Cookie` are removed when
/// the request is queued, and ``Outbox/registerHTTP(transport:options:idempotencyKeyHeader:conflicts:authorize:refreshAuthorization:)``'s
/// `authorize` adds them at each attempt, so a token refreshed meanwhile is the one sent.
public struct OutboxRequest: Sendable, Hashable, Codable {
    /// The method, as sent (`POST`, `PUT`, `PATCH`, `DELETE`).
    public var method: String
    /// The absolute URL.
    public var url: URL
    /// The header fields, names as sent, in order.
    public var headerFields: [[String]]
    /// The body, if any.
    public var body: Data?

    /// The fields never written to the outbox's storage.
    static let credentialFields: Set<HTTPField.Name> = [.authorization, .proxyAuthorization, .cookie]

    /// `request` and `body` as stored: without credentials.
    public init(_ request: HTTPRequest, body: Data?) throws {
        guard let url = request.url else {
            throw HTTPError.invalidRequest(url: request.reportedURL, reason: "an outbox write needs an absolute URL")
        }
        self.method = request.method.rawValue
        self.url = url
        self.headerFields = request.headerFields
            .filter { !Self.credentialFields.contains($0.name) }
            .map { [$0.name.rawName, $0.value] }
        self.body = body
    }

    /// The swift-http-types request.
    public var request: HTTPRequest {
        get throws {
            guard let method = HTTPRequest.Method(method) else {
                throw HTTPError.invalidRequest(url: url, reason: "'\(method)' is not an HTTP method")
            }
            var fields = HTTPFields()
            for pair in headerFields where pair.count == 2 {
                guard let name = HTTPField.Name(pair[0]) else { continue }
                fields.append(HTTPField(name: name, value: pair[1]))
            }
            return HTTPRequest(method: method, url: url, headerFields: fields)
        }
    }
}

extension Outbox {
    /// The kind of HTTP writes (`enqueue(_:body:scope:baseVersion:id:invalidates:)`).
    public static let httpKind = "http"

    /// `Idempotency-Key`: the header HTTP writes carry their key in, unless `registerHTTP` is told another.
    public static let idempotencyKeyField = HTTPField.Name("Idempotency-Key")!

    /// Registers the handler for HTTP writes (kind `httpKind`): sends the stored request through
    /// `transport` with `Idempotency-Key: <entry id>` (the same on every attempt; a key the request
    /// was queued with is kept instead) and, when the write
    /// has a base version, `If-Match`. A 2xx delivers it; other statuses are classified as
    /// ``Outbox`` describes (the status and the first 64 KiB of the body are kept in a dead letter,
    /// secrets masked).
    ///
    /// The status decides before the size of the body: every attempt asks the transport for
    /// `HTTPRequestOptions/OversizedBody/truncate`, so a body over the limit is cut there (the
    /// transfer ends) and the answer still counts. A 2xx with a large body was applied by the server:
    /// the write is delivered. A 401, 409 or 412 with a large body reaches `refreshAuthorization` or
    /// the conflict policy as `HTTPError/status(code:url:headerFields:body:)` with the body cut at
    /// the limit (empty when a `Content-Length` over it decided). A transport of your own that ignores
    /// the option and throws `HTTPError/bodyTooLarge(url:limit:received:contentLength:)` gives the
    /// outbox no status: the write is parked.
    /// - Parameters:
    ///   - transport: what sends the requests (wrap it with `reportingReachability(to:)`
    ///     so that any successful request to a host starts the writes waiting for it).
    ///   - options: the request options of every attempt (timeout, largest body read; its
    ///     `HTTPRequestOptions/oversizedBody` is always `HTTPRequestOptions/OversizedBody/truncate`).
    ///   - idempotencyKeyHeader: the header that carries the key.
    ///   - conflicts: what a 409 or 412 does.
    ///   - authorize: adds credentials to each attempt's request (they are never stored).
    ///   - refreshAuthorization: runs after a 401, before the write is sent once more.
    public func registerHTTP(
        transport: any HTTPTransport = DefaultHTTPTransport.shared,
        options: HTTPRequestOptions = HTTPRequestOptions(),
        idempotencyKeyHeader: HTTPField.Name = Outbox.idempotencyKeyField,
        conflicts: OutboxConflictPolicy = .manual,
        authorize: (@Sendable (inout HTTPRequest) async throws -> Void)? = nil,
        refreshAuthorization: (@Sendable () async throws -> Void)? = nil
    ) {
        var options = options
        options.oversizedBody = .truncate
        register(Self.httpKind, conflicts: conflicts, refreshAuthorization: refreshAuthorization) { [options] delivery in
            let stored: OutboxRequest
            var request: HTTPRequest
            do {
                stored = try JSONDecoder().decode(OutboxRequest.self, from: delivery.entry.payload)
                request = try stored.request
            } catch {
                throw UnreadablePayload(detail: "not an HTTP request: \(error)")
            }
            // A key the request was queued with (one an earlier, direct attempt already sent) is kept:
            // replacing it would let the server apply the write a second time. Once the request was
            // changed after a refusal, that key gets the same revision suffix as the entry's own.
            if let carried = request.headerFields[idempotencyKeyHeader] {
                if delivery.entry.keyRevision > 0 {
                    request.headerFields[idempotencyKeyHeader] = "\(carried)-r\(delivery.entry.keyRevision)"
                }
            } else {
                request.headerFields[idempotencyKeyHeader] = delivery.idempotencyKey
            }
            request.headerFields[.ifMatch] = delivery.precondition
            if let authorize { try await authorize(&request) }
            let reply = try await transport.send(request, body: stored.body, options: options)
            // The status decides, whatever the size of the body (a 2xx was applied by the server);
            // another status throws `HTTPError.status` with the body as it came, cut or not.
            try checkReply(reply, to: request, url: stored.url, options: HTTPRequestOptions())
            return .delivered
        }
    }

    /// Queues an HTTP write: saved when this returns, sent (by the handler `registerHTTP(transport:options:idempotencyKeyHeader:conflicts:authorize:refreshAuthorization:)`
    /// registers) when the server can be reached.
    /// - Parameters:
    ///   - request: the write, with an absolute URL; credentials in it are not stored.
    ///   - body: its body, if any.
    ///   - scope: writes of one scope go out one at a time, in order; by default the URL's path
    ///     (`/posts`), so writes to one resource keep their order.
    ///   - baseVersion: the `ETag` the write was made against, sent as `If-Match`. An `If-Match` the
    ///     request already carries is taken as the base version when this is `nil`, so the conflict
    ///     policy applies to it too.
    ///   - id: the entry's id, which makes this call idempotent (see
    ///     `enqueue(kind:scope:payload:host:baseVersion:id:invalidates:)`). When `nil` and the request carries
    ///     an `Idempotency-Key` that is a UUID, that UUID is the id: queueing the same request again
    ///     after an error answers with the same entry.
    ///   - invalidates: the live query tags and key prefixes its delivery invalidates
    ///     (``OutboxEntry/invalidates``).
    @discardableResult
    public func enqueue(
        _ request: HTTPRequest, body: Data?, scope: String? = nil, baseVersion: String? = nil, id: UUID? = nil,
        invalidates: [String] = []
    ) async throws -> OutboxEntry {
        var request = request
        let id = id ?? request.headerFields[Self.idempotencyKeyField].flatMap(UUID.init(uuidString:))
        let baseVersion = baseVersion ?? request.headerFields[.ifMatch]
        request.headerFields[.ifMatch] = nil
        let stored = try OutboxRequest(request, body: body)
        let payload = try JSONEncoder().encode(stored)
        return try await enqueue(
            kind: Self.httpKind, scope: scope ?? Self.defaultScope(for: stored.url), payload: payload,
            host: stored.url.host, baseVersion: baseVersion, id: id, invalidates: invalidates)
    }

    /// The scope of an HTTP write to `url` when none is given: its path.
    public static func defaultScope(for url: URL) -> String {
        let path = url.path
        return path.isEmpty ? "/" : path
    }
}

/// A transport that tells an ``Outbox`` whenever a host answers with a success, so writes to that host
/// that failed for want of an answer go out at once.
public struct OutboxReachabilityTransport<Base: HTTPTransport>: HTTPTransport {
    /// The transport that sends.
    public let base: Base
    /// The outbox told about hosts that answered. Held weakly: an outbox's HTTP handler may send
    /// through this very transport, and a strong reference each way would keep both alive forever.
    public weak let outbox: Outbox?

    public func send(_ request: HTTPRequest, body: Data?, options: HTTPRequestOptions) async throws -> HTTPReply {
        let reply = try await base.send(request, body: body, options: options)
        if (200..<400).contains(reply.status.code), let outbox, let host = request.authority.map(Self.host(ofAuthority:)) {
            outbox.hostAnswered(host)
        }
        return reply
    }

    /// The host of an authority (`example.com:8080` → `example.com`, `[::1]:80` → `::1`).
    static func host(ofAuthority authority: String) -> String {
        if authority.hasPrefix("["), let close = authority.firstIndex(of: "]") {
            return String(authority[authority.index(after: authority.startIndex)..<close])
        }
        let withoutUser = authority.split(separator: "@").last.map(String.init) ?? authority
        return withoutUser.split(separator: ":", maxSplits: 1).first.map(String.init) ?? withoutUser
    }
}

extension HTTPTransport {
    /// This transport, telling `outbox` whenever a host answers a request (2xx or 3xx), so queued
    /// writes to that host are sent at once instead of at the end of their backoff: a read that
    /// works proves the server is back.
    public func reportingReachability(to outbox: Outbox) -> OutboxReachabilityTransport<Self> {
        OutboxReachabilityTransport(base: self, outbox: outbox)
    }
}
