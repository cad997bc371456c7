import Foundation
import Testing
@_spi(StrataInternals) import Strata
import DemoServer
import StrataTesting
#if canImport(Glibc)
import Glibc
#endif

/// The demo server's writes, over real HTTP: `Idempotency-Key` as the IETF httpapi draft describes
/// it (a repeat gets the recorded answer, not applied again; a different request with the key gets
/// 422; a repeat while the first is in flight gets 409), and the write faults (5xx, drop after apply,
/// 409, 422) that hit writes only.
@Suite("Demo server: writes, Idempotency-Key, write faults", .timeLimit(.minutes(1)))
struct DemoServerWriteTests {
    static func post(_ server: DemoServer, key: String?, json: String = #"{"title":"t","body":"b"}"#) -> (HTTPRequest, Data) {
        var request = HTTPRequest(method: .post, url: server.baseURL.appendingPathComponent("posts"))
        request.headerFields[.contentType] = "application/json"
        if let key { request.headerFields[HTTPField.Name("Idempotency-Key")!] = key }
        return (request, Data(json.utf8))
    }

    static func send(_ request: (HTTPRequest, Data?), transport: URLSessionHTTPClient = URLSessionHTTPClient()) async throws -> HTTPReply {
        try await transport.send(request.0, body: request.1, options: HTTPRequestOptions())
    }

    struct Problem: Decodable, Equatable {
        var type: String
        var title: String
        var status: Int
        var detail: String
    }

    @Test("the first request with a key is applied; a repeat gets the same status and body, not applied again")
    func repeatGetsTheRecordedAnswer() async throws {
        try await withDemoServer { server in
            let first = try await Self.send(Self.post(server, key: "k-1"))
            let again = try await Self.send(Self.post(server, key: "k-1"))
            #expect(first.status == .created)
            #expect(again.status == first.status)
            #expect(again.body == first.body)
            #expect(again.headerFields[HTTPField.Name("Idempotent-Replayed")!] == "true")
            #expect(first.headerFields[HTTPField.Name("Idempotent-Replayed")!] == nil)
            #expect(server.posts.count == 1)
            let record = try #require(server.idempotencyKey("k-1"))
            #expect((record.requests, record.applied, record.replayed, record.refused, record.recordedStatus) == (2, 1, 1, 0, 201))
            #expect(server.appliedWrites.map(\.idempotencyKey) == ["k-1"])
        }
    }

    @Test("a structured-field string key and the bare token are the same key")
    func quotedKeyIsTheSameKey() async throws {
        try await withDemoServer { server in
            _ = try await Self.send(Self.post(server, key: #""k-2""#))
            let again = try await Self.send(Self.post(server, key: "k-2"))
            #expect(again.headerFields[HTTPField.Name("Idempotent-Replayed")!] == "true")
            #expect(server.posts.count == 1)
            #expect(server.idempotencyKeys.map(\.key) == ["k-2"])
        }
    }

    @Test("the key with a different body gets 422 with a problem body; nothing applied")
    func sameKeyDifferentBodyIs422() async throws {
        try await withDemoServer { server in
            _ = try await Self.send(Self.post(server, key: "k-3"))
            let other = try await Self.send(Self.post(server, key: "k-3", json: #"{"title":"other","body":"b"}"#))
            #expect(other.status.code == 422)
            #expect(other.headerFields[.contentType] == "application/problem+json")
            let problem = try JSONDecoder().decode(Problem.self, from: other.body)
            #expect(problem.status == 422)
            #expect(problem.type.hasSuffix("idempotency-key-reused"))
            #expect(server.posts.count == 1)
            #expect(server.idempotencyKey("k-3")?.refused == 1)
        }
    }

    @Test("a repeat while the first request is still being processed gets 409; the first then completes")
    func repeatInFlightIs409() async throws {
        try await withDemoServer { server in
            server.faults.holdRequests = true
            let first = Task { try await Self.send(Self.post(server, key: "k-4")) }
            await server.waitForRequests(count: 1)
            let second = try await Self.send(Self.post(server, key: "k-4"))
            #expect(second.status == .conflict)
            #expect(try JSONDecoder().decode(Problem.self, from: second.body).type.hasSuffix("idempotency-key-in-flight"))
            #expect(server.posts.isEmpty, "the first is held before it is applied")
            server.releaseHeldRequests()
            #expect(try await first.value.status == .created)
            #expect(server.posts.count == 1)
            let record = try #require(server.idempotencyKey("k-4"))
            #expect((record.requests, record.applied, record.refused) == (2, 1, 1))
        }
    }

    @Test("writes without a key are applied every time, as before")
    func withoutAKeyEveryWriteIsApplied() async throws {
        try await withDemoServer { server in
            let first = try await Self.send(Self.post(server, key: nil))
            let second = try await Self.send(Self.post(server, key: nil))
            #expect(first.status == .created && second.status == .created)
            #expect(try JSONDecoder().decode(Post.self, from: second.body).id == 2)
            #expect(server.posts.count == 2)
            #expect(server.idempotencyKeys.isEmpty)
            #expect(server.appliedWrites.count == 2)
        }
    }

    @Test("with idempotency off, a repeated key is applied again (the negative control's server)")
    func idempotencyOffAppliesARepeat() async throws {
        try await withDemoServer { server in
            server.honoursIdempotencyKeys = false
            _ = try await Self.send(Self.post(server, key: "k-5"))
            let again = try await Self.send(Self.post(server, key: "k-5"))
            #expect(again.status == .created)
            #expect(server.posts.count == 2)
            #expect(server.idempotencyKey("k-5")?.applied == 2)
        }
    }

    @Test("a malformed key is refused with 400")
    func malformedKeyIs400() async throws {
        try await withDemoServer { server in
            let reply = try await Self.send(Self.post(server, key: #""""#))
            #expect(reply.status == .badRequest)
            #expect(server.posts.isEmpty)
        }
    }

    @Test("a 5xx write fault hits writes only, the next N of them, with Retry-After; the key is free for the retry")
    func statusWriteFault() async throws {
        try await withDemoServer { server in
            server.faults = .init(writeFault: .status(503, retryAfterSeconds: 7), remainingWriteFaults: 1)
            let read = try await Self.send((HTTPRequest(method: .get, url: server.feedURL), nil))
            #expect(read.status == .ok, "reads are not hit")
            let failed = try await Self.send(Self.post(server, key: "k-6"))
            #expect(failed.status == .serviceUnavailable)
            #expect(failed.headerFields[.retryAfter] == "7")
            #expect(server.posts.isEmpty)
            let retried = try await Self.send(Self.post(server, key: "k-6"))
            #expect(retried.status == .created)
            #expect(retried.headerFields[HTTPField.Name("Idempotent-Replayed")!] == nil, "applied now, not replayed")
            #expect(server.posts.count == 1)
            #expect(server.faults.remainingWriteFaults == 0)
        }
    }

    @Test("the 409 write fault carries the resource's current ETag and a problem body; nothing applied")
    func conflictWriteFault() async throws {
        try await withDemoServer { server in
            let created = try await Self.send(Self.post(server, key: nil))
            let etag = try #require(created.headerFields[.eTag])
            server.faults.writeFault = .conflict
            var put = HTTPRequest(method: .put, url: server.baseURL.appendingPathComponent("posts/1"))
            put.headerFields[.contentType] = "application/json"
            let reply = try await Self.send((put, Data(#"{"title":"new","body":"b"}"#.utf8)))
            #expect(reply.status == .conflict)
            #expect(reply.headerFields[.eTag] == etag)
            #expect(try JSONDecoder().decode(Problem.self, from: reply.body).status == 409)
            #expect(server.posts[1]?.title == "t")
        }
    }

    @Test("the 422 write fault answers a JSON problem; nothing applied")
    func unprocessableWriteFault() async throws {
        try await withDemoServer { server in
            server.faults.writeFault = .unprocessable
            let reply = try await Self.send(Self.post(server, key: "k-7"))
            #expect(reply.status.code == 422)
            #expect(reply.headerFields[.contentType] == "application/problem+json")
            #expect(try JSONDecoder().decode(Problem.self, from: reply.body).status == 422)
            #expect(server.posts.isEmpty)
        }
    }

    @Test("drop-after-apply: the write is applied and its key recorded, the client gets no answer; the retry gets the recorded answer")
    func dropAfterApply() async throws {
        try await withDemoServer { server in
            server.faults = .init(writeFault: .dropAfterApply, remainingWriteFaults: 1)
            let transport = URLSessionHTTPClient()
            let lost = await #expect(throws: HTTPError.self) { try await Self.send(Self.post(server, key: "k-8"), transport: transport) }
            if case .transport? = lost {} else { Issue.record("not a transport failure: \(String(describing: lost))") }
            #expect(server.posts.count == 1, "applied before the connection was dropped")
            #expect(server.idempotencyKey("k-8")?.recordedStatus == 201)
            let retried = try await Self.send(Self.post(server, key: "k-8"), transport: transport)
            #expect(retried.status == .created)
            #expect(retried.headerFields[HTTPField.Name("Idempotent-Replayed")!] == "true")
            #expect(try JSONDecoder().decode(Post.self, from: retried.body) == server.posts[1])
            #expect(server.posts.count == 1)
        }
    }

    @Test("drop-after-apply on the wire: not a byte of answer, the connection is reset or closed")
    func dropAfterApplySendsNothing() async throws {
        try await withDemoServer { server in
            server.faults.writeFault = .dropAfterApply
            let body = #"{"title":"raw","body":"b"}"#
            let request = "POST /posts HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                + "Idempotency-Key: raw-1\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
            let port = server.port
            let (received, error) = try await TwoProcessTests.offPool { try RawHTTP.exchange(request, port: port) }
            #expect(received.isEmpty, "received: \(String(decoding: received, as: UTF8.self))")
            #expect(error == ECONNRESET || error == 0, "read ended with errno \(error)")
            #expect(server.posts.count == 1)
        }
    }

    @Test("PUT, PATCH and DELETE honour If-Match: a stale version gets 412 with the current ETag")
    func ifMatchOnWrites() async throws {
        try await withDemoServer { server in
            let created = try await Self.send(Self.post(server, key: nil))
            let etag = try #require(created.headerFields[.eTag])
            let url = server.baseURL.appendingPathComponent("posts/1")
            var patch = HTTPRequest(method: .patch, url: url)
            patch.headerFields[.ifMatch] = etag
            let patched = try await Self.send((patch, Data(#"{"title":"patched"}"#.utf8)))
            #expect(patched.status == .ok)
            #expect(server.posts[1] == Post(id: 1, title: "patched", body: "b"))
            let stale = try await Self.send((patch, Data(#"{"title":"again"}"#.utf8)))
            #expect(stale.status == .preconditionFailed)
            #expect(stale.headerFields[.eTag] == patched.headerFields[.eTag])
            let read = try await Self.send((HTTPRequest(method: .get, url: url), nil))
            #expect(read.headerFields[.eTag] == patched.headerFields[.eTag])
            var delete = HTTPRequest(method: .delete, url: url)
            delete.headerFields[.ifMatch] = patched.headerFields[.eTag]
            #expect(try await Self.send((delete, nil)).status == .noContent)
            #expect(server.posts.isEmpty)
        }
    }
}

/// One HTTP/1.1 exchange over a plain socket: sends `request`, reads until the server closes.
enum RawHTTP {
    /// What came back, and the `errno` the last read ended with (0 for an orderly close).
    static func exchange(_ request: String, port: Int) throws -> (Data, Int32) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TestError("socket failed: \(errno)") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw TestError("connect failed: \(errno)") }
        var timeout = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let bytes = Array(request.utf8)
        guard bytes.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, 0) }) == bytes.count else {
            throw TestError("send failed: \(errno)")
        }
        var received = Data()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n > 0 {
                received.append(contentsOf: buffer[..<n])
                continue
            }
            if n < 0, errno == EINTR { continue }
            if n < 0, errno == EAGAIN { throw TestError("no answer and no close within 20 s") }
            return (received, n == 0 ? 0 : errno)
        }
    }
}
