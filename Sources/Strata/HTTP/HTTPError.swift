import Foundation

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

    /// Whether a ``transport(url:reason:underlying:)`` failure happened before the request reached any
    /// server: the connection was refused, the host was not found, there is no network. `false` for a
    /// timeout or a connection lost mid-exchange (the server may have the request) and for every
    /// other case. Read from the underlying error (`URLError` codes, POSIX errnos) and from the
    /// reasons Strata's transports give (`URLSessionHTTPClient`, `AsyncHTTPTransport`).
    public var neverReachedTheServer: Bool {
        guard case .transport(_, let reason, let underlying) = self else { return false }
        // `URLError` by its domain and code, so this file needs no FoundationNetworking on Linux.
        if let urlError = underlying as? any CustomNSError, type(of: urlError).errorDomain == "NSURLErrorDomain" {
            return Self.neverSentURLErrorCodes.contains(urlError.errorCode)
        }
        if let posix = underlying as? POSIXError {
            return [.ECONNREFUSED, .EHOSTUNREACH, .ENETUNREACH, .ENETDOWN, .EHOSTDOWN].contains(posix.code)
        }
        return Self.neverSentReasons.contains { reason.hasPrefix($0) }
    }

    /// `URLError` codes of a request that never left: `cannotFindHost` (-1003), `cannotConnectToHost`
    /// (-1004), `dnsLookupFailed` (-1006), `notConnectedToInternet` (-1009),
    /// `internationalRoamingOff` (-1018), `callIsActive` (-1019), `dataNotAllowed` (-1020).
    static let neverSentURLErrorCodes: Set<Int> = [-1003, -1004, -1006, -1009, -1018, -1019, -1020]

    /// The reasons the transports give for a request that never left (see ``neverReachedTheServer``).
    static let neverSentReasons = ["could not connect", "host not found", "not connected to the internet"]

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
