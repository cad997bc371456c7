import Foundation
import Testing
import Strata
import DemoServer
import StrataTesting

/// The built `strata` binary's `send` and `outbox`, run as separate processes: against the demo
/// server in this process, and against Python's `http.server`, a server this project did not write.
@Suite("strata send and outbox, as processes", .timeLimit(.minutes(3)))
struct OutboxCLIProcessTests {
    /// `strata send … --data -` with `input` on standard input (a shell redirects a file into it).
    static func send(withStdin input: String, _ arguments: [String], in directory: TemporaryDirectory) async throws
        -> (status: Int32, stdout: String, stderr: String)
    {
        let strata = try TwoProcessTests.executable()
        let inputFile = directory.appending("stdin")
        try Data(input.utf8).write(to: inputFile)
        let out = directory.appending("send-stdout")
        let err = directory.appending("send-stderr")
        // `sh -c '…' strata FILE ARGS…`: the binary runs with ARGS and the file as its standard input.
        let script = #"input="$1"; shift; exec "$0" "$@" < "$input""#
        let status = try await TwoProcessTests.offPool {
            let child = try Child.spawn(
                URL(fileURLWithPath: "/bin/sh"), ["-c", script, strata.path, inputFile.path] + arguments, pipeStdin: false, pipeStdout: false,
                stdoutFile: out, stderrFile: err)
            return child.wait()
        }
        return (status, String(decoding: try Data(contentsOf: out), as: UTF8.self), String(decoding: try Data(contentsOf: err), as: UTF8.self))
    }

    static func run(_ arguments: [String]) async throws -> (status: Int32, stdout: String, stderr: String) {
        let result = try await TwoProcessTests.run(arguments)
        return (result.status, String(decoding: result.stdout, as: UTF8.self), result.stderr)
    }

    @Test func dataFromStandardInput_isQueuedWhileOffline_thenDrainedByAnotherProcess() async throws {
        let directory = try TemporaryDirectory(prefix: "strata-send-stdin")
        let cache = directory.appending("cache").path
        try await withDemoServer { server in
            await server.goOffline()
            let url = server.baseURL.appendingPathComponent("posts").absoluteString
            let sent = try await Self.send(
                withStdin: #"{"title":"from stdin","body":"piped"}"#,
                ["send", "POST", url, "--data", "-", "-H", "Authorization: Bearer process-secret-123", "--cache-dir", cache],
                in: directory)

            #expect(sent.status == 0, "\(sent.stderr)")
            #expect(sent.stdout.hasPrefix("queued "), "\(sent.stdout)")
            #expect(sent.stdout.hasSuffix("; will be sent by 'strata outbox drain'\n"))
            let id = try #require(sent.stdout.split(separator: " ").dropFirst().first).dropLast()
            let files = try FileManager.default.contentsOfDirectory(atPath: cache + "/outbox").filter { $0 != ".coordination" }
            #expect(files.count == 1)
            for file in files {
                let stored = try StoredOutboxFile(URL(fileURLWithPath: cache + "/outbox/" + file))
                #expect(stored.body == #"{"title":"from stdin","body":"piped"}"#)
                for text in stored.everyLayer {
                    #expect(!text.contains("process-secret"), "a credential never reaches the outbox files")
                }
                #expect(stored.request.headerFields.contains(["Strata-Withheld-Credentials", "Authorization"]))
            }

            let listed = try await Self.run(["outbox", "list", "--cache-dir", cache])
            #expect(listed.status == 0)
            #expect(listed.stdout.hasPrefix("\(id) pending scope=/posts POST \(url) attempts=1 "), "\(listed.stdout)")
            #expect(listed.stdout.contains(" credentials-not-kept=Authorization "))

            try await server.goOnline()
            let drained = try await Self.run(["outbox", "drain", "--cache-dir", cache, "-H", "Authorization: Bearer process-secret-123"])
            #expect(drained.status == 0, "\(drained.stderr)")
            #expect(drained.stdout == "sent 201 \(id)\n")
            #expect(server.posts.values.map(\.title) == ["from stdin"])
            let count = try await Self.run(["outbox", "count", "--cache-dir", cache])
            #expect(count.stdout == "0 pending, 0 parked\n")
        }
    }

    @Test func usageErrors_exit64() async throws {
        let bad = try await Self.run(["send", "GET", "http://127.0.0.1:1/x"])
        #expect(bad.status == 64)
        #expect(bad.stderr.contains("does not write"))
        #expect(bad.stdout.isEmpty)
    }

    /// Python's `http.server` answers a POST with 501 Not Implemented ("Unsupported method"). 501
    /// means the server does not support the method at all: sending again cannot help, so the
    /// write is parked at once (exit 2), not retried until the retention limit.
    @Test func pythonHTTPServer_answers501_andTheWriteIsParked() async throws {
        let directory = try TemporaryDirectory(prefix: "strata-send-python")
        let server = try await ExternalServer.python(in: directory)
        let cache = directory.appending("cache").path
        do {
            let url = server.baseURL.appendingPathComponent("posts").absoluteString
            let sent = try await Self.run(["send", "POST", url, "--data", #"{"title":"x"}"#, "--cache-dir", cache])

            #expect(sent.status == 2, "\(sent.stdout) \(sent.stderr)")
            #expect(sent.stdout.hasPrefix("parked "), "\(sent.stdout)")
            #expect(sent.stdout.contains(": HTTP 501, rejected by the server; "), "\(sent.stdout)")
            #expect(sent.stderr.contains("was refused: HTTP 501: "), "\(sent.stderr)")
            #expect(sent.stderr.contains("Unsupported method"), "the start of Python's answer: \(sent.stderr)")
            #expect(server.logText().contains("\"POST /posts HTTP/1.1\" 501"), "\(server.logText())")

            let listed = try await Self.run(["outbox", "list", "--cache-dir", cache, "--json"])
            let objects = try #require(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]])
            #expect(objects.count == 1)
            #expect(objects.first?["state"] as? String == "parked")
            #expect(objects.first?["reason"] as? String == "rejected")
            #expect(objects.first?["status"] as? Int == 501)
            #expect((objects.first?["lastError"] as? String)?.contains("Unsupported method") == true)

            let drained = try await Self.run(["outbox", "drain", "--cache-dir", cache])
            #expect(drained.status == 0, "a parked write is not sent again by a drain: \(drained.stderr)")
            #expect(server.logText().components(separatedBy: "\"POST /posts").count == 2, "one POST in all")
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }
}
