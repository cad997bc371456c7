// Behind the `URLSession` trait (on by default): without it, nothing in Strata imports
// FoundationNetworking, so a Linux server on AsyncHTTPTransport never loads it or libcurl.
#if URLSession
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An ``HTTPTransport`` on `URLSession` (FoundationNetworking on Linux).
///
/// ## Maximum body size
/// Every response body is bounded: by the request's ``HTTPRequestOptions/maxBodyBytes`` when set, otherwise by
/// the client's ``maxBodyBytes`` (``defaultMaxBodyBytes``, 64 MiB, unless you pass another or `nil`).
/// With a session the client creates (``init(configuration:maxBodyBytes:)``, ``init(maxBodyBytes:)``, ``shared``), a
/// `Content-Length` above the limit fails before the body is read, and a body of unknown length is
/// counted chunk by chunk as it arrives; the task is cancelled as soon as the body passes the limit,
/// which ends the transfer (the connection is closed), so at most the limit plus one network chunk is
/// kept. With ``HTTPRequestOptions/OversizedBody/truncate`` the response is returned with the body cut
/// at the limit instead of failing, and the transfer ends the same way. With a session of your own
/// (``init(session:maxBodyBytes:)``) the client cannot watch the body arrive on every platform; the
/// limit is then enforced where the platform reports progress and always on the finished body.
///
/// Where the transfer outruns the refusal: on Linux, FoundationNetworking's libcurl reads the socket
/// on the session's work queue and hands each chunk to the delegate queue without waiting for it
/// (swift-corelibs-foundation, `_NativeProtocol.notifyDelegate(aboutReceivedData:)`: there is no flow
/// control from the delegate back to libcurl, and libcurl's receive side is never paused). The client
/// cancels the task in the delegate callback that sees the chunk crossing the limit, and the
/// cancellation (two hops on the session's work queue, then `stopLoading()`) removes libcurl's handle,
/// which closes the connection. What libcurl read between the crossing chunk and that moment is
/// downloaded, queued for the delegate and dropped there (never added to the body): as much as the
/// network delivers while the delegate and the work queue catch up (on a fast link, many times the
/// limit; the more the machine is loaded, the more). The client cannot shorten this: FoundationNetworking offers no
/// hook on libcurl's thread.
///
/// ## TLS
/// The client never handles authentication challenges itself: certificate validation is the
/// platform's default (system trust store), and an untrusted certificate fails with
/// ``HTTPError/transport(url:reason:underlying:)`` ("TLS failed: …").
public final class URLSessionHTTPClient: HTTPTransport, Sendable {
    /// The body limit of clients created without one: 64 MiB.
    public static let defaultMaxBodyBytes = 64 * 1024 * 1024

    /// A client on an ephemeral session: no cookies or shared credentials, no URL cache of its own
    /// (Strata's stores are the cache), bodies up to ``defaultMaxBodyBytes``.
    public static let shared = URLSessionHTTPClient()

    /// The largest body accepted when a request does not set ``HTTPRequestOptions/maxBodyBytes``; `nil`: no limit.
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

    public func send(_ request: HTTPRequest, body: Data?, options: HTTPRequestOptions) async throws -> HTTPReply {
        guard let url = request.url else {
            throw HTTPError.invalidRequest(url: request.reportedURL, reason: "the request has no absolute URL")
        }
        var urlRequest = URLRequest(url: url)
        urlRequest.httpMethod = request.method.rawValue
        urlRequest.httpBody = body
        for field in request.headerFields {
            // Repeated fields are sent as one comma-separated field, as URLRequest keeps them.
            urlRequest.addValue(field.value, forHTTPHeaderField: field.name.rawName)
        }
        if let timeout = options.timeout {
            urlRequest.timeoutInterval = timeout / .seconds(1)
        }
        let limit = options.maxBodyBytes ?? maxBodyBytes
        let truncates = options.oversizedBody == .truncate
        try Task.checkCancellation()

        let state = Locked(RequestState())
        var received: Received
        do {
            if let receiver {
                received = try await perform(urlRequest, limit: limit, truncates: truncates, receiver: receiver, state: state)
            } else {
                let watcher = BodyLimitWatcher(limit: limit, truncates: truncates)
                do {
                    let (data, response) = try await session.data(for: urlRequest, delegate: watcher)
                    received = Received(body: data, response: response)
                } catch {
                    if let cut = watcher.truncated { received = cut } else if let tooLarge = watcher.exceeded { throw tooLarge } else { throw error }
                }
            }
        } catch let tooLarge as BodyTooLarge {
            throw HTTPError.bodyTooLarge(url: url, limit: tooLarge.limit, received: tooLarge.received, contentLength: tooLarge.contentLength)
        } catch {
            if Task.isCancelled || (error as? URLError)?.code == .cancelled { throw CancellationError() }
            throw HTTPError.transport(url: url, reason: describeTransportError(error), underlying: error)
        }

        guard let http = received.response as? HTTPURLResponse else {
            throw HTTPError.transport(url: url, reason: "the response is not HTTP", underlying: nil)
        }
        if let limit, received.body.count > limit {
            guard truncates else {
                throw HTTPError.bodyTooLarge(url: url, limit: limit, received: received.body.count, contentLength: nil)
            }
            received.body = Data(received.body.prefix(limit))
            received.truncated = true
        }
        var fields = HTTPFields()
        for (name, value) in http.allHeaderFields {
            guard let name = HTTPField.Name(String(describing: name)) else { continue }
            fields.append(HTTPField(name: name, value: String(describing: value)))
        }
        let status = HTTPResponse.Status(code: http.statusCode)
        return HTTPReply(
            response: HTTPResponse(status: status, headerFields: fields), body: received.body, url: http.url ?? url,
            isBodyTruncated: received.truncated)
    }

    /// Runs a data task on the client's own session, whose delegate collects the body (stopping at
    /// `limit`), cancelling the task when the calling task is cancelled.
    private func perform(
        _ urlRequest: URLRequest, limit: Int?, truncates: Bool, receiver: BodyReceiver, state: Locked<RequestState>
    ) async throws -> Received {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let task = session.dataTask(with: urlRequest)
                receiver.register(task, limit: limit, truncates: truncates, continuation: continuation)
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

/// What one task received: the response, its body, and whether the body was cut at the limit.
private struct Received: Sendable {
    var body: Data
    var response: URLResponse
    var truncated = false
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
        /// Whether a body over the limit is cut there (and the response returned) rather than refused.
        var truncates: Bool
        var body = Data()
        var response: URLResponse?
        var tooLarge: BodyTooLarge?
        /// Set once the body was cut at the limit (``truncates``) and the task cancelled for it.
        var truncated = false
        var continuation: CheckedContinuation<Received, any Error>
    }

    private let transfers = Locked([Int: Transfer]())

    func register(_ task: URLSessionTask, limit: Int?, truncates: Bool, continuation: CheckedContinuation<Received, any Error>) {
        transfers.withLock { $0[task.taskIdentifier] = Transfer(limit: limit, truncates: truncates, continuation: continuation) }
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
                if transfer.truncates {
                    transfer.truncated = true
                } else {
                    transfer.tooLarge = BodyTooLarge(limit: limit, received: 0, contentLength: length)
                }
            }
            transfers[dataTask.taskIdentifier] = transfer
            return transfer.tooLarge != nil || transfer.truncated
        }
        completionHandler(tooLong ? .cancel : .allow)
        // FoundationNetworking ignores the disposition; cancelling the task works everywhere.
        if tooLong { dataTask.cancel() }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let overLimit = transfers.withLock { transfers -> Bool in
            let id = dataTask.taskIdentifier
            guard let transfer = transfers[id], transfer.tooLarge == nil, !transfer.truncated else { return false }
            let received = transfer.body.count + data.count
            if let limit = transfer.limit, received > limit, transfer.truncates {
                // Stop here: keep the body up to the limit, and refuse the rest.
                transfers[id]?.body.append(data.prefix(limit - transfer.body.count))
                transfers[id]?.truncated = true
                return true
            }
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
        } else if transfer.truncated, let response = transfer.response {
            // Cancelled by the client for the cut: the error is that cancellation.
            transfer.continuation.resume(returning: Received(body: transfer.body, response: response, truncated: true))
        } else if let error {
            transfer.continuation.resume(throwing: error)
        } else if let response = task.response ?? transfer.response {
            transfer.continuation.resume(returning: Received(body: transfer.body, response: response))
        } else {
            transfer.continuation.resume(throwing: URLError(.badServerResponse))
        }
    }
}

/// The task delegate for a session passed in: counts body bytes where the platform reports them to a
/// task delegate, and cancels the task once they pass the limit (keeping the body up to the limit when
/// it `truncates`). No authentication-challenge method.
private final class BodyLimitWatcher: NSObject, URLSessionDataDelegate, Sendable {
    private struct State: Sendable {
        var count = 0
        var exceeded: BodyTooLarge?
        var body = Data()
        var truncated: Received?
    }

    private let limit: Int?
    private let truncates: Bool
    private let received = Locked(State())

    init(limit: Int?, truncates: Bool) {
        self.limit = limit
        self.truncates = truncates
    }

    /// Set once the body passed the limit (and the task was cancelled for it).
    var exceeded: BodyTooLarge? { received.withLock { $0.exceeded } }
    /// The response with its body cut at the limit, once the body passed it when the watcher truncates
    /// (and the task was cancelled for it).
    var truncated: Received? { received.withLock { $0.truncated } }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        guard let limit else { return }
        let response = dataTask.response
        let stop = received.withLock { state -> Bool in
            guard state.exceeded == nil, state.truncated == nil else { return false }
            let before = state.count
            state.count += data.count
            if truncates {
                state.body.append(data.prefix(max(0, limit - before)))
                if state.count > limit, let response {
                    state.truncated = Received(body: state.body, response: response, truncated: true)
                }
                return state.truncated != nil
            }
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
#endif
