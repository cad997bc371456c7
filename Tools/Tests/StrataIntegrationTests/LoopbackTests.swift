import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import StrataDemo
import StrataInspector
import StrataTesting
import Testing
@_spi(StrataInternals) import Strata
import StrataQueries
#if canImport(Glibc)
import Glibc
#endif

/// What the inspector and the web demo listen on when nobody says: loopback only. Each is
/// started with its defaults and asked for over 127.0.0.1 (accepted) and over this machine's
/// other IPv4 address (refused: nothing listens there).
@Suite("Inspector and web demo: loopback unless told otherwise", .timeLimit(.minutes(1)), .serialized)
struct LoopbackTests {
    /// This machine's non-loopback IPv4 address: without one, "not reachable from elsewhere"
    /// cannot be observed, and the test says so instead of passing.
    func otherAddress() throws -> String {
        try #require(RawSocket.nonLoopbackAddress(), "this machine has no IPv4 address besides loopback to connect from")
    }

    @Test("StrataInspector.serving() with its defaults listens on 127.0.0.1 only")
    func theInspector_listensOnLoopbackByDefault() async throws {
        let other = try otherAddress()
        let inspector = StrataInspector(queries: QueryClient())
        try await inspector.serving { port in
            #expect(RawSocket.accepts(host: "127.0.0.1", port: port))
            #expect(!RawSocket.accepts(host: other, port: port), "not on \(other)")
        }
    }

    @Test("the web demo with its defaults listens on 127.0.0.1 only, inspector included")
    func theWebDemo_listensOnLoopbackByDefault() async throws {
        let other = try otherAddress()
        try await FeedWebDemoTests.withWebDemo { _, base in
            let port = try #require(base.port)
            #expect(RawSocket.accepts(host: "127.0.0.1", port: port))
            #expect(!RawSocket.accepts(host: other, port: port), "not on \(other)")
        }
    }

    @Test("`strata demo --web --port 0` prints its address, serves the page on 127.0.0.1 only, and stops on SIGINT with exit 0")
    func theShippedCommand_servesOnLoopback() async throws {
        let other = try otherAddress()
        let directory = try TemporaryDirectory(prefix: "strata-demo-web")
        let demo = try Child.spawn(
            try TwoProcessTests.executable(), ["demo", "--web", "--port", "0"], pipeStdin: false, pipeStdout: true,
            stdoutFile: nil, stderrFile: directory.appending("stderr"))
        var status: Int32?
        defer { if status == nil { demo.signal(SIGKILL); _ = demo.wait() } }

        let first = try await TwoProcessTests.offPool { demo.readLine() }
        #expect(first.hasPrefix("strata demo: the offline-first feed at http://127.0.0.1:"))
        let page = try #require(first.split(separator: " ").last.flatMap { URL(string: String($0)) })
        let port = try #require(page.port)
        let (data, response) = try await URLSession.shared.data(from: page)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(String(decoding: data, as: UTF8.self).contains("<title>Strata demo: the offline-first feed</title>"))
        let (_, inspector) = try await URLSession.shared.data(from: page.appendingPathComponent("inspector"))
        #expect((inspector as? HTTPURLResponse)?.statusCode == 200)
        #expect(!RawSocket.accepts(host: other, port: port), "not on \(other)")

        demo.signal(SIGINT)
        let exit = try await TwoProcessTests.offPool { demo.wait() }
        status = exit
        #expect(exit == 0)
    }
}
