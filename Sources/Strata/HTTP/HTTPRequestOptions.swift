import Foundation

/// How one request is sent, beyond what its `HTTPRequest` says: Strata's per-request limits.
public struct HTTPRequestOptions: Sendable, Hashable {
    /// What a transport does with a response body larger than ``HTTPRequestOptions/maxBodyBytes``.
    public enum OversizedBody: Sendable, Hashable {
        /// Fail with ``HTTPError/bodyTooLarge(url:limit:received:contentLength:)``: the response is not
        /// returned. What a read wants: a body it cannot hold is no value.
        case fail
        /// Return the response, status and header fields, with the body cut at the limit: the bytes
        /// that arrived up to the limit, or none when a `Content-Length` over the limit decided before
        /// any was read. ``HTTPReply/isBodyTruncated`` says so. What a write wants: its status says
        /// whether the server applied it, whatever the size of the body that comes with it.
        case truncate
    }

    /// How long the transport may wait for the response before failing with
    /// ``HTTPError/transport(url:reason:underlying:)``; `nil` leaves the transport's default.
    public var timeout: Duration?
    /// The largest response body, in bytes, the transport accepts for this request; `nil` leaves the
    /// transport's own limit (``URLSessionHTTPClient/defaultMaxBodyBytes`` for the shared client).
    ///
    /// A larger body fails with ``HTTPError/bodyTooLarge(url:limit:received:contentLength:)`` (or is cut,
    /// see ``oversizedBody``): a `Content-Length` above the limit decides before any of the body is
    /// read, and a body of unknown length is counted as it arrives. Either way the transport stops the
    /// transfer (it cancels the request, which closes the connection) rather than read the rest. Only
    /// the final response's body counts (not the bodies of redirects).
    public var maxBodyBytes: Int?
    /// What happens to a body over the limit: ``OversizedBody/fail`` (the default) or
    /// ``OversizedBody/truncate``.
    public var oversizedBody: OversizedBody

    /// Options with the given limits; `HTTPRequestOptions()` leaves both to the transport and fails
    /// on a body over the limit.
    public init(timeout: Duration? = nil, maxBodyBytes: Int? = nil, oversizedBody: OversizedBody = .fail) {
        self.timeout = timeout
        self.maxBodyBytes = maxBodyBytes
        self.oversizedBody = oversizedBody
    }
}
