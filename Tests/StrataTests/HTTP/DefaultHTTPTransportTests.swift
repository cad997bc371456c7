import Foundation
import HTTPTypes
import Testing
@testable @_spi(StrataInternals) import Strata

/// `swift test` builds the default traits (URLSession on); CI's ThreadSanitizer step builds with
/// `--traits SQLite`, URLSession off, and runs this suite there too.
@Suite("DefaultHTTPTransport")
struct DefaultHTTPTransportTests {
    static let url = URL(string: "http://127.0.0.1:1/feed")!

    @Test func withoutATransport_everyRequestFails_namingTheFix() async throws {
        let error = try await #require(throws: HTTPError.self) {
            try await MissingHTTPTransport().send(
                HTTPRequest.strata(method: .get, url: Self.url, headerFields: [:]), body: nil, options: HTTPRequestOptions())
        }
        guard case .invalidRequest(let url, let reason) = error else {
            Issue.record("expected invalidRequest, got \(error)")
            return
        }
        #expect(url == Self.url)
        #expect(reason.contains("URLSession trait"))
        #expect(reason.contains("pass transport:"))
    }

    @Test func theDefault_isURLSession_withTheTrait_andTheMissingTransport_without() async throws {
        #if URLSession
        #expect(DefaultHTTPTransport.shared is URLSessionHTTPClient)
        #else
        #expect(DefaultHTTPTransport.shared is MissingHTTPTransport)
        await #expect(throws: HTTPError.self) { try await HTTPLoader(url: Self.url).load() }
        #endif
    }
}
