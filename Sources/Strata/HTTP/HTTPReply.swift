import Foundation
// Strata speaks swift-http-types: `HTTPRequest`, `HTTPResponse` and `HTTPFields` come with `import Strata`,
// the same types Hummingbird re-exports and AsyncHTTPClient speaks.
@_exported import HTTPTypes

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
    /// Whether ``body`` is only the start of the body the server sent: the request asked for
    /// ``HTTPRequestOptions/OversizedBody/truncate`` and the body was over its limit, so the transport
    /// kept what arrived up to the limit (nothing when the `Content-Length` decided) and stopped the
    /// transfer.
    public var isBodyTruncated: Bool

    /// A reply with the given parts.
    public init(response: HTTPResponse, body: Data = Data(), url: URL, isBodyTruncated: Bool = false) {
        self.response = response
        self.body = body
        self.url = url
        self.isBodyTruncated = isBodyTruncated
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
    package var reportedURL: URL {
        url ?? URL(string: path ?? "/") ?? URL(fileURLWithPath: "/")
    }
}
