import Foundation
// Strata speaks swift-http-types: `HTTPRequest`, `HTTPResponse` and `HTTPFields` come with `import Strata`,
// the same types Hummingbird re-exports and AsyncHTTPClient speaks.
@_exported import HTTPTypes

/// How one request is sent, beyond what its `HTTPRequest` says: Strata's per-request limits.
public struct HTTPRequestOptions: Sendable, Hashable {
    /// How long the transport may wait for the response before failing with
    /// ``HTTPError/transport(url:reason:underlying:)``; `nil` leaves the transport's default.
    public var timeout: Duration?
    /// The largest response body, in bytes, the transport accepts for this request; `nil` leaves the
    /// transport's own limit (``URLSessionHTTPClient/defaultMaxBodyBytes`` for the shared client).
    ///
    /// A larger body fails with ``HTTPError/bodyTooLarge(url:limit:received:contentLength:)``: a
    /// `Content-Length` above the limit fails before any of the body is read, and a body of unknown
    /// length is counted as it arrives and the request is stopped once it passes the limit. Only the
    /// final response's body counts (not the bodies of redirects).
    public var maxBodyBytes: Int?

    /// Options with the given limits; `HTTPRequestOptions()` leaves both to the transport.
    public init(timeout: Duration? = nil, maxBodyBytes: Int? = nil) {
        self.timeout = timeout
        self.maxBodyBytes = maxBodyBytes
    }
}

/// What an ``HTTPTransport`` received: swift-http-types' `HTTPResponse` (status and header fields),
/// the body, and the URL it came from. The output of ``HTTPLoader``.
public struct HTTPReply: Sendable, Hashable {
    /// The status and header fields. Repeated fields are kept (a transport on URLSession receives them
    /// folded into one comma-separated field, as Foundation delivers them); lookups by
    /// `HTTPField.Name` are case-insensitive.
    public var response: HTTPResponse
    /// The body.
    public var body: Data
    /// The URL the response came from (after redirects).
    public var url: URL

    /// A reply with the given parts.
    public init(response: HTTPResponse, body: Data = Data(), url: URL) {
        self.response = response
        self.body = body
        self.url = url
    }

    /// The status (`reply.status.code` for the number).
    public var status: HTTPResponse.Status { response.status }

    /// The response's header fields.
    public var headerFields: HTTPFields { response.headerFields }
}

extension HTTPRequest {
    /// A request for `url` whose credentials, if the URL has any (`https://user:password@host/`), are
    /// sent as `Authorization: Basic …` (unless `headerFields` already has an `Authorization`):
    /// swift-http-types' request keeps scheme, host and path, not the URL's user and password.
    static func strata(method: Method, url: URL, headerFields: HTTPFields) -> HTTPRequest {
        var fields = headerFields
        if fields[.authorization] == nil, let components = URLComponents(url: url, resolvingAgainstBaseURL: false),
           let user = components.user, let password = components.password {
            fields[.authorization] = "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
        }
        return HTTPRequest(method: method, url: url, headerFields: fields)
    }

    /// The URL Strata reports for this request (in errors and logs): its `url`, or a URL made of its
    /// path alone when it has no scheme or authority.
    var reportedURL: URL {
        url ?? URL(string: path ?? "/") ?? URL(fileURLWithPath: "/")
    }
}

/// Why an HTTP load failed. Every case carries the URL.
public enum HTTPError: Error, Sendable, CustomStringConvertible {
    /// No response: connection refused or reset, DNS failure, TLS failure, the client's timeout.
    case transport(url: URL, reason: String, underlying: (any Error)?)
    /// The server answered with a status outside 200–299, with these header fields. `body` holds at
    /// most the first 64 KiB; when ``HTTPLoader`` throws it, the secrets its request carried are masked
    /// there with `***`.
    case status(code: Int, url: URL, headerFields: HTTPFields, body: Data)
    /// The body could not be decoded as `type`.
    case decoding(url: URL, type: String, underlying: any Error)
    /// The request could not be built (for example the body did not encode).
    case invalidRequest(url: URL, reason: String)
    /// The response body is larger than the request's limit (``HTTPRequestOptions/maxBodyBytes`` or the
    /// client's), so the client stopped reading it. `received` is how many body bytes had arrived when
    /// it stopped (0 when the `Content-Length` alone decided); `contentLength` is the length the server
    /// declared, if it declared one. Never retried: the same request gets the same body.
    case bodyTooLarge(url: URL, limit: Int, received: Int, contentLength: Int?)

    /// The URL the request was for.
    public var url: URL {
        switch self {
        case .transport(let url, _, _), .status(_, let url, _, _), .decoding(let url, _, _), .invalidRequest(let url, _),
             .bodyTooLarge(let url, _, _, _):
            url
        }
    }

    /// The status code, for ``status(code:url:headerFields:body:)``.
    public var statusCode: Int? {
        if case .status(let code, _, _, _) = self { return code }
        return nil
    }

    public var description: String {
        let where_ = Redaction.redactedString(for: url)
        switch self {
        case .transport(_, let reason, _):
            return "HTTP request to \(where_) failed: \(reason)"
        case .status(let code, _, _, let body):
            let snippet = Redaction.redactingSecrets(in: String(decoding: body.prefix(200), as: UTF8.self)
                .replacingOccurrences(of: "\n", with: " "))
            return "HTTP \(code) from \(where_)" + (snippet.isEmpty ? "" : ": \(snippet)")
        case .decoding(_, let type, let underlying):
            return "HTTP body from \(where_) is not a valid \(type): \(describeDecodingError(underlying))"
        case .invalidRequest(_, let reason):
            return "HTTP request to \(where_) could not be built: \(reason)"
        case .bodyTooLarge(_, let limit, let received, let contentLength):
            let how = if received == 0, let contentLength {
                "its Content-Length is \(contentLength) bytes, so none of it was read"
            } else {
                "reading stopped after \(received) bytes"
            }
            return "HTTP response from \(where_) is larger than the limit of \(limit) bytes: \(how)"
        }
    }
}

/// `body` with the secrets `request` carries replaced by `***`: the URL's password (and the `Basic`
/// encoding of user and password), its query
/// values (8 characters or longer, so short values such as `page=2` do not mangle the body), and the
/// values of `Authorization`, `Proxy-Authorization`, `Cookie`, `X-API-Key` and `API-Key` headers (each
/// piece of 8 characters or longer). Used for the body an ``HTTPError/status(code:url:headerFields:body:)``
/// keeps, so a server that echoes a token in its error page cannot put it in a log.
func maskingSecrets(of request: HTTPRequest, url: URL, in body: Data) -> Data {
    var secrets: Set<String> = []
    if let components = URLComponents(url: url, resolvingAgainstBaseURL: false) {
        for password in [components.password, components.percentEncodedPassword].compactMap({ $0 }) where !password.isEmpty {
            secrets.insert(password)
        }
        if let user = components.user, let password = components.password {
            // The `Authorization: Basic` value the transport derives from them.
            secrets.insert(Data("\(user):\(password)".utf8).base64EncodedString())
        }
        for item in components.queryItems ?? [] {
            if let value = item.value, value.count >= 8 { secrets.insert(value) }
        }
    }
    let sensitive: Set<String> = ["authorization", "proxy-authorization", "cookie", "x-api-key", "api-key"]
    for field in request.headerFields where sensitive.contains(field.name.canonicalName) {
        let value = field.value
        if value.count >= 8 { secrets.insert(value) }
        // `Basic` credentials: the password they encode, as a server may echo it in clear.
        if field.name == .authorization, value.lowercased().hasPrefix("basic "),
           let decoded = Data(base64Encoded: String(value.dropFirst(6)).trimmingCharacters(in: .whitespaces)),
           let credentials = String(data: decoded, encoding: .utf8), let colon = credentials.firstIndex(of: ":") {
            let password = String(credentials[credentials.index(after: colon)...])
            if !password.isEmpty { secrets.insert(password) }
        }
        for piece in value.split(whereSeparator: { " ;,=".contains($0) }) where piece.count >= 8 {
            secrets.insert(String(piece))
        }
    }
    guard !secrets.isEmpty, !body.isEmpty else { return body }
    var masked = body
    // Longest first, so a whole header value is masked before the pieces it contains.
    for secret in secrets.sorted(by: { $0.count > $1.count }) {
        let needle = Data(secret.utf8)
        var searchFrom = masked.startIndex
        while let found = masked.range(of: needle, in: searchFrom..<masked.endIndex) {
            masked.replaceSubrange(found, with: Data("***".utf8))
            searchFrom = found.lowerBound + 3
        }
    }
    return masked
}

/// `url` for messages and logs: user and password removed, each query value replaced by `***`, so
/// tokens in URLs never reach a log or an error message.
func redactedURLStringImplementation(_ url: URL) -> String {
    guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return "<url>" }
    if components.user != nil || components.password != nil {
        components.user = nil
        components.password = nil
    }
    if let items = components.queryItems, !items.isEmpty {
        components.queryItems = items.map { URLQueryItem(name: $0.name, value: $0.value == nil ? nil : "***") }
    }
    return components.string ?? "<url>"
}

/// A one-line account of a `DecodingError`: what was wrong, and where.
func describeDecodingError(_ error: any Error) -> String {
    guard let decodingError = error as? DecodingError else { return "\(error)" }
    func path(_ context: DecodingError.Context) -> String {
        let components = context.codingPath.map { key in key.intValue.map { "[\($0)]" } ?? ".\(key.stringValue)" }
        return components.isEmpty ? "at the top level" : "at \(components.joined())"
    }
    switch decodingError {
    case .typeMismatch(let type, let context):
        return "expected \(type) \(path(context))"
    case .valueNotFound(let type, let context):
        return "missing \(type) value \(path(context))"
    case .keyNotFound(let key, let context):
        return "missing key '\(key.stringValue)' \(path(context))"
    case .dataCorrupted(let context):
        return "\(context.debugDescription) \(path(context))"
    @unknown default:
        return "\(decodingError)"
    }
}
