import Foundation

/// Loads over HTTP: builds a swift-http-types `HTTPRequest` from the input, sends it through an
/// ``HTTPTransport``, and returns the ``HTTPReply`` when its status is 2xx.
///
/// - A non-2xx status throws ``HTTPError/status(code:url:headerFields:body:)``; the secrets the request
///   carried (URL credentials, long query values, `Authorization` / `Cookie` / API-key header values)
///   are masked with `***` in the body it keeps, so an error page echoing them never reaches a log.
/// - No response throws ``HTTPError/transport(url:reason:underlying:)``.
/// - A body larger than the loader's ``HTTPRequestOptions/maxBodyBytes`` throws
///   ``HTTPError/bodyTooLarge(url:limit:received:contentLength:)`` (checked again here, so an
///   ``HTTPTransport`` of your own that does not enforce the limit cannot pass a larger body on).
/// - Values it returns are reported with origin ``Origin/remote``.
///
/// ```swift
/// let feed = HTTPLoader(url: feedURL).decoding([FeedItem].self)                   // Loader<Void, [FeedItem]>
/// let post = HTTPLoader.get { (id: Int) in base.appendingPathComponent("posts/\(id)") }   // Loader<Int, HTTPReply>
/// let create = HTTPLoader<NewPost>.postJSON(to: base.appendingPathComponent("posts")) // Loader<NewPost, HTTPReply>
/// ```
public struct HTTPLoader<Input: Sendable>: Loader {
    public typealias Output = HTTPReply

    /// What sends the requests.
    public let transport: any HTTPTransport
    /// The per-request timeout and body limit every request is sent with.
    public let options: HTTPRequestOptions
    /// The request, its body, and the URL it was built from when the loader knows it (with the user
    /// and password `HTTPRequest` does not keep, for masking them in error bodies).
    let makeRequest: @Sendable (Input) throws -> (request: HTTPRequest, body: Data?, url: URL?)
    let summary: String
    /// The header ``addingIdempotencyKey(header:)`` sets on non-idempotent requests, if any.
    var idempotencyKeyHeader: String?

    /// A loader that sends `request(input)` (no body) for every load.
    public init(
        description: String = "HTTP",
        transport: any HTTPTransport = DefaultHTTPTransport.shared,
        options: HTTPRequestOptions = HTTPRequestOptions(),
        request: @escaping @Sendable (Input) throws -> HTTPRequest
    ) {
        self.init(description: description, transport: transport, options: options) { input in
            (request: try request(input), body: nil)
        }
    }

    /// A loader that sends `requestWithBody(input)`: the request and its body, for methods that send one.
    public init(
        description: String = "HTTP",
        transport: any HTTPTransport = DefaultHTTPTransport.shared,
        options: HTTPRequestOptions = HTTPRequestOptions(),
        requestWithBody: @escaping @Sendable (Input) throws -> (request: HTTPRequest, body: Data?)
    ) {
        self.init(description: description, transport: transport, options: options, outgoing: { input in
            let (request, body) = try requestWithBody(input)
            return (request: request, body: body, url: nil)
        })
    }

    init(
        description: String, transport: any HTTPTransport, options: HTTPRequestOptions,
        outgoing: @escaping @Sendable (Input) throws -> (request: HTTPRequest, body: Data?, url: URL?)
    ) {
        self.transport = transport
        self.options = options
        self.makeRequest = outgoing
        self.summary = description
    }

    public func load(_ input: Input) async throws -> HTTPReply {
        try await load(input, in: .current)
    }

    public func load(_ input: Input, in context: LoadContext) async throws -> HTTPReply {
        let (prepared, body, url) = try makeRequest(input)
        let request = prepareForSending(prepared, in: context)  // HTTPLoader+Idempotency.swift
        let reply = try await transport.send(request, body: body, options: options)
        try checkReply(reply, to: request, url: url, options: options)
        context.record(.served(Provenance(origin: .remote, tier: context.tierName(default: description), age: .zero)))
        return reply
    }

    /// A loader that sends `GET url(input)` with `headerFields`.
    ///
    /// `maxBodyBytes` bounds the response body (see ``HTTPRequestOptions/maxBodyBytes``; `nil`: the transport's limit).
    public static func get(
        headerFields: HTTPFields = [:],
        timeout: Duration? = nil,
        maxBodyBytes: Int? = nil,
        transport: any HTTPTransport = DefaultHTTPTransport.shared,
        _ url: @escaping @Sendable (Input) -> URL
    ) -> HTTPLoader<Input> {
        HTTPLoader(
            description: "HTTP GET", transport: transport, options: HTTPRequestOptions(timeout: timeout, maxBodyBytes: maxBodyBytes),
            outgoing: { input in
                let url = url(input)
                return (request: HTTPRequest.strata(method: .get, url: url, headerFields: headerFields), body: nil, url: url)
            })
    }
}

extension HTTPLoader where Input == Void {
    /// A loader that sends `GET url` with `headerFields` (a user and password in `url` are sent as
    /// `Authorization: Basic`).
    ///
    /// `maxBodyBytes` bounds the response body (see ``HTTPRequestOptions/maxBodyBytes``; `nil`: the transport's limit).
    public init(
        url: URL, headerFields: HTTPFields = [:], timeout: Duration? = nil, maxBodyBytes: Int? = nil,
        transport: any HTTPTransport = DefaultHTTPTransport.shared
    ) {
        self.init(
            description: "HTTP GET \(Redaction.redactedString(for: url))", transport: transport,
            options: HTTPRequestOptions(timeout: timeout, maxBodyBytes: maxBodyBytes),
            outgoing: { _ in (request: HTTPRequest.strata(method: .get, url: url, headerFields: headerFields), body: nil, url: url) })
    }
}

extension HTTPLoader where Input: Encodable {
    /// A loader that sends its input as a JSON body: `POST url` (or `method`) with
    /// `Content-Type: application/json` (and `Accept: application/json` unless `headerFields` has an
    /// `Accept`). `encoder` makes the encoder for each request (for example to set a date or key strategy).
    public static func postJSON(
        to url: URL, method: HTTPRequest.Method = .post, headerFields: HTTPFields = [:], timeout: Duration? = nil,
        maxBodyBytes: Int? = nil, encoder: @escaping @Sendable () -> JSONEncoder = { JSONEncoder() },
        transport: any HTTPTransport = DefaultHTTPTransport.shared
    ) -> HTTPLoader<Input> {
        HTTPLoader(
            description: "HTTP \(method.rawValue) \(Redaction.redactedString(for: url))", transport: transport,
            options: HTTPRequestOptions(timeout: timeout, maxBodyBytes: maxBodyBytes),
            outgoing: { input in
            let body: Data
            do {
                body = try encoder().encode(input)
            } catch {
                throw HTTPError.invalidRequest(url: url, reason: "the body does not encode as JSON: \(error)")
            }
            var fields = headerFields
            fields[.contentType] = "application/json"
            if fields[.accept] == nil { fields[.accept] = "application/json" }
            return (request: HTTPRequest.strata(method: method, url: url, headerFields: fields), body: body, url: url)
        })
    }
}

/// Throws the ``HTTPError`` a reply to `request` stands for: ``HTTPError/status(code:url:headerFields:body:)``
/// for a status outside 200–299 (its body's first 64 KiB, with the request's secrets masked) and
/// ``HTTPError/bodyTooLarge(url:limit:received:contentLength:)`` for a body over the request's limit.
package func checkReply(
    _ reply: HTTPReply, to request: HTTPRequest, url: URL?, options: HTTPRequestOptions, allowing allowed: Set<Int> = []
) throws {
    if let limit = options.maxBodyBytes, reply.body.count > limit {
        throw HTTPError.bodyTooLarge(url: reply.url, limit: limit, received: reply.body.count, contentLength: nil)
    }
    let code = reply.status.code
    guard (200..<300).contains(code) || allowed.contains(code) else {
        throw HTTPError.status(
            code: code, url: reply.url, headerFields: reply.headerFields,
            body: maskingSecrets(of: request, url: url ?? request.url ?? reply.url, in: Data(reply.body.prefix(65_536))))
    }
}

extension HTTPLoader: CustomStringConvertible {
    public var description: String { summary }
}
