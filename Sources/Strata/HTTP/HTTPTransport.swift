import Foundation

/// Sends HTTP requests. Strata's HTTP loaders depend on this seam, not on a concrete client:
/// `URLSessionHTTPClient` (the `URLSession` package trait, on by default) is the default
/// (``DefaultHTTPTransport``); servers can use `AsyncHTTPTransport` (the `StrataAsyncHTTPClient`
/// product, behind the `AsyncHTTPClient` package trait).
///
/// Requests and responses are swift-http-types' `HTTPRequest` and `HTTPResponse`; the body and
/// Strata's per-request limits travel beside them (``HTTPRequestOptions``, ``HTTPReply``).
///
/// ## Contract
/// - Returns every response the server sends, whatever its status; status checks belong to loaders.
/// - Throws ``HTTPError/transport(url:reason:underlying:)`` when there is no response.
/// - Throws ``HTTPError/bodyTooLarge(url:limit:received:contentLength:)`` when the body is larger than
///   ``HTTPRequestOptions/maxBodyBytes`` (or the client's own limit), and stops reading it: it does not buffer
///   the whole body first. (``HTTPLoader`` checks the size again, for clients that do not.)
/// - With ``HTTPRequestOptions/OversizedBody/truncate`` returns such a response instead, its body cut at the
///   limit and ``HTTPReply/isBodyTruncated`` set, so the caller still gets the status (an outbox write
///   needs it: the server may have applied the write). A transport that ignores the option throws
///   `bodyTooLarge` as above.
/// - Ends the transfer when it refuses or cuts a body (cancels the request, closing the connection):
///   the rest of the body is not downloaded in the background.
/// - Stops the request and throws `CancellationError` when the calling task is cancelled.
/// - May be called concurrently.
/// - Never weakens TLS: certificate validation is the platform's, always on.
public protocol HTTPTransport: Sendable {
    /// Sends `request` (with `body`, if any) under `options` and returns what came back.
    ///
    /// - Parameters:
    ///   - request: method, URL (scheme, authority, path) and header fields.
    ///   - body: the request body, for methods that send one.
    ///   - options: the per-request timeout and body limit.
    func send(_ request: HTTPRequest, body: Data?, options: HTTPRequestOptions) async throws -> HTTPReply
}

/// The transport ``HTTPLoader`` and `Outbox.registerHTTP` use when given none.
///
/// With the `URLSession` package trait (enabled by default) it is `URLSessionHTTPClient.shared`.
/// Without it, Strata does not import FoundationNetworking at all (on Linux, a server on
/// `AsyncHTTPTransport` then never loads it and libcurl at launch), and this transport fails every
/// request with ``HTTPError/invalidRequest(url:reason:)`` saying to pass one:
///
/// ```swift
/// .package(url: "https://github.com/strata-swift/strata", from: "1.0.0", traits: ["AsyncHTTPClient"]),
/// // URLSession is off: the traits listed replace the defaults (add .defaults to keep it)
///
/// let feed = HTTPLoader(url: feedURL, transport: AsyncHTTPTransport())
/// ```
public enum DefaultHTTPTransport {
    /// The default transport of this build.
    public static var shared: any HTTPTransport {
        #if URLSession
        URLSessionHTTPClient.shared
        #else
        MissingHTTPTransport()
        #endif
    }
}

/// The default transport of a build without the `URLSession` trait: every request fails, naming
/// the fix.
struct MissingHTTPTransport: HTTPTransport {
    static let reason = "no HTTP transport: Strata was built without its URLSession trait, so pass transport: "
        + "(AsyncHTTPTransport from StrataAsyncHTTPClient, or your own)"

    func send(_ request: HTTPRequest, body: Data?, options: HTTPRequestOptions) async throws -> HTTPReply {
        throw HTTPError.invalidRequest(url: request.url ?? URL(fileURLWithPath: request.path ?? "/"), reason: Self.reason)
    }
}
