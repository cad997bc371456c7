import Foundation
import Strata
import StrataOutbox
import StrataTesting
import Testing
@testable import StrataCLI

/// One outbox shared by several processes: `strata send` processes, ten at once, queue writes
/// into one file outbox, SQLite file or PostgreSQL table while the server cannot be reached, then several
/// `strata outbox drain` processes drain it at once, against a Python server that applies every
/// request it gets (Tools/Tests/Servers/write_recorder.py: no Idempotency-Key ledger), so a write
/// sent twice is applied twice and counted.
@Suite("one outbox, several processes", .serialized, .timeLimit(.minutes(5)))
struct OutboxSharedProcessesTests {
    enum Kind: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case file, sqlite, postgres
        var testDescription: String { rawValue }
    }

    /// Ten scopes of two writes each: more scopes than one drain sends at once (4), so drains overlap.
    static let scopes = 10
    static let writesPerScope = 2

    @Test("2 and 4 drains of one outbox send each of its 20 writes once, in order per scope", arguments: [
        (Kind.file, 2), (.file, 4), (.sqlite, 2), (.sqlite, 4), (.postgres, 2), (.postgres, 4),
    ])
    func drainsOfOneOutbox_sendEachWriteOnce(kind: Kind, drainers: Int) async throws {
        try await Self.withQueuedOutbox(kind, delayMs: 60) { outbox, recorder in
            let children = try (0..<drainers).map { index in try outbox.spawnDrain("drain-\(index)") }
            let ended = try await TwoProcessTests.offPool { children.map { ($0.child.wait(), $0) } }
            var sentLines = 0
            for (status, drain) in ended {
                let output = try drain.output()
                #expect(status == 0 || status == 75, "\(drain.name) exited \(status): \(output.stderr)")
                sentLines += output.stdout.split(separator: "\n").filter { $0.hasPrefix("sent ") }.count
            }
            let writes = try await recorder.writes()
            #expect(writes.count == 20, "20 requests for 20 writes, whatever the number of drains")
            #expect(Set(writes.map(\.key)).count == 20)
            #expect(sentLines == 20, "each write reported sent by the one drain that sent it")
            Self.expectOrderPerScope(writes)
            #expect(try await outbox.run(["outbox", "count"]).stdout == "0 pending, 0 parked\n")
        }
    }

    @Test("a drain killed in the middle: the others finish, and the next drain takes its scopes over at once; nothing is lost", arguments: Kind.allCases)
    func aKilledDrain_isTakenOver(kind: Kind) async throws {
        try await Self.withQueuedOutbox(kind, delayMs: 250) { outbox, recorder in
            let victim = try outbox.spawnDrain("victim")
            let other = try outbox.spawnDrain("other")
            try await ProxyFleetTests.eventually("a few writes arrived", seconds: 30) { try await recorder.writes().count >= 3 }
            victim.child.signal(SIGKILL)
            _ = try await TwoProcessTests.offPool { victim.child.wait() }  // reaped: its process ID is gone
            let otherStatus = try await TwoProcessTests.offPool { other.child.wait() }
            let otherOutput = try other.output()
            #expect(otherStatus == 0 || otherStatus == 75, "\(otherOutput.stderr)")

            // The killed drain's claims name a process that is gone: the next drain takes them at once.
            let last = try await outbox.run(["outbox", "drain"])
            #expect(last.status == 0, "\(last.stderr)")
            let writes = try await recorder.writes()
            #expect(Set(writes.map(\.key)).count == 20, "nothing lost")
            // A write whose request was on its way when its drain was killed is sent again (its
            // acknowledgement never reached the outbox): at most one per scope the victim was sending
            // (4 at once). Its Idempotency-Key lets a server that remembers keys apply it once.
            let twice = Dictionary(grouping: writes, by: \.key).filter { $0.value.count > 1 }
            #expect(twice.values.allSatisfy { $0.count == 2 } && twice.count <= 4, "\(twice.keys)")
            #expect(writes.count == 20 + twice.count)
            Self.expectOrderPerScope(writes)
        }
    }

    @Test("strata send leaves a write to the process that drains its scope, and sends it at once when none does")
    func send_leavesAClaimedScopeToItsDrainer() async throws {
        let directory = try TemporaryDirectory(prefix: "strata-shared-send")
        let cache = directory.appending("cache")
        let recorder = try await Recorder.start(in: directory, delayMs: 0)
        defer { recorder.child.signal(SIGKILL); _ = recorder.child.wait() }
        let url = "http://127.0.0.1:\(recorder.port)/notes"
        // Another live process (PID 1 exists) drains scope /notes of this outbox.
        let storage = FileOutboxStorage(directory: cache.appendingPathComponent("outbox"))
        let drainer = OutboxClaimant(processID: 1, host: OutboxClaimant.thisProcess().host)
        let now = Date()
        #expect(try await storage.claim(scope: "/notes", for: drainer, until: now.addingTimeInterval(600), now: now) == .claimed)
        let held = try await TwoProcessTests.run(["send", "POST", url, "--data", #"{"n":1}"#, "--cache-dir", cache.path])
        let heldOutput = String(decoding: held.stdout, as: UTF8.self)
        #expect(heldOutput.contains("another process is sending scope /notes"), "\(heldOutput) \(held.stderr)")
        #expect(try await recorder.writes().isEmpty, "not sent while another process drains its scope")
        // Released: the next send goes at once, behind the first (which waits for a drain).
        try await storage.release(scope: "/notes", for: drainer)
        let drained = try await TwoProcessTests.run(["outbox", "drain", "--cache-dir", cache.path])
        #expect(drained.status == 0, "\(drained.stderr)")
        let sent = try await TwoProcessTests.run(["send", "POST", url, "--data", #"{"n":2}"#, "--cache-dir", cache.path])
        #expect(String(decoding: sent.stdout, as: UTF8.self).hasPrefix("sent 201 "), "\(sent.stderr)")
        #expect(try await recorder.writes().map(\.body) == [#"{"n":1}"#, #"{"n":2}"#])
    }

    // MARK: Support

    /// Every scope's writes arrived in the order they were queued (a write sent again may follow
    /// its own first copy, never overtake an earlier write).
    static func expectOrderPerScope(_ writes: [Recorder.Write]) {
        var seen: [String: [Int]] = [:]
        for write in writes {
            guard let body = try? JSONSerialization.jsonObject(with: Data(write.body.utf8)) as? [String: Int], let n = body["n"] else {
                Issue.record("an unexpected body: \(write.body)")
                continue
            }
            if seen[write.path]?.last != n { seen[write.path, default: []].append(n) }
        }
        for (path, order) in seen {
            #expect(order == Array(1...writesPerScope), "\(path) arrived as \(order)")
        }
        #expect(seen.count == scopes)
    }

    struct SharedOutbox: Sendable {
        let directory: TemporaryDirectory
        let location: [String]

        struct Drain: Sendable {
            let name: String
            let child: Child
            let stdout: URL
            let stderr: URL

            func output() throws -> (stdout: String, stderr: String) {
                (String(decoding: try Data(contentsOf: stdout), as: UTF8.self), String(decoding: try Data(contentsOf: stderr), as: UTF8.self))
            }
        }

        func spawnDrain(_ name: String) throws -> Drain {
            let stdout = directory.appending("\(name)-stdout")
            let stderr = directory.appending("\(name)-stderr")
            let child = try Child.spawn(
                try TwoProcessTests.executable(), ["outbox", "drain"] + location, pipeStdin: false, pipeStdout: false,
                stdoutFile: stdout, stderrFile: stderr, failsafe: 240)
            return Drain(name: name, child: child, stdout: stdout, stderr: stderr)
        }

        func run(_ arguments: [String]) async throws -> (status: Int32, stdout: String, stderr: String) {
            let result = try await TwoProcessTests.run(arguments + location)
            return (result.status, String(decoding: result.stdout, as: UTF8.self), result.stderr)
        }
    }

    /// A recorder server behind a relay, and an outbox of `kind` holding 20 writes to it (10 scopes
    /// of 2), each queued by a `strata send` process of its own while the relay was down; the relay is
    /// up when `body` runs.
    static func withQueuedOutbox(
        _ kind: Kind, delayMs: Int, _ body: (SharedOutbox, Recorder) async throws -> Void
    ) async throws {
        let directory = try TemporaryDirectory(prefix: "strata-shared-outbox")
        var location = ["--cache-dir", directory.appending("cache").path, "--store", kind.rawValue]
        if kind == .postgres {
            let url = try #require(ProcessInfo.processInfo.environment["STRATA_POSTGRES_URL"], "scripts/postgres.sh start gives STRATA_POSTGRES_URL")
            location += ["--postgres-url", url, "--postgres-table", "shared_outbox_\(UInt32.random(in: 0...UInt32.max))"]
        }
        let outbox = SharedOutbox(directory: directory, location: location)
        let recorder = try await Recorder.start(in: directory, delayMs: delayMs)
        defer { recorder.child.signal(SIGKILL); _ = recorder.child.wait() }
        let relay = TCPRelay(targetHost: "127.0.0.1", targetPort: recorder.port)
        try await relay.start()
        let url = "http://127.0.0.1:\(relay.port)"
        await relay.stop()
        do {
            // Each round's ten writes are queued by ten processes at once (one per scope); a scope's
            // second write is queued after its first was acknowledged.
            for n in 1...writesPerScope {
                try await withThrowingTaskGroup(of: (status: Int32, stdout: String, stderr: String).self) { group in
                    for scope in 0..<scopes {
                        group.addTask {
                            try await outbox.run([
                                "send", "POST", "\(url)/scope-\(scope)", "--data", #"{"n":\#(n)}"#, "-H", "Content-Type: application/json",
                            ])
                        }
                    }
                    for try await sent in group {
                        #expect(sent.stdout.hasPrefix("queued "), "\(sent.stdout) \(sent.stderr)")
                    }
                }
            }
            #expect(try await outbox.run(["outbox", "count"]).stdout == "20 pending, 0 parked\n")
            try await relay.start()
            try await body(outbox, recorder)
        } catch {
            await relay.stop()
            throw error
        }
        await relay.stop()
    }

    /// Tools/Tests/Servers/write_recorder.py: applies every write it gets, in the order they arrive.
    struct Recorder: Sendable {
        let child: Child
        let port: Int

        struct Write: Decodable, Sendable {
            var method: String
            var path: String
            var body: String
            var key: String?
        }

        static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Servers/write_recorder.py")

        static func start(in directory: TemporaryDirectory, delayMs: Int) async throws -> Recorder {
            let python = try ExternalServer.executable("python3", hint: "install Python 3")
            let log = directory.appending("recorder-stderr.log")
            let child = try Child.spawn(
                python, ["-u", script.path, "--delay-ms", "\(delayMs)"], pipeStdin: false, pipeStdout: true, stdoutFile: nil, stderrFile: log,
                failsafe: 300)
            let line = try await TwoProcessTests.offPool { child.readLine() }
            guard line.hasPrefix("listening "), let port = Int(line.dropFirst("listening ".count)) else {
                child.signal(SIGKILL)
                _ = try await TwoProcessTests.offPool { child.wait() }
                throw TestError("the recorder did not start: '\(line)'")
            }
            return Recorder(child: child, port: port)
        }

        func writes() async throws -> [Write] {
            let reply = try await ProxyFleetTests.send(.get, "http://127.0.0.1:\(port)/_writes", via: ProxyFleetTests.control)
            return try JSONDecoder().decode([Write].self, from: reply.body)
        }
    }
}
