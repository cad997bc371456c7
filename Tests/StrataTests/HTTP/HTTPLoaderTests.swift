import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

/// Unit tests of the HTTP loader against a stub client; the real-server tests are in
/// StrataIntegrationTests.
@Suite("HTTPLoader")
struct HTTPLoaderTests {
    let url = URL(string: "https://api.example.com/feed?token=secret")!

    @Test(arguments: [200, 201, 204, 299])
    func success_returnsTheResponseAndReportsRemoteOrigin(status: Int) async throws {
        let client = StubHTTPClient(.success(HTTPReply(url: url, statusCode: status, body: Data("[]".utf8))))
        let served = try await HTTPLoader(url: url, transport: client).loadServed()
        #expect(served.value.status.code == status)
        #expect(served.provenance.origin == .remote)
        #expect(served.provenance.age == .zero)
    }

    @Test(arguments: [199, 304, 400, 404, 429, 500, 503])
    func non2xx_throwsStatusErrorWithCodeAndURL(status: Int) async throws {
        let client = StubHTTPClient(.success(HTTPReply(url: url, statusCode: status, body: Data("nope".utf8))))
        await #expect {
            try await HTTPLoader(url: url, transport: client).load()
        } throws: { error in
            guard let error = error as? HTTPError else { return false }
            return error.statusCode == status && error.url == url && error.description.contains("HTTP \(status)")
        }
    }

    @Test func errorDescriptions_redactQueryValuesAndCredentials() {
        let secretURL = URL(string: "https://user:pass@api.example.com/feed?token=secret&page=2")!
        let error = HTTPError.status(code: 500, url: secretURL, headerFields: [:], body: Data())
        #expect(!error.description.contains("secret"))
        #expect(!error.description.contains("pass"))
        #expect(error.description.contains("api.example.com/feed?token=***&page=***"))
    }

    @Test func descriptions_redactTokensInThePath() {
        let url = URL(string: "https://api.example.com/v1/magic/ghp_16C7e42F292c6912E7710c838347Ae178B4a/login")!
        #expect(Redaction.redactedString(for: url) == "https://api.example.com/v1/magic/***/login")
        #expect(!HTTPLoader(url: url).chainSummary.contains("ghp_"))
        let error = HTTPError.status(code: 401, url: url, headerFields: [:], body: Data())
        #expect(!error.description.contains("ghp_16C7"))
    }

    @Test func undecodableBody_throwsDecodingErrorWithTheURL() async throws {
        let client = StubHTTPClient(.success(HTTPReply(url: url, statusCode: 200, body: Data("[{\"id\":1}]".utf8))))
        await #expect {
            try await HTTPLoader(url: url, transport: client).decoding([Item].self).load()
        } throws: { error in
            guard case HTTPError.decoding(let failedURL, let type, _) = error else { return false }
            return failedURL == url && type == "Array<Item>" && "\(error)".contains("missing key 'name'")
        }
    }

    @Test func get_buildsTheRequestFromTheInput() async throws {
        let client = StubHTTPClient(.success(HTTPReply(url: url, statusCode: 200, body: Data())))
        let sut = HTTPLoader.get(headerFields: [.accept: "application/json"], timeout: .seconds(5), transport: client) { (id: Int) in
            URL(string: "https://api.example.com/posts/\(id)")!
        }
        _ = try await sut.load(42)
        let request = try #require(client.requests.first)
        #expect(request.method == "GET")
        #expect(request.url.absoluteString == "https://api.example.com/posts/42")
        #expect(request.headers["Accept"] == "application/json")
        #expect(request.timeout == .seconds(5))
    }

    @Test func postJSON_sendsTheInputAsAJSONBody() async throws {
        let client = StubHTTPClient(.success(HTTPReply(url: url, statusCode: 201, body: Data(#"{"id":5,"name":"new"}"#.utf8))))
        let sut = HTTPLoader<Item>.postJSON(to: URL(string: "https://api.example.com/items")!, transport: client).decoding(Item.self)

        #expect(try await sut.load(Item(id: 0, name: "new")) == Item(id: 5, name: "new"))
        let request = try #require(client.requests.first)
        #expect(request.method == "POST")
        #expect(request.headers["Content-Type"] == "application/json")
        #expect(try JSONDecoder().decode(Item.self, from: request.body ?? Data()) == Item(id: 0, name: "new"))
    }

    @Test func transportFailure_passesThroughTyped() async throws {
        let client = StubHTTPClient(.failure(HTTPError.transport(url: url, reason: "could not connect", underlying: nil)))
        await #expect {
            try await HTTPLoader(url: url, transport: client).load()
        } throws: { error in
            guard case HTTPError.transport(let failedURL, "could not connect", _) = error else { return false }
            return failedURL == url
        }
    }

    @Test func responseFields_areMatchedCaseInsensitivelyAndRepeatedFieldsAreKept() {
        let reply = HTTPReply(url: url, statusCode: 200, headers: ["etag": "\"v1\""])
        #expect(reply.headerFields[.eTag] == "\"v1\"")
        #expect(reply.headerFields[HTTPField.Name("ETAG")!] == "\"v1\"")
        #expect(reply.headerFields[.lastModified] == nil)

        var repeated = HTTPFields()
        repeated.append(HTTPField(name: .setCookie, value: "a=1"))
        repeated.append(HTTPField(name: HTTPField.Name("Set-Cookie")!, value: "b=2"))
        #expect(repeated[values: .setCookie] == ["a=1", "b=2"])
    }
}

/// Answers every request with one result and records the requests.
final class StubHTTPClient: HTTPTransport, Sendable {
    private let result: Result<HTTPReply, any Error>
    private let recorded = Locked<[SentRequest]>([])

    init(_ result: Result<HTTPReply, any Error>) { self.result = result }

    var requests: [SentRequest] { recorded.withLock { $0 } }

    func send(_ request: HTTPRequest, body: Data?, options: HTTPRequestOptions) async throws -> HTTPReply {
        let request = SentRequest(request: request, body: body, options: options)
        recorded.withLock { $0.append(request) }
        return try result.get()
    }
}

@Suite("HTTPError.neverReachedTheServer")
struct HTTPErrorNeverReachedTests {
    static let url = URL(string: "https://api.example.com/posts")!

    static let neverSentErrors: [HTTPError] = [
        .transport(url: url, reason: "could not connect (connection refused)", underlying: nil),
        .transport(url: url, reason: "host not found", underlying: nil),
        .transport(url: url, reason: "not connected to the internet", underlying: nil),
        .transport(url: url, reason: "x", underlying: URLError(.cannotConnectToHost)),
        .transport(url: url, reason: "x", underlying: URLError(.dnsLookupFailed)),
        .transport(url: url, reason: "x", underlying: URLError(.notConnectedToInternet)),
        .transport(url: url, reason: "x", underlying: URLError(.cannotFindHost)),
        .transport(url: url, reason: "x", underlying: URLError(.dataNotAllowed)),
        .transport(url: url, reason: "x", underlying: POSIXError(.ECONNREFUSED)),
        .transport(url: url, reason: "x", underlying: POSIXError(.ENETUNREACH)),
    ]

    /// A timeout or a connection lost mid-exchange may have reached the server; so may any answer.
    static let mayHaveReachedErrors: [HTTPError] = [
        .transport(url: url, reason: "timed out", underlying: nil),
        .transport(url: url, reason: "connection lost", underlying: nil),
        .transport(url: url, reason: "could not connect", underlying: URLError(.timedOut)),
        .transport(url: url, reason: "x", underlying: URLError(.networkConnectionLost)),
        .transport(url: url, reason: "x", underlying: POSIXError(.ECONNRESET)),
        .status(code: 503, url: url, headerFields: [:], body: Data()),
    ]

    @Test("a request refused, without a host or without a network never reached a server", arguments: neverSentErrors)
    func neverSent(_ error: HTTPError) {
        #expect(error.neverReachedTheServer, "\(error)")
    }

    @Test("a timeout, a lost connection or an answer may have reached it", arguments: mayHaveReachedErrors)
    func mayHaveReached(_ error: HTTPError) {
        #expect(!error.neverReachedTheServer, "\(error)")
    }
}
