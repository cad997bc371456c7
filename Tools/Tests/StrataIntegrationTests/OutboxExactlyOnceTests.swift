import Foundation
import Testing
@_spi(StrataInternals) import Strata
import StrataOutbox
import DemoServer
import StrataTesting
#if canImport(Glibc)
import Glibc
#endif

/// Exactly-once with the real parts: a real ``Outbox`` over a
/// ``FileOutboxStorage`` in a temporary directory, HTTP writes through ``URLSessionHTTPClient``, and a
/// real server that applies the first attempt, then drops the connection without answering (the
/// lost acknowledgement). The outbox sees a transport failure, keeps the write, retries it after its
/// backoff with the same `Idempotency-Key`, and the server answers the recorded response: applied once.
///
/// The servers: the in-process demo server (Hummingbird), the same with idempotency off (the negative
/// control: the same scenario applies the write twice, so the check can fail), and a small Python
/// `http.server` this project did not write in Swift (Tools/Tests/Servers/idempotent_server.py).
/// Time moves on the outbox's manual clock; nothing waits for real time.
@Suite("Outbox: exactly once when the acknowledgement is lost", .timeLimit(.minutes(1)))
struct OutboxExactlyOnceTests {
    /// The outbox of one test: real files, a manual clock, a 10 s first backoff without jitter.
    struct Fixture {
        let directory: TemporaryDirectory
        let clock = ManualClock()
        let outbox: Outbox

        init() throws {
            directory = try TemporaryDirectory(prefix: "strata-exactly-once")
            outbox = Outbox(
                storage: FileOutboxStorage(directory: directory.url), name: "exactly-once", environment: clock.environment(),
                retry: OutboxRetryPolicy(initialDelay: .seconds(10), jitter: 0))
            // A session of its own: the first attempt is the first request on a new connection.
            outbox.registerHTTP(transport: URLSessionHTTPClient())
        }

        /// Queues `POST base/posts` with a JSON draft.
        func enqueuePost(to base: URL, title: String) async throws -> OutboxEntry {
            var request = HTTPRequest(method: .post, url: base.appendingPathComponent("posts"))
            request.headerFields[.contentType] = "application/json"
            return try await outbox.enqueue(request, body: try JSONEncoder().encode(NewPost(title: title, body: "sent once")))
        }

        /// First drain: the answer is lost, so the write stays, failed for want of an answer. Not
        /// due again before its backoff; after it, the second drain delivers it and removes it.
        func deliverThroughALostAcknowledgement(_ entry: OutboxEntry) async throws {
            let first = try await outbox.drain()
            #expect(first.delivered == 0 && first.deferred == 1, "the first attempt's answer is lost: \(first)")
            let kept = try #require(try await outbox.entry(entry.id), "the write is kept after the lost answer")
            #expect(kept.attempts == 1)
            #expect(kept.lastFailure?.class == .timedOut, "no answer, and the request reached the server: \(String(describing: kept.lastFailure))")
            #expect(try await outbox.drain() == OutboxDrainReport(), "not due before its backoff")

            clock.advance(by: .seconds(10))
            let second = try await outbox.drain()
            #expect(second.delivered == 1, "the retry is acknowledged: \(second)")
            #expect(try await outbox.entry(entry.id) == nil)
            #expect(try await FileOutboxStorage(directory: directory.url).loadAll().isEmpty, "removed from the disk too")
        }
    }

    @Test("demo server drops the first answer: the outbox retries with the same key, the write is applied once")
    func demoServer() async throws {
        try await withDemoServer { server in
            server.faults = .init(writeFault: .dropAfterApply, remainingWriteFaults: 1)
            let fixture = try Fixture()
            let entry = try await fixture.enqueuePost(to: server.baseURL, title: "once")
            try await fixture.deliverThroughALostAcknowledgement(entry)

            let record = try #require(server.idempotencyKey(entry.idempotencyKey), "the key reached the server")
            #expect(record.requests == 2, "two attempts, one key")
            #expect(record.applied == 1, "applied exactly once")
            #expect(record.replayed == 1, "the retry got the recorded answer")
            #expect(server.posts.values.filter { $0.title == "once" }.count == 1)
            #expect(server.requests.filter { $0.method == "POST" }.map { $0.headers["Idempotency-Key"] }
                == [entry.idempotencyKey, entry.idempotencyKey])
        }
    }

    @Test("negative control: the same scenario against the server with idempotency off applies the write twice")
    func demoServerWithoutIdempotency() async throws {
        try await withDemoServer { server in
            server.honoursIdempotencyKeys = false
            server.faults = .init(writeFault: .dropAfterApply, remainingWriteFaults: 1)
            let fixture = try Fixture()
            let entry = try await fixture.enqueuePost(to: server.baseURL, title: "twice")
            try await fixture.deliverThroughALostAcknowledgement(entry)

            // What the exactly-once test checks, seen failing: a duplicate.
            #expect(server.idempotencyKey(entry.idempotencyKey)?.applied == 2)
            #expect(server.posts.values.filter { $0.title == "twice" }.count == 2)
        }
    }

    @Test("a Python http.server that honours Idempotency-Key and drops the first answer: applied once")
    func pythonServer() async throws {
        let directory = try TemporaryDirectory(prefix: "strata-python-idempotent")
        let server = try await IdempotentPythonServer.start(dropAfterApply: 1, in: directory)
        do {
            let fixture = try Fixture()
            let entry = try await fixture.enqueuePost(to: server.baseURL, title: "once in python")
            try await fixture.deliverThroughALostAcknowledgement(entry)

            let ledger = try await server.ledger()
            let record = try #require(ledger.keys[entry.idempotencyKey], "the key reached the server: \(ledger)")
            #expect(record == .init(requests: 2, applied: 1, replayed: 1, refused: 0))
            #expect(ledger.posts == 1, "applied exactly once")
        } catch {
            await server.stop()
            throw error
        }
        let status = await server.stop()
        #expect(status == 0 || status == 128 + SIGTERM, "stopped by SIGTERM: \(String(describing: status)); \(server.logText())")
    }
}

/// Tools/Tests/Servers/idempotent_server.py, run with `python3` on 127.0.0.1, port 0 (it prints the
/// port it got); ``stop()`` ends it with SIGTERM and reaps it.
struct IdempotentPythonServer {
    let child: Child
    let port: Int
    let log: URL

    var baseURL: URL { URL(string: "http://127.0.0.1:\(port)")! }

    /// The script, next to this test's folder.
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Servers/idempotent_server.py")

    static func start(dropAfterApply: Int, in directory: TemporaryDirectory) async throws -> IdempotentPythonServer {
        let python = try ExternalServer.executable("python3", hint: "install Python 3")
        let log = directory.appending("python-stderr.log")
        let child = try Child.spawn(
            python, ["-u", script.path, "--drop-after-apply", "\(dropAfterApply)"],
            pipeStdin: false, pipeStdout: true, stdoutFile: nil, stderrFile: log)
        // Its first line, once it listens: `listening PORT` (or nothing, when it failed to start).
        let line = try await TwoProcessTests.offPool { child.readLine() }
        guard line.hasPrefix("listening "), let port = Int(line.dropFirst("listening ".count)) else {
            child.signal(SIGKILL)
            let status = try await TwoProcessTests.offPool { child.wait() }
            let stderr = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            throw TestError("the Python server did not start (status \(status), said '\(line)'): \(stderr)")
        }
        return IdempotentPythonServer(child: child, port: port, log: log)
    }

    /// What the server says it did, per key.
    struct Ledger: Decodable, Sendable {
        struct Key: Decodable, Equatable, Sendable {
            var requests: Int
            var applied: Int
            var replayed: Int
            var refused: Int
        }

        var keys: [String: Key]
        var posts: Int
    }

    func ledger() async throws -> Ledger {
        let reply = try await URLSessionHTTPClient().send(
            HTTPRequest(method: .get, url: baseURL.appendingPathComponent("ledger")), body: nil, options: HTTPRequestOptions())
        guard reply.status == .ok else { throw TestError("GET /ledger answered \(reply.status)") }
        return try JSONDecoder().decode(Ledger.self, from: reply.body)
    }

    @discardableResult
    func stop() async -> Int32? {
        let child = child
        child.signal(SIGTERM)
        return try? await TwoProcessTests.offPool { child.wait() }
    }

    func logText() -> String {
        (try? String(contentsOf: log, encoding: .utf8)) ?? "(no log)"
    }
}
