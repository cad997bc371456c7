import Foundation
import Testing
@_spi(StrataInternals) import Strata
@testable import StrataCLI
import DemoServer
import StrataTesting

/// The secrets a request carries in the tests below; none may appear in any log line, error message
/// or report.
enum Secrets {
    static let password = "pa55-SECRET-w0rd"
    static let token = "TOKEN-SECRET-1234"
    static let apiKey = "APIKEY-SECRET-5678"
    static let bearer = "BEARER-SECRET-abcd"
    static let cookie = "COOKIE-SECRET-efgh"
    static let setCookie = "SETCOOKIE-SECRET-ijkl"
    /// `alice:pa55-SECRET-w0rd` as the `Authorization: Basic` value the transport sends.
    static let basic = Data("alice:\(password)".utf8).base64EncodedString()

    static let all = [password, token, apiKey, bearer, cookie, setCookie, basic]

    /// `http://alice:…@127.0.0.1:port/feed?token=…&api_key=…&page=2`.
    static func url(_ server: DemoServer) -> URL {
        URL(string: "http://alice:\(password)@\(server.host):\(server.port)/feed?token=\(token)&api_key=\(apiKey)&page=2")!
    }

    static let headers: HTTPFields = [.authorization: "Bearer \(bearer)", .cookie: "session=\(cookie)"]

    /// The secrets found in `text` (none, when all is well).
    static func leaked(in text: String) -> [String] {
        all.filter { text.contains($0) }
    }
}

/// Logs, error messages and `strata fetch` reports never contain credentials, tokens, cookies or
/// `Authorization` values — not even when the server echoes them back in an error page.
@Suite("log secrecy", .timeLimit(.minutes(3)))
struct LogSecrecyTests {
    /// Every line captured, with its metadata.
    static func text(_ capture: LogCapture) -> String {
        capture.entries.map { $0.line() }.joined(separator: "\n")
    }

    @Test(arguments: [false, true])
    func aFullChain_neverLogsTheRequestsSecrets(sendsHeaders: Bool) async throws {
        let directory = try TemporaryDirectory(prefix: "strata-secrecy")
        let capture = LogCapture()
        let clock = ManualClock()
        try await withDemoServer { server in
            server.faults = .init(setCookie: "sid=\(Secrets.setCookie); HttpOnly", echoRequestInErrors: true)
            let url = Secrets.url(server)
            let key = url.absoluteString
            let store = FileStore<[FeedItem]>(directory: directory.url, codec: JSONCodec<[FeedItem]>(), logger: capture.logger)
            let remote = HTTPLoader(url: url, headerFields: sendsHeaders ? Secrets.headers : [:])
                .decoding([FeedItem].self)
                .retrying(.constant(attempts: 2, delay: .seconds(1))).environment(\.clock, clock)
                .writingThrough(in: store, key: key).environment(LoadEnvironment(now: clock.wallClock, logger: capture.logger))
            let chain = store.loader(key: key, freshness: .maxAge(.seconds(60))).environment(\.now, clock.wallClock)
                .fallingBack(to: remote)
                .fallingBack(to: store.loader(key: key, freshness: .any).environment(\.now, clock.wallClock))
                .logged(to: capture.logger)

            // A successful load: written to the cache under the URL as key (events name the key).
            let first = try await chain.loadServed()
            #expect(first.value == DemoData.feed)
            // Then the server fails with an error page that echoes the request, and sets a cookie.
            clock.advance(by: .seconds(120))
            server.faults.status = 503
            let load = Task { try await chain.loadServed() }
            try await clock.waitForSleepers(count: 1)
            clock.advance(by: .seconds(1))
            let second = try await load.value
            #expect(second.value == DemoData.feed)
            #expect(second.provenance.origin == .disk)
            #expect(second.events.contains { if case .retrying = $0 { true } else { false } })

            // The server did receive the secrets (so the test could catch a leak) …
            let received = server.requests.last
            if sendsHeaders {
                #expect(received?.headers["Authorization"] == "Bearer \(Secrets.bearer)")
                #expect(received?.headers["Cookie"] == "session=\(Secrets.cookie)")
            }
            // … and its error page echoed them back.
            let failure = try #require(second.events.compactMap { event -> HTTPError? in
                if case .tierFailed(_, let error as HTTPError) = event { return error }
                return nil
            }.first)
            guard case .status(503, _, let headers, let body) = failure else {
                Issue.record("expected a 503, got \(failure)")
                return
            }
            #expect(headers[.setCookie]?.contains(Secrets.setCookie) == true)
            #expect(Secrets.leaked(in: String(decoding: body, as: UTF8.self)).isEmpty, "the error keeps the echoed secrets masked")
            #expect(String(decoding: body, as: UTF8.self).contains("you asked for /feed?token=***"))
            #expect(received?.headers["Cookie"]?.contains(Secrets.setCookie) != true, "the client keeps no cookie jar")

            // (`Served.events` are the caller's own data and name the key as given; every path that
            // logs or prints them — `logged`, `traced`, `strata fetch` — redacts them, as checked here.)
            let everything = [Self.text(capture), "\(failure)", String(reflecting: failure), "\(chain)"].joined(separator: "\n")
            #expect(capture.entries.count > 4)
            #expect(Secrets.leaked(in: everything).isEmpty, "leaked: \(Secrets.leaked(in: everything))\n\(everything)")
        }
    }

    @Test func errorsOfEveryKind_describeTheURLWithoutItsSecrets() async throws {
        try await withDemoServer { server in
            let url = Secrets.url(server)
            var descriptions: [String] = []
            for faults in [DemoServer.Faults(status: 500, echoRequestInErrors: true), .init(truncateBodies: true),
                           .init(oversizedBody: 1 << 20, declaresOversizedLength: true), .init(resetMidBody: true)] {
                server.faults = faults
                do {
                    _ = try await HTTPLoader(url: url, headerFields: Secrets.headers, maxBodyBytes: 1024, transport: URLSessionHTTPClient())
                        .decoding([FeedItem].self).load()
                    Issue.record("expected \(faults) to fail")
                } catch {
                    descriptions.append("\(error)")
                }
            }
            await server.goOffline()
            do { _ = try await HTTPLoader(url: url, headerFields: Secrets.headers).load() } catch { descriptions.append("\(error)") }

            #expect(descriptions.count == 5)
            for description in descriptions {
                #expect(description.contains("/feed?token=***&api_key=***&page=***"), "\(description)")
                #expect(Secrets.leaked(in: description).isEmpty, "\(description)")
            }
        }
    }

    @Test(arguments: [false, true])
    func strataFetchVerbose_neverPrintsTheSecrets(json: Bool) async throws {
        let directory = try TemporaryDirectory(prefix: "strata-secrecy-fetch")
        try await withDemoServer { server in
            server.faults = .init(setCookie: "sid=\(Secrets.setCookie)", echoRequestInErrors: true)
            var options = Fetcher.Options(url: Secrets.url(server), cacheDirectory: directory.url, maxAge: .zero, retries: 0, json: json, verbose: true)
            options.maxBodyBytes = 1 << 20
            let ok = CapturedOutput()
            #expect(await Fetcher(options: options).run(stdout: ok.stdout, stderr: ok.stderr) == .served)

            server.faults.status = 500
            let stale = CapturedOutput()
            #expect(await Fetcher(options: options).run(stdout: stale.stdout, stderr: stale.stderr) == .served)

            await server.goOffline()
            try FileManager.default.removeItem(at: directory.url)
            let nothing = CapturedOutput()
            #expect(await Fetcher(options: options).run(stdout: nothing.stdout, stderr: nothing.stderr) == .nothingServed)

            let report = (ok.report + stale.report + nothing.report).joined(separator: "\n")
            #expect(report.contains("127.0.0.1"), "the report names the server")
            #expect(Secrets.leaked(in: report).isEmpty, "leaked: \(Secrets.leaked(in: report))\n\(report)")
        }
    }

    @Test func theStrataBinary_verbose_neverPrintsTheSecrets() async throws {
        let directory = try TemporaryDirectory(prefix: "strata-secrecy-binary")
        try await withDemoServer { server in
            server.faults = .init(status: 503, setCookie: "sid=\(Secrets.setCookie)", echoRequestInErrors: true)
            let run = try await TwoProcessTests.run([
                "fetch", Secrets.url(server).absoluteString, "--cache-dir", directory.url.path, "--retries", "0", "--verbose",
            ])
            #expect(run.status == 1)
            #expect(run.stderr.contains("remote: HTTP 503"), "\(run.stderr)")
            #expect(Secrets.leaked(in: run.stderr).isEmpty, "leaked: \(Secrets.leaked(in: run.stderr))\n\(run.stderr)")
        }
    }
}
