import Foundation
@_spi(StrataInternals) import Strata

/// An ``HTTPTransport`` that counts the requests it sends (the demo shows whether the network was used).
public final class CountingHTTPClient: HTTPTransport, Sendable {
    private let base: any HTTPTransport
    private let count = Locked(0)

    public init(_ base: any HTTPTransport = URLSessionHTTPClient.shared) {
        self.base = base
    }

    /// Requests sent so far, answered or not.
    public var requestCount: Int { count.withLock { $0 } }

    public func send(_ request: HTTPRequest, body: Data?, options: HTTPRequestOptions) async throws -> HTTPReply {
        count.withLock { $0 += 1 }
        return try await base.send(request, body: body, options: options)
    }
}
