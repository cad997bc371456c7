#if AsyncHTTPClient
import AsyncHTTPClient
import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import Strata

/// An ``Strata/HTTPTransport`` on AsyncHTTPClient (SwiftNIO), for servers. Opt in with the package
/// trait `AsyncHTTPClient` and the product `StrataAsyncHTTPClient`:
///
/// ```swift
/// .package(url: "https://github.com/strata-swift/strata", from: "1.0.0", traits: ["AsyncHTTPClient"]),
/// // target: .product(name: "StrataAsyncHTTPClient", package: "strata")
///
/// let feed = HTTPLoader(url: feedURL, transport: AsyncHTTPTransport()).decoding([FeedItem].self)
/// ```
///
/// It keeps the ``Strata/HTTPTransport`` contract as `URLSessionHTTPClient` does, with the
/// same ``Strata/HTTPError`` cases:
/// - every response is returned whatever its status, with its header fields as received (repeated
///   fields stay separate);
/// - no response (connection refused, reset, TLS failure, DNS) and the timeout throw
///   ``Strata/HTTPError/transport(url:reason:underlying:)``;
/// - the body limit (``Strata/HTTPRequestOptions/maxBodyBytes``, else ``maxBodyBytes``) is enforced
///   as the body arrives: a `Content-Length` above it fails before any of the body is read, and a
///   body of unknown length is read chunk by chunk and dropped once it passes the limit
///   (``Strata/HTTPError/bodyTooLarge(url:limit:received:contentLength:)``), or cut there with
///   ``Strata/HTTPRequestOptions/OversizedBody/truncate``; either way the request is failed and its
///   connection closed, so the rest of the body is never downloaded;
/// - cancelling the calling task cancels the request and throws `CancellationError`.
///
/// ``Strata/HTTPRequestOptions/timeout`` bounds the whole exchange (connection, head and body), as
/// AsyncHTTPClient's deadline does; without one, ``defaultTimeout`` applies.
///
/// A server that cannot be reached fails the request at once: the default client (``sharedClient``)
/// does not retry a refused connection, which AsyncHTTPClient's own `HTTPClient.shared` does until
/// the deadline. An offline-first chain learns "unreachable" in a round trip, not after the whole
/// timeout, and retries stay the chain's decision (``Strata/Loader/retrying(_:)``).
public struct AsyncHTTPTransport: HTTPTransport {
    /// The body limit of transports created without one: 64 MiB, as `URLSessionHTTPClient`'s.
    public static let defaultMaxBodyBytes = 64 * 1024 * 1024

    /// The AsyncHTTPClient that sends the requests (its lifecycle is the caller's).
    public let client: HTTPClient
    /// The largest body accepted when a request does not set ``Strata/HTTPRequestOptions/maxBodyBytes``;
    /// `nil`: no limit.
    public let maxBodyBytes: Int?
    /// The deadline of requests that set no ``Strata/HTTPRequestOptions/timeout``.
    public let defaultTimeout: Duration

    /// The client transports use unless given one: AsyncHTTPClient's singleton configuration on its
    /// default event loop group, except that a connection that cannot be established fails its
    /// requests at once (`retryConnectionEstablishment` off) instead of being retried until their
    /// deadline. It lives as long as the process; do not shut it down.
    public static let sharedClient: HTTPClient = {
        var configuration = HTTPClient.Configuration.singletonConfiguration
        configuration.connectionPool.retryConnectionEstablishment = false
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }()

    /// A transport on `client` (``sharedClient`` unless you pass one you run; a client of your own
    /// keeps its configuration, connection retries included).
    public init(
        client: HTTPClient = AsyncHTTPTransport.sharedClient, maxBodyBytes: Int? = AsyncHTTPTransport.defaultMaxBodyBytes,
        defaultTimeout: Duration = .seconds(60)
    ) {
        self.client = client
        self.maxBodyBytes = maxBodyBytes
        self.defaultTimeout = defaultTimeout
    }

    public func send(_ request: HTTPRequest, body: Data?, options: HTTPRequestOptions) async throws -> HTTPReply {
        guard let url = request.url else {
            throw HTTPError.invalidRequest(url: URL(fileURLWithPath: request.path ?? "/"), reason: "the request has no absolute URL")
        }
        var outgoing = HTTPClientRequest(url: url.absoluteString)
        outgoing.method = HTTPMethod(rawValue: request.method.rawValue)
        for field in request.headerFields {
            outgoing.headers.add(name: field.name.rawName, value: field.value)
        }
        if let body { outgoing.body = .bytes(ByteBuffer(bytes: body)) }
        let limit = options.maxBodyBytes ?? maxBodyBytes
        let timeout = options.timeout ?? defaultTimeout
        let deadline = NIODeadline.now() + .nanoseconds(Int64(clamping: timeout.components.seconds) * 1_000_000_000
            + timeout.components.attoseconds / 1_000_000_000)
        try Task.checkCancellation()

        do {
            let response = try await client.execute(outgoing, deadline: deadline)
            var fields = HTTPFields()
            for (name, value) in response.headers {
                guard let fieldName = HTTPField.Name(name) else { continue }
                fields.append(HTTPField(name: fieldName, value: value))
            }
            let declared = response.headers.first(name: "content-length").flatMap { Int($0) }
            let head = HTTPResponse(status: HTTPResponse.Status(code: Int(response.status.code)), headerFields: fields)
            let truncates = options.oversizedBody == .truncate
            // The body's iterator exists before any early exit: when it goes away unfinished (this
            // function returns or throws), AsyncHTTPClient fails the request and closes the
            // connection, so a refused or cut body is not downloaded on. A body that was never
            // iterated is not always cancelled at once (the server may send the whole declared body
            // after this check has thrown).
            var chunks = response.body.makeAsyncIterator()
            if let limit, let declared, declared > limit {
                if truncates { return HTTPReply(response: head, body: Data(), url: response.url ?? url, isBodyTruncated: true) }
                throw HTTPError.bodyTooLarge(url: url, limit: limit, received: 0, contentLength: declared)
            }
            var data = Data()
            while let chunk = try await chunks.next() {
                let received = data.count + chunk.readableBytes
                if let limit, received > limit {
                    // Leaving the loop drops the rest of the body: the connection is closed.
                    if truncates {
                        data.append(contentsOf: chunk.readableBytesView.prefix(limit - data.count))
                        return HTTPReply(response: head, body: data, url: response.url ?? url, isBodyTruncated: true)
                    }
                    throw HTTPError.bodyTooLarge(url: url, limit: limit, received: received, contentLength: declared)
                }
                data.append(contentsOf: chunk.readableBytesView)
            }
            return HTTPReply(response: head, body: data, url: response.url ?? url)
        } catch let error as HTTPError {
            throw error
        } catch {
            if Task.isCancelled || error is CancellationError || (error as? HTTPClientError) == .cancelled {
                throw CancellationError()
            }
            throw HTTPError.transport(url: url, reason: Self.reason(for: error), underlying: error)
        }
    }

    /// A short reason for a failure, in the words `URLSessionHTTPClient` uses.
    static func reason(for error: any Error) -> String {
        if let clientError = error as? HTTPClientError {
            switch clientError {
            case .deadlineExceeded, .readTimeout, .writeTimeout, .connectTimeout, .tlsHandshakeTimeout,
                 .getConnectionFromPoolTimeout:
                return "timed out"
            case .remoteConnectionClosed:
                return "connection lost"
            default:
                return "\(clientError)"
            }
        }
        let text = String(describing: error)
        if text.localizedCaseInsensitiveContains("refused") { return "could not connect (connection refused)" }
        if ["SSL", "TLS", "certificate"].contains(where: { text.localizedCaseInsensitiveContains($0) }) {
            return "TLS failed: \(text)"
        }
        return text
    }
}
#endif
