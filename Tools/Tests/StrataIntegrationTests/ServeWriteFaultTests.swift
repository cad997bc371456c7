import ArgumentParser
import Foundation
import Testing
@_spi(StrataInternals) import Strata
@testable import StrataCLI
import DemoServer
import StrataTesting
#if canImport(Glibc)
import Glibc
#endif

/// `strata serve --write-fault …`: the switch, its live command, and the line printed for each
/// write with the `Idempotency-Key` it carried.
@Suite("strata serve: write faults and Idempotency-Key", .timeLimit(.minutes(3)))
struct ServeWriteFaultTests {
    @Test(arguments: [
        ("503", DemoServer.WriteFault.status(503, retryAfterSeconds: nil)),
        ("drop-after-apply", .dropAfterApply),
        ("409", .conflict),
        ("422", .unprocessable),
    ])
    func writeFaultParses(text: String, fault: DemoServer.WriteFault) throws {
        #expect(DemoServer.WriteFault(text) == fault)
        #expect(fault.description == text)
        let command = try ServeCommand.parse(["--write-fault", text, "--write-fault-count", "2"])
        #expect(command.writeFault == text && command.writeFaultCount == 2)
    }

    @Test(arguments: [
        (["--write-fault", "200"], "--write-fault must be"),
        (["--write-fault", "sometimes"], "--write-fault must be"),
        (["--write-fault-count", "1"], "--write-fault-count needs --write-fault"),
        (["--write-fault", "503", "--write-fault-count=-1"], "--write-fault-count must not be negative"),
    ])
    func badWriteFaultIsRefused(arguments: [String], message: String) {
        #expect {
            _ = try ServeCommand.parse(arguments)
        } throws: { error in
            ServeCommand.message(for: error).contains(message)
        }
    }

    @Test func liveCommandsSetAndClearTheWriteFault() async throws {
        try await withDemoServer { server in
            let control = ServeControl(server: server)
            #expect(await control.apply("write-fault drop-after-apply 1") == "faults: writes: drop-after-apply on the next 1")
            #expect(server.faults.writeFault == .dropAfterApply && server.faults.remainingWriteFaults == 1)
            server.faults.retryAfterSeconds = 5
            #expect(await control.apply("write-fault 503") == "faults: writes: 503 (Retry-After 5s)")
            #expect(server.faults.writeFault == .status(503, retryAfterSeconds: 5))
            #expect(await control.apply("write-fault off").hasPrefix("faults:"))
            #expect(server.faults.writeFault == nil)
            #expect(await control.apply("write-fault 200").hasPrefix("usage:"))
            #expect(await control.apply("idempotency off").hasPrefix("idempotency: off"))
            #expect(!server.honoursIdempotencyKeys)
            #expect(await control.apply("idempotency on").hasPrefix("idempotency: on"))
            #expect(server.honoursIdempotencyKeys)
        }
    }

    /// The built binary, as a person runs it: the first write is applied and its connection dropped;
    /// `strata serve` prints each write with its key; the retry is answered from the record.
    @Test func serveDropsAfterApplyAndPrintsEachKey() async throws {
        let directory = try TemporaryDirectory(prefix: "strata-serve-write-fault")
        let serve = try Child.spawn(
            try TwoProcessTests.executable(), ["serve", "--port", "0", "--write-fault", "drop-after-apply", "--write-fault-count", "1"],
            pipeStdin: true, pipeStdout: true, stdoutFile: nil, stderrFile: directory.appending("serve-stderr"))
        var serveStatus: Int32?
        defer { if serveStatus == nil { serve.signal(SIGKILL); _ = serve.wait() } }
        let firstLine = try await TwoProcessTests.offPool { serve.readLine() }
        let base = try #require(URL(string: firstLine.split(separator: " ").last.map(String.init) ?? ""), "\(firstLine)")

        var request = HTTPRequest(method: .post, url: base.appendingPathComponent("posts"))
        request.headerFields[.contentType] = "application/json"
        request.headerFields[HTTPField.Name("Idempotency-Key")!] = "cli-key-1"
        let body = Data(#"{"title":"t","body":"b"}"#.utf8)
        let transport = URLSessionHTTPClient()
        await #expect(throws: HTTPError.self) { try await transport.send(request, body: body, options: HTTPRequestOptions()) }
        let retried = try await transport.send(request, body: body, options: HTTPRequestOptions())
        #expect(retried.status == .created)

        // Reads what it printed until both writes' lines are there.
        let lines = try await TwoProcessTests.offPool { () -> [String] in
            var writes: [String] = []
            while writes.count < 2 {
                let line = serve.readLine()
                if line.isEmpty { break }  // its output ended (it prints no empty line)
                if line.contains("write: ") { writes.append(line.trimmingCharacters(in: .whitespaces)) }
            }
            return writes
        }
        #expect(lines == [
            "write: POST /posts Idempotency-Key cli-key-1: applied (201), connection dropped without an answer",
            "write: POST /posts Idempotency-Key cli-key-1: already applied, recorded answer sent again (201)",
        ])
        serve.write("quit\n")
        serveStatus = try await TwoProcessTests.offPool { serve.wait() }
        #expect(serveStatus == 0)
    }
}
