import Foundation

/// Sends HTTP requests. Strata's HTTP loaders depend on this seam, not on a concrete client:
/// ``URLSessionHTTPClient`` is the default; servers can use `AsyncHTTPTransport` (the
/// `StrataAsyncHTTPClient` product, behind the `AsyncHTTPClient` package trait).
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
