import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Sends HTTP requests. Strata's HTTP loaders depend on this seam, not on a concrete client.
///
/// ## Contract
/// - Returns every response the server sends, whatever its status; status checks belong to loaders.
/// - Throws ``HTTPError/transport(url:reason:underlying:)`` when there is no response.
/// - Throws ``HTTPError/bodyTooLarge(url:limit:received:contentLength:)`` when the body is larger than
///   ``HTTPRequest/maxBodyBytes`` (or the client's own limit), and stops reading it: it does not buffer
///   the whole body first. (``HTTPLoader`` checks the size again, for clients that do not.)
/// - Stops the request and throws `CancellationError` when the calling task is cancelled.
/// - May be called concurrently.
/// - Never weakens TLS: certificate validation is the platform's, always on.
public protocol HTTPClient: Sendable {
    func send(_ request: HTTPRequest) async throws -> HTTPResponse
}

/// An ``HTTPClient`` on `URLSession` (FoundationNetworking on Linux).
///
/// ## Maximum body size
/// Every response body is bounded: by the request's ``HTTPRequest/maxBodyBytes`` when set, otherwise by
/// the client's ``maxBodyBytes`` (``defaultMaxBodyBytes``, 64 MiB, unless you pass another or `nil`).
/// With a session the client creates (``init(configuration:maxBodyBytes:)``, ``init(maxBodyBytes:)``, ``shared``), a
/// `Content-Length` above the limit fails before the body is read, and a body of unknown length is
/// counted chunk by chunk as it arrives; the request is cancelled as soon as it passes the limit, so at
/// most the limit plus one network chunk is held in memory. With a session of your own
/// (``init(session:maxBodyBytes:)``) the client cannot watch the body arrive on every platform; the
/// limit is then enforced where the platform reports progress and always on the finished body.
///
/// ## TLS
/// The client never handles authentication challenges itself: certificate validation is the
/// platform's default (system trust store), and an untrusted certificate fails with
/// ``HTTPError/transport(url:reason:underlying:)`` ("TLS failed: …").
public final class URLSessionHTTPClient: HTTPClient, Sendable {
    /// The body limit of clients created without one: 64 MiB.
    public static let defaultMaxBodyBytes = 64 * 1024 * 1024

    /// A client on an ephemeral session: no cookies or shared credentials, no URL cache of its own
    /// (Strata's stores are the cache), bodies up to ``defaultMaxBodyBytes``.
    public static let shared = URLSessionHTTPClient()

    /// The largest body accepted when a request does not set ``HTTPRequest/maxBodyBytes``; `nil`: no limit.
    public let maxBodyBytes: Int?

    private let session: URLSession
    /// The delegate of a session this client created, which counts body bytes as they arrive; `nil`
    /// for a session passed in.
    private let receiver: BodyReceiver?

    /// Creates a client on `session`, a session of your own (its delegate, if any, stays in charge).
    public init(session: URLSession, maxBodyBytes: Int? = URLSessionHTTPClient.defaultMaxBodyBytes) {
        self.session = session
        self.receiver = nil
        self.maxBodyBytes = maxBodyBytes
    }

    /// Creates a client on a new session with `configuration` whose body bytes the client counts as
    /// they arrive (see "Maximum body size").
    public init(configuration: URLSessionConfiguration, maxBodyBytes: Int? = URLSessionHTTPClient.defaultMaxBodyBytes) {
        let receiver = BodyReceiver()
        self.receiver = receiver
        self.session = URLSession(configuration: configuration, delegate: receiver, delegateQueue: nil)
        self.maxBodyBytes = maxBodyBytes
    }

    /// Creates a client on a new ephemeral session without URL cache and without cookie storage: a
    /// `Set-Cookie` from one answer is never sent with a later request (send a `Cookie` header
    /// yourself when you need one).
    public convenience init(maxBodyBytes: Int? = URLSessionHTTPClient.defaultMaxBodyBytes) {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        configuration.httpCookieAcceptPolicy = .never
        self.init(configuration: configuration, maxBodyBytes: maxBodyBytes)
    }

    deinit {
        // The session keeps its delegate until it is invalidated; a session of the caller's is theirs.
        if receiver != nil { session.finishTasksAndInvalidate() }
    }

    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        var urlRequest = URLRequest(url: request.url)
        urlRequest.httpMethod = request.method
        urlRequest.httpBody = request.body
        for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }
        if let timeout = request.timeout {
            urlRequest.timeoutInterval = timeout / .seconds(1)
        }
        let limit = request.maxBodyBytes ?? maxBodyBytes
        try Task.checkCancellation()

        let state = Locked(RequestState())
        let data: Data
        let response: URLResponse
        do {
            if let receiver {
                (data, response) = try await perform(urlRequest, limit: limit, receiver: receiver, state: state)
            } else {
                let watcher = BodyLimitWatcher(limit: limit)
                do {
                    (data, response) = try await session.data(for: urlRequest, delegate: watcher)
                } catch {
                    if let tooLarge = watcher.exceeded { throw tooLarge }
                    throw error
                }
            }
        } catch let tooLarge as BodyTooLarge {
            throw HTTPError.bodyTooLarge(url: request.url, limit: tooLarge.limit, received: tooLarge.received, contentLength: tooLarge.contentLength)
        } catch {
            if Task.isCancelled || (error as? URLError)?.code == .cancelled { throw CancellationError() }
            throw HTTPError.transport(url: request.url, reason: describeTransportError(error), underlying: error)
        }

        guard let http = response as? HTTPURLResponse else {
            throw HTTPError.transport(url: request.url, reason: "the response is not HTTP", underlying: nil)
        }
        if let limit, data.count > limit {
            throw HTTPError.bodyTooLarge(url: request.url, limit: limit, received: data.count, contentLength: nil)
        }
        var headers: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            headers[String(describing: name)] = String(describing: value)
        }
        return HTTPResponse(url: http.url ?? request.url, statusCode: http.statusCode, headers: headers, body: data)
    }

    /// Runs a data task on the client's own session, whose delegate collects the body (stopping at
    /// `limit`), cancelling the task when the calling task is cancelled.
    private func perform(
        _ urlRequest: URLRequest, limit: Int?, receiver: BodyReceiver, state: Locked<RequestState>
    ) async throws -> (Data, URLResponse) {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let task = session.dataTask(with: urlRequest)
                receiver.register(task, limit: limit, continuation: continuation)
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

/// Thrown inside the client when a body passes its limit; turned into ``HTTPError/bodyTooLarge(url:limit:received:contentLength:)``.
struct BodyTooLarge: Error, Sendable {
    var limit: Int
    var received: Int
    var contentLength: Int?
}

/// Whether a response declares a body over `limit`: its `Content-Length` (redirects excluded: only the
/// final body counts).
private func declaredLengthOverLimit(_ response: URLResponse, limit: Int?) -> Int? {
    guard let limit, response.expectedContentLength > Int64(limit) else { return nil }
    if let http = response as? HTTPURLResponse, (300..<400).contains(http.statusCode) { return nil }
    return Int(response.expectedContentLength)
}

/// The delegate of the sessions ``URLSessionHTTPClient`` creates: collects each task's body, counting
/// bytes as they arrive and cancelling the task once they pass its limit, then resumes the task's
/// continuation. It implements no authentication-challenge method, so TLS validation stays the
/// platform's default.
private final class BodyReceiver: NSObject, URLSessionDataDelegate, Sendable {
    private struct Transfer: Sendable {
        var limit: Int?
        var body = Data()
        var response: URLResponse?
        var tooLarge: BodyTooLarge?
        var continuation: CheckedContinuation<(Data, URLResponse), any Error>
    }

    private let transfers = Locked([Int: Transfer]())

    func register(_ task: URLSessionTask, limit: Int?, continuation: CheckedContinuation<(Data, URLResponse), any Error>) {
        transfers.withLock { $0[task.taskIdentifier] = Transfer(limit: limit, continuation: continuation) }
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        let tooLong = transfers.withLock { transfers -> Bool in
            guard var transfer = transfers[dataTask.taskIdentifier] else { return false }
            transfer.response = response
            transfer.body = Data()
            if let length = declaredLengthOverLimit(response, limit: transfer.limit), let limit = transfer.limit {
                transfer.tooLarge = BodyTooLarge(limit: limit, received: 0, contentLength: length)
            }
            transfers[dataTask.taskIdentifier] = transfer
            return transfer.tooLarge != nil
        }
        completionHandler(tooLong ? .cancel : .allow)
        // FoundationNetworking ignores the disposition; cancelling the task works everywhere.
        if tooLong { dataTask.cancel() }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let overLimit = transfers.withLock { transfers -> Bool in
            let id = dataTask.taskIdentifier
            guard let transfer = transfers[id], transfer.tooLarge == nil else { return false }
            let received = transfer.body.count + data.count
            if let limit = transfer.limit, received > limit {
                // Stop here: drop what was collected and refuse the rest.
                let declared = transfer.response.flatMap { $0.expectedContentLength >= 0 ? Int($0.expectedContentLength) : nil }
                transfers[id]?.tooLarge = BodyTooLarge(limit: limit, received: received, contentLength: declared)
                transfers[id]?.body = Data()
                return true
            }
            // Appended in place: the body is never copied as it grows.
            transfers[id]?.body.append(data)
            return false
        }
        if overLimit { dataTask.cancel() }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        guard let transfer = transfers.withLock({ $0.removeValue(forKey: task.taskIdentifier) }) else { return }
        if let tooLarge = transfer.tooLarge {
            transfer.continuation.resume(throwing: tooLarge)
        } else if let error {
            transfer.continuation.resume(throwing: error)
        } else if let response = task.response ?? transfer.response {
            transfer.continuation.resume(returning: (transfer.body, response))
        } else {
            transfer.continuation.resume(throwing: URLError(.badServerResponse))
        }
    }
}

/// The task delegate for a session passed in: counts body bytes where the platform reports them to a
/// task delegate, and cancels the task once they pass the limit. No authentication-challenge method.
private final class BodyLimitWatcher: NSObject, URLSessionDataDelegate, Sendable {
    private let limit: Int?
    private let received = Locked((count: 0, exceeded: BodyTooLarge?.none))

    init(limit: Int?) {
        self.limit = limit
    }

    /// Set once the body passed the limit (and the task was cancelled for it).
    var exceeded: BodyTooLarge? { received.withLock { $0.exceeded } }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        guard let limit else { return }
        let stop = received.withLock { state -> Bool in
            guard state.exceeded == nil else { return false }
            state.count += data.count
            if state.count > limit { state.exceeded = BodyTooLarge(limit: limit, received: state.count, contentLength: nil) }
            return state.exceeded != nil
        }
        if stop { dataTask.cancel() }
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
        default:
            // FoundationNetworking reports some TLS failures (an untrusted certificate among them) with
            // libcurl's message under an unknown code.
            let message = urlError.localizedDescription
            if ["SSL", "TLS", "certificate"].contains(where: { message.localizedCaseInsensitiveContains($0) }) {
                return "TLS failed: \(message)"
            }
            return "URLError \(urlError.code.rawValue): \(message)"
        }
    }
    return "\(error)"
}

private struct RequestState: Sendable {
    var task: URLSessionTask?
    var cancelled = false
}


