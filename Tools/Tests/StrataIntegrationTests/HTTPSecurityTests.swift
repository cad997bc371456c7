import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@_spi(StrataInternals) import Strata
import StrataTesting

/// HTTPS certificate validation is never disabled: a server with a self-signed certificate is refused
/// with a typed transport error, and no source file handles authentication challenges.
@Suite("HTTPS security", .timeLimit(.minutes(3)))
struct HTTPSecurityTests {
    static func openssl() throws -> URL {
        let candidates = ["/usr/bin/openssl", "/usr/local/bin/openssl", "/opt/homebrew/bin/openssl"]
        guard let path = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw TestError("openssl is not installed; it serves the self-signed TLS endpoint")
        }
        return URL(fileURLWithPath: path)
    }

    /// Runs a tool to completion off the cooperative pool; returns its exit status.
    static func run(_ executable: URL, _ arguments: [String], in directory: TemporaryDirectory) async throws -> Int32 {
        try await TwoProcessTests.offPool {
            try Child.spawn(executable, arguments, pipeStdin: false, pipeStdout: false,
                            stdoutFile: directory.appending("tool-stdout"), stderrFile: directory.appending("tool-stderr")).wait()
        }
    }

    @Test func aSelfSignedCertificate_isRefusedWithATLSTransportError() async throws {
        let openssl = try Self.openssl()
        let directory = try TemporaryDirectory(prefix: "strata-tls")
        let key = directory.appending("key.pem").path
        let cert = directory.appending("cert.pem").path
        let made = try await Self.run(openssl, [
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1",
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
        ], in: directory)
        try #require(made == 0, "openssl could not make a certificate")

        let port = try ListeningSocket.freePort()
        // `-www` answers any GET with a 200 status page, so a client that skipped validation would succeed.
        let server = try Child.spawn(
            openssl, ["s_server", "-accept", "127.0.0.1:\(port)", "-cert", cert, "-key", key, "-www"],
            pipeStdin: true, pipeStdout: true, stdoutFile: nil, stderrFile: directory.appending("s_server-stderr"))
        defer { server.signal(SIGKILL); _ = server.wait() }
        // s_server prints ACCEPT once it listens.
        let ready = try await TwoProcessTests.offPool { () -> Bool in
            for _ in 0..<20 where server.readLine().hasPrefix("ACCEPT") { return true }
            return false
        }
        try #require(ready, "openssl s_server did not start")
        let url = URL(string: "https://127.0.0.1:\(port)/feed")!

        // Control: a client that trusts this certificate gets the page, so the server works.
        let curl = URL(fileURLWithPath: "/usr/bin/curl")
        if FileManager.default.isExecutableFile(atPath: curl.path) {
            let trusted = try await Self.run(curl, ["--silent", "--fail", "--max-time", "20", "--cacert", cert, url.absoluteString], in: directory)
            #expect(trusted == 0, "curl trusting the certificate should reach the server")
        }

        await #expect {
            _ = try await HTTPLoader(url: url, timeout: .seconds(60)).load()
        } throws: { error in
            guard case HTTPError.transport(let failedURL, let reason, _) = error else { return false }
            return failedURL == url && reason.hasPrefix("TLS failed")
        }
        // The same with a client on a session of its own.
        let own = URLSessionHTTPClient(session: URLSession(configuration: .ephemeral))
        await #expect {
            _ = try await HTTPLoader(url: url, timeout: .seconds(60), transport: own).load()
        } throws: { error in
            if case HTTPError.transport(_, let reason, _) = error { return reason.hasPrefix("TLS failed") }
            return false
        }
    }

    /// No source file takes over certificate checks: handling a challenge (with a delegate method
    /// receiving `URLAuthenticationChallenge`, or `serverTrust`) is the only way to accept an
    /// untrusted certificate with URLSession.
    @Test func noSourceHandlesAuthenticationChallenges() throws {
        // Tools/Tests/StrataIntegrationTests/<this file> → the repository root: the library's sources
        // and the tools' (the CLI and the demo server) are both checked.
        let root = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let files = try [root.appendingPathComponent("Sources"), root.appendingPathComponent("Tools/Sources")].flatMap { sources in
            try #require(FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil))
                .compactMap { $0 as? URL }.filter { $0.pathExtension == "swift" }
        }
        #expect(files.count > 50, "found the sources under \(root.path)")
        for file in files {
            let text = try String(contentsOf: file, encoding: .utf8)
            for forbidden in ["URLAuthenticationChallenge", "serverTrust", "didReceive challenge", "allowsExpiredCertificates", "CURLOPT_SSL_VERIFY"] {
                #expect(!text.contains(forbidden), "\(file.lastPathComponent) mentions \(forbidden)")
            }
        }
    }
}
