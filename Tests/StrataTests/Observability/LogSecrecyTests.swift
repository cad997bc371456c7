import Foundation
import InMemoryTracing
import Testing
import Tracing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

/// What a request's secrets must never reach: error bodies kept by `HTTPError.status`, span
/// attributes, events, statuses and recorded errors, and log lines.
@Suite("log secrecy: error bodies and traces")
struct ErrorBodySecrecyTests {
    static let secrets = ["hunter2-pass", "TOKEN-abcdef123", "Bearer-ZZZ-secret-99", "cookie-value-4242", "key-987654321"]
    static let url = URL(string: "https://alice:hunter2-pass@api.example.com/feed?token=TOKEN-abcdef123&page=2")!
    static let headers = ["Authorization": "Bearer Bearer-ZZZ-secret-99", "Cookie": "sid=cookie-value-4242", "X-API-Key": "key-987654321"]
    /// An error page that repeats everything the request carried.
    static let echo = """
        denied: token TOKEN-abcdef123 for alice (password hunter2-pass, basic \(Data("alice:hunter2-pass".utf8).base64EncodedString())) \
        with Bearer-ZZZ-secret-99 and cookie-value-4242 and key-987654321; page 2
        """

    static func leaks(_ text: String) -> [String] {
        (secrets + [Data("alice:hunter2-pass".utf8).base64EncodedString()]).filter { text.contains($0) }
    }

    static func failingClient() -> StubHTTPClient {
        StubHTTPClient(.success(HTTPReply(
            url: url, statusCode: 401, headers: ["Set-Cookie": "sid=cookie-value-4242"], body: Data(echo.utf8))))
    }

    @Test func theStatusErrorsBody_hasTheRequestsSecretsMasked_andKeepsTheRest() async throws {
        let loader = HTTPLoader(url: Self.url, headerFields: fields(Self.headers), transport: Self.failingClient())
        let error = try await #require(throws: HTTPError.self, "expected a 401") { try await loader.load() }
        guard case .status(401, _, _, let body) = error else {
            Issue.record("expected a 401, got \(error)")
            return
        }
        let text = String(decoding: body, as: UTF8.self)
        #expect(Self.leaks(text).isEmpty, "\(text)")
        #expect(text.hasPrefix("denied: token *** for alice (password ***, basic ***) with *** and *** and ***; page 2"), "\(text)")
    }

    @Test func bodiesWithoutSecrets_areKeptByteForByte() async throws {
        let body = Data("{\"error\":\"rate limited\",\"page\":2}".utf8)
        let client = StubHTTPClient(.success(HTTPReply(url: Self.url, statusCode: 429, body: body)))
        await #expect {
            _ = try await HTTPLoader(url: Self.url, headerFields: fields(Self.headers), transport: client).load()
        } throws: { error in
            if case HTTPError.status(429, _, _, let kept) = error { return kept == body }
            return false
        }
    }

    @Test func aTracedAndLoggedChain_recordsNoSecret() async throws {
        let tracer = InMemoryTracer()
        let capture = LogCapture()
        let sut = HTTPLoader(url: Self.url, headerFields: fields(Self.headers), transport: Self.failingClient())
            .retrying(.never)
            .logged(to: capture.logger)
            .traced("load feed", tracer: tracer)
        await #expect(throws: HTTPError.self) { try await sut.load() }

        let span = try #require(tracer.finishedSpans.first)
        var recorded = [
            span.operationName, span.status?.message ?? "",
            "\(span.errors.map { "\($0.error)" })", "\(span.events.map { "\($0.name) \($0.attributes)" })",
        ]
        span.attributes.forEach { name, value in recorded.append("\(name)=\(value)") }
        recorded += capture.entries.map { $0.line() }
        let text = recorded.joined(separator: "\n")
        #expect(span.status?.code == .error)
        #expect(text.contains("HTTP 401 from https://api.example.com/feed?token=***&page=***"), "\(text)")
        #expect(Self.leaks(text).isEmpty, "leaked \(Self.leaks(text)) in\n\(text)")
    }

    @Test func bodyTooLarge_describesTheLayerAndTheLimit_withoutSecrets() {
        let declared = HTTPError.bodyTooLarge(url: Self.url, limit: 1024, received: 0, contentLength: 5000)
        let counted = HTTPError.bodyTooLarge(url: Self.url, limit: 1024, received: 1300, contentLength: nil)
        #expect("\(declared)" == "HTTP response from https://api.example.com/feed?token=***&page=*** is larger than the limit of 1024 bytes: its Content-Length is 5000 bytes, so none of it was read")
        #expect("\(counted)" == "HTTP response from https://api.example.com/feed?token=***&page=*** is larger than the limit of 1024 bytes: reading stopped after 1300 bytes")
        #expect(declared.url == Self.url)
        #expect(!RetryPolicy.isTransient(counted))
    }

    @Test func theLoader_refusesABodyOverTheLimit_evenFromAClientThatDoesNotCheck() async throws {
        let client = StubHTTPClient(.success(HTTPReply(url: Self.url, statusCode: 200, body: Data(count: 2048))))
        await #expect {
            _ = try await HTTPLoader(url: Self.url, maxBodyBytes: 2047, transport: client).load()
        } throws: { error in
            if case HTTPError.bodyTooLarge(_, 2047, 2048, nil) = error { return true }
            return false
        }
        #expect(client.requests.first?.maxBodyBytes == 2047, "the limit travels with the request")
        #expect(try await HTTPLoader(url: Self.url, maxBodyBytes: 2048, transport: client).load().body.count == 2048)
    }
}

/// The byte scan that decides whether a redaction pattern needs to run at all: it must never miss a
/// needle (a miss would leave a secret in place), whatever the case.
@Suite("Redaction pre-check")
struct RedactionPrecheckTests {
    @Test(arguments: [
        ("Authorization: Bearer abc", "bearer", true),
        ("AUTHORIZATION=x", "authorization", true),
        ("Set-Cookie: a=b", "cookie", true),
        ("X-API-KEY: k", "api-key", true),
        ("HTTPS://host/x", "://", true),
        ("token EYJhbGci.x.y", "eyj", true),
        ("fresh local", "bearer", false),
        ("bear", "bearer", false),
        ("", "://", false),
        ("ünïcødé Bearer", "bearer", true),
    ])
    func findsNeedleInAnyCase(text: String, needle: String, expected: Bool) {
        let found: Bool
        switch needle {
        case "bearer": found = Redaction.asciiContainsIgnoringCase(text, "bearer")
        case "authorization": found = Redaction.asciiContainsIgnoringCase(text, "authorization")
        case "cookie": found = Redaction.asciiContainsIgnoringCase(text, "cookie")
        case "api-key": found = Redaction.asciiContainsIgnoringCase(text, "api-key")
        case "://": found = Redaction.asciiContainsIgnoringCase(text, "://")
        default: found = Redaction.asciiContainsIgnoringCase(text, "eyj")
        }
        #expect(found == expected)
        #expect(found == text.lowercased().contains(needle), "agrees with Foundation's lowercased search")
    }

    /// `redactingSecrets` returns a text at once when it holds none of the bytes every pattern needs
    /// (`:`, `?`, `&`, `=`, `b`, `j`, in any case); each secret below reaches its pattern through
    /// exactly one of them.
    @Test(arguments: [
        ("token eyJhbGciOi.eyJzdWIi.sig", "token ***"),
        ("BEARER abc.def", "Bearer ***"),
        ("https://u:p@h/x", "https://***@h/x"),
        ("fresh local", "fresh local"),
        ("MemoryStore [max age 1d]", "MemoryStore [max age 1d]"),
    ])
    func namesWithoutTriggerBytesAreKept_secretsAreNot(text: String, redacted: String) {
        #expect(Redaction.redactingSecrets(in: text) == redacted)
    }
}
