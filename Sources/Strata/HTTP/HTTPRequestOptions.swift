import Foundation

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
