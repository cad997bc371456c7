import Foundation

/// Loads over HTTP: builds a request from the input, sends it through an ``HTTPClient``, and returns
/// the response when its status is 2xx.
///
/// - A non-2xx status throws ``HTTPError/status(code:url:headers:body:)``; the secrets the request
///   carried (URL credentials, long query values, `Authorization` / `Cookie` / API-key header values)
///   are masked with `***` in the body it keeps, so an error page echoing them never reaches a log.
/// - No response throws ``HTTPError/transport(url:reason:underlying:)``.
/// - A body larger than the request's ``HTTPRequest/maxBodyBytes`` throws
///   ``HTTPError/bodyTooLarge(url:limit:received:contentLength:)`` (checked again here, so an
///   ``HTTPClient`` of your own that does not enforce the limit cannot pass a larger body on).
/// - Values it returns are reported with origin ``Origin/remote``.
///
/// ```swift
/// let feed = HTTPLoader(url: feedURL).decoding([FeedItem].self)                   // Loader<Void, [FeedItem]>
/// let post = HTTPLoader.get { (id: Int) in base.appendingPathComponent("posts/\(id)") }   // Loader<Int, HTTPResponse>
/// let create = HTTPLoader<NewPost>.postJSON(to: base.appendingPathComponent("posts")) // Loader<NewPost, HTTPResponse>
/// ```
public struct HTTPLoader<Input: Sendable>: Loader {
    public typealias Output = HTTPResponse

    public let client: any HTTPClient
    let makeRequest: @Sendable (Input) throws -> HTTPRequest
    let summary: String
    /// The header ``addingIdempotencyKey(header:)`` sets on non-idempotent requests, if any.
    var idempotencyKeyHeader: String?

    /// A loader that sends `request(input)` for every load.
    public init(
        description: String = "HTTP",
        client: any HTTPClient = URLSessionHTTPClient.shared,
        request: @escaping @Sendable (Input) throws -> HTTPRequest
    ) {
        self.client = client
        self.makeRequest = request
        self.summary = description
    }

    public func load(_ input: Input) async throws -> HTTPResponse {
        let request = try prepareForSending(makeRequest(input))  // HTTPLoader+Idempotency.swift
        let response = try await client.send(request)
        try checkResponse(response, to: request)
        LoadRecorder.record(.served(Provenance(origin: .remote, tier: LoadRecorder.tierName(default: description), age: .zero)))
        return response
    }

    /// A loader that sends `GET url(input)`.
    ///
    /// `maxBodyBytes` bounds the response body (see ``HTTPRequest/maxBodyBytes``; `nil`: the client's limit).
    public static func get(
        headers: [String: String] = [:],
        timeout: Duration? = nil,
        maxBodyBytes: Int? = nil,
        client: any HTTPClient = URLSessionHTTPClient.shared,
        _ url: @escaping @Sendable (Input) -> URL
    ) -> HTTPLoader<Input> {
        HTTPLoader(description: "HTTP GET", client: client) { input in
            HTTPRequest(method: "GET", url: url(input), headers: headers, timeout: timeout, maxBodyBytes: maxBodyBytes)
        }
    }
}

extension HTTPLoader where Input == Void {
    /// A loader that sends `GET url`.
    ///
    /// `maxBodyBytes` bounds the response body (see ``HTTPRequest/maxBodyBytes``; `nil`: the client's limit).
    public init(
        url: URL, headers: [String: String] = [:], timeout: Duration? = nil, maxBodyBytes: Int? = nil,
        client: any HTTPClient = URLSessionHTTPClient.shared
    ) {
        self.init(description: "HTTP GET \(redactedURLString(url))", client: client) { _ in
            HTTPRequest(method: "GET", url: url, headers: headers, timeout: timeout, maxBodyBytes: maxBodyBytes)
        }
    }
}

extension HTTPLoader where Input: Encodable {
    /// A loader that sends its input as a JSON body: `POST url` (or `method`) with
    /// `Content-Type: application/json`. `encoder` makes the encoder for each request (for example to
    /// set a date or key strategy).
    public static func postJSON(
        to url: URL, method: String = "POST", headers: [String: String] = [:], timeout: Duration? = nil,
        maxBodyBytes: Int? = nil, encoder: @escaping @Sendable () -> JSONEncoder = { JSONEncoder() },
        client: any HTTPClient = URLSessionHTTPClient.shared
    ) -> HTTPLoader<Input> {
        HTTPLoader(description: "HTTP \(method) \(redactedURLString(url))", client: client) { input in
            let body: Data
            do {
                body = try encoder().encode(input)
            } catch {
                throw HTTPError.invalidRequest(url: url, reason: "the body does not encode as JSON: \(error)")
            }
            var allHeaders = headers
            allHeaders["Content-Type"] = "application/json"
            allHeaders["Accept"] = allHeaders["Accept"] ?? "application/json"
            return HTTPRequest(method: method, url: url, headers: allHeaders, body: body, timeout: timeout, maxBodyBytes: maxBodyBytes)
        }
    }
}

/// Throws the ``HTTPError`` a response to `request` stands for: ``HTTPError/status(code:url:headers:body:)``
/// for a status outside 200–299 (its body's first 64 KiB, with the request's secrets masked) and
/// ``HTTPError/bodyTooLarge(url:limit:received:contentLength:)`` for a body over the request's limit.
func checkResponse(_ response: HTTPResponse, to request: HTTPRequest, allowing allowed: Set<Int> = []) throws {
    if let limit = request.maxBodyBytes, response.body.count > limit {
        throw HTTPError.bodyTooLarge(url: response.url, limit: limit, received: response.body.count, contentLength: nil)
    }
    guard (200..<300).contains(response.statusCode) || allowed.contains(response.statusCode) else {
        throw HTTPError.status(
            code: response.statusCode, url: response.url, headers: response.headers,
            body: maskingSecrets(of: request, in: Data(response.body.prefix(65_536))))
    }
}

extension HTTPLoader: CustomStringConvertible {
    public var description: String { summary }
}
