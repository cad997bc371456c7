import Foundation
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
        let client = StubHTTPClient(.success(HTTPResponse(url: url, statusCode: status, body: Data("[]".utf8))))
        let served = try await HTTPLoader(url: url, client: client).loadServed()
        #expect(served.value.statusCode == status)
        #expect(served.provenance.origin == .remote)
        #expect(served.provenance.age == .zero)
    }

    @Test(arguments: [199, 304, 400, 404, 429, 500, 503])
    func non2xx_throwsStatusErrorWithCodeAndURL(status: Int) async throws {
        let client = StubHTTPClient(.success(HTTPResponse(url: url, statusCode: status, body: Data("nope".utf8))))
        await #expect {
            try await HTTPLoader(url: url, client: client).load()
        } throws: { error in
            guard let error = error as? HTTPError else { return false }
            return error.statusCode == status && error.url == url && error.description.contains("HTTP \(status)")
        }
    }

    @Test func errorDescriptions_redactQueryValuesAndCredentials() {
        let secretURL = URL(string: "https://user:pass@api.example.com/feed?token=secret&page=2")!
        let error = HTTPError.status(code: 500, url: secretURL, headers: [:], body: Data())
        #expect(!error.description.contains("secret"))
        #expect(!error.description.contains("pass"))
        #expect(error.description.contains("api.example.com/feed?token=***&page=***"))
    }

    @Test func undecodableBody_throwsDecodingErrorWithTheURL() async throws {
        let client = StubHTTPClient(.success(HTTPResponse(url: url, statusCode: 200, body: Data("[{\"id\":1}]".utf8))))
        await #expect {
            try await HTTPLoader(url: url, client: client).decoding([Item].self).load()
        } throws: { error in
            guard case HTTPError.decoding(let failedURL, let type, _) = error else { return false }
            return failedURL == url && type == "Array<Item>" && "\(error)".contains("missing key 'name'")
        }
    }

    @Test func get_buildsTheRequestFromTheInput() async throws {
        let client = StubHTTPClient(.success(HTTPResponse(url: url, statusCode: 200, body: Data())))
        let sut = HTTPLoader.get(headers: ["Accept": "application/json"], timeout: .seconds(5), client: client) { (id: Int) in
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
        let client = StubHTTPClient(.success(HTTPResponse(url: url, statusCode: 201, body: Data(#"{"id":5,"name":"new"}"#.utf8))))
        let sut = HTTPLoader<Item>.postJSON(to: URL(string: "https://api.example.com/items")!, client: client).decoding(Item.self)

        #expect(try await sut.load(Item(id: 0, name: "new")) == Item(id: 5, name: "new"))
        let request = try #require(client.requests.first)
        #expect(request.method == "POST")
        #expect(request.headers["Content-Type"] == "application/json")
        #expect(try JSONDecoder().decode(Item.self, from: request.body ?? Data()) == Item(id: 0, name: "new"))
    }

    @Test func transportFailure_passesThroughTyped() async throws {
        let client = StubHTTPClient(.failure(HTTPError.transport(url: url, reason: "could not connect", underlying: nil)))
        await #expect {
            try await HTTPLoader(url: url, client: client).load()
        } throws: { error in
            guard case HTTPError.transport(let failedURL, "could not connect", _) = error else { return false }
            return failedURL == url
        }
    }

    @Test func responseHeaders_areMatchedCaseInsensitively() {
        let response = HTTPResponse(url: url, statusCode: 200, headers: ["ETag": "\"v1\""])
        #expect(response.header("etag") == "\"v1\"")
        #expect(response.header("ETAG") == "\"v1\"")
        #expect(response.header("Last-Modified") == nil)
    }
}

/// Answers every request with one result and records the requests.
final class StubHTTPClient: HTTPClient, Sendable {
    private let result: Result<HTTPResponse, any Error>
    private let recorded = Locked<[HTTPRequest]>([])

    init(_ result: Result<HTTPResponse, any Error>) { self.result = result }

    var requests: [HTTPRequest] { recorded.withLock { $0 } }

    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        recorded.withLock { $0.append(request) }
        return try result.get()
    }
}
