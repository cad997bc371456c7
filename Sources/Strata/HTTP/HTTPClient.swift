import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Sends HTTP requests. Strata's HTTP loaders depend on this seam, not on a concrete client.
///
/// ## Contract
/// - Returns every response the server sends, whatever its status; status checks belong to loaders.
/// - Throws ``HTTPError/transport(url:reason:underlying:)`` when there is no response.
/// - Stops the request and throws `CancellationError` when the calling task is cancelled.
/// - May be called concurrently.
public protocol HTTPClient: Sendable {
    func send(_ request: HTTPRequest) async throws -> HTTPResponse
}

/// An ``HTTPClient`` on `URLSession` (FoundationNetworking on Linux).
public final class URLSessionHTTPClient: HTTPClient, Sendable {
    /// A client on an ephemeral session: no shared cookies or credentials, no URL cache of its own
    /// (Strata's stores are the cache).
    public static let shared = URLSessionHTTPClient()

    private let session: URLSession

    /// Creates a client on `session`.
    public init(session: URLSession) {
        self.session = session
    }

    /// Creates a client on a new ephemeral session without URL cache.
    public convenience init() {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        self.init(session: URLSession(configuration: configuration))
    }

    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        var urlRequest = URLRequest(url: request.url)
        urlRequest.httpMethod = request.method
        urlRequest.httpBody = request.body
        for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }
        if let timeout = request.timeout {
            let components = timeout.components
            urlRequest.timeoutInterval = Double(components.seconds) + Double(components.attoseconds) / 1e18
        }
        try Task.checkCancellation()

        let state = Locked(RequestState())
        let data: Data
        let response: URLResponse
        do {
            (data, response) = try await perform(urlRequest, state: state)
        } catch {
            if Task.isCancelled || (error as? URLError)?.code == .cancelled { throw CancellationError() }
            throw HTTPError.transport(url: request.url, reason: describeTransportError(error), underlying: error)
        }

        guard let http = response as? HTTPURLResponse else {
            throw HTTPError.transport(url: request.url, reason: "the response is not HTTP", underlying: nil)
        }
        var headers: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            headers[String(describing: name)] = String(describing: value)
        }
        return HTTPResponse(url: http.url ?? request.url, statusCode: http.statusCode, headers: headers, body: data)
    }

    /// Runs the data task, cancelling it when the calling task is cancelled.
    private func perform(_ urlRequest: URLRequest, state: Locked<RequestState>) async throws -> (Data, URLResponse) {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let task = session.dataTask(with: urlRequest) { data, response, error in
                    if let error {
                        continuation.resume(throwing: error)
                    } else if let data, let response {
                        continuation.resume(returning: (data, response))
                    } else {
                        continuation.resume(throwing: URLError(.badServerResponse))
                    }
                }
                let cancelNow = state.withLock { state -> Bool in
                    state.task = task
                    return state.cancelled
                }
                task.resume()
                if cancelNow { task.cancel() }
            }
        } onCancel: {
            let task = state.withLock { state -> URLSessionTask? in
                state.cancelled = true
                return state.task
            }
            task?.cancel()
        }
    }
}

/// A short reason for a transport failure: "connection refused", "timed out", …
func describeTransportError(_ error: any Error) -> String {
    if let urlError = error as? URLError {
        switch urlError.code {
        case .cannotConnectToHost: return "could not connect (connection refused)"
        case .timedOut: return "timed out"
        case .networkConnectionLost: return "connection lost"
        case .notConnectedToInternet: return "not connected to the internet"
        case .cannotFindHost, .dnsLookupFailed: return "host not found"
        case .secureConnectionFailed, .serverCertificateUntrusted, .serverCertificateHasBadDate,
             .serverCertificateNotYetValid, .serverCertificateHasUnknownRoot:
            return "TLS failed: \(urlError.localizedDescription)"
        case .badServerResponse: return "bad server response"
        default: return "URLError \(urlError.code.rawValue): \(urlError.localizedDescription)"
        }
    }
    return "\(error)"
}

private struct RequestState: Sendable {
    var task: URLSessionTask?
    var cancelled = false
}


