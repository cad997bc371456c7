#if DEBUG  // `@testable` needs a build with testing enabled; the fuzz build is a debug build.
import DemoServer
import Foundation
import Logging
import StrataDemo
import StrataProxy
@testable import Strata

/// What a hostile client sends to Strata's servers, over real TCP to servers in this process:
/// `strata proxy` (request heads, bodies, pipelining, garbage) and the web demo's and the
/// inspector's actions. Each input is one connection; after it, a control request on a new
/// connection must be answered as before (the server took the input and stayed up).
enum ServerTargets {
    static let all: [FuzzTarget] = [
        FuzzTarget(
            name: "proxy-request", seeds: Seeds.proxyRequest,
            summary: "strata proxy (memory tier, the demo server upstream) given any bytes on a connection: every answer is a well-formed HTTP response, and a GET on a new connection is answered 200 after",
            start: startProxy),
        FuzzTarget(
            name: "web-demo-actions", seeds: Seeds.serverActions,
            summary: "the web demo's page and API (/api/…) given requests built from the input (any method, path, query, token, body): never a 500; a POST without the token is refused; the feed is answered after",
            start: { try await startWebDemo(paths: webDemoPaths) }),
        FuzzTarget(
            name: "inspector-actions", seeds: Seeds.serverActions,
            summary: "the inspector's API (/inspector/api/…) given requests built from the input: never a 500; a POST without the token is refused; the feed is answered after",
            start: { try await startWebDemo(paths: inspectorPaths) }),
    ]

    // MARK: strata proxy

    static func startProxy() async throws -> FuzzRunner {
        let origin = try await DemoServer.start()
        var options = ProxyNode.Options(upstream: URL(string: "http://127.0.0.1:\(origin.port)")!, node: "fuzz", postgresURL: nil)
        options.port = 0
        options.adminPort = 0
        options.softTimeout = .seconds(1)
        options.maxRequestBodyBytes = 64 * 1024
        var logger = Logger(label: "strata-fuzz.proxy")
        logger.logLevel = .critical
        let node = try await ProxyNode.start(options: options, logger: logger)
        let port = node.port
        return FuzzRunner(
            run: { bytes throws(PropertyViolation) in
                let answer = LoopbackConnection.exchange(port: port, sending: bytes, timeout: .seconds(2))
                try checkResponses(answer, from: "strata proxy")
                try checkAlive(port: port, request: "GET /feed HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", server: "strata proxy")
            },
            stop: { await origin.stop() })
    }

    // MARK: The web demo and the inspector

    static let webDemoPaths = [
        "/", "/api/feed", "/api/network", "/api/clock", "/api/posts", "/api/next-page", "/api/previous-page", "/api/write-fault", "/api/refresh", "/api/events", "/api/",
    ]
    static let inspectorPaths = [
        "/inspector", "/inspector/api/state", "/inspector/api/export", "/inspector/api/network",
        "/inspector/api/queries/refetch", "/inspector/api/queries/invalidate", "/inspector/api/queries/remove",
        "/inspector/api/queries/fail", "/inspector/api/queries/", "/inspector/api/events",
    ]

    static func startWebDemo(paths: [String]) async throws -> FuzzRunner {
        let demo = try await FeedWebDemo.start()
        let ports = AsyncStream.makeStream(of: Int.self)
        let (stopped, stop) = AsyncStream.makeStream(of: Void.self)
        let serving = Task {
            try await demo.serving { port in
                ports.continuation.yield(port)
                for await _ in stopped {}
            }
        }
        var iterator = ports.stream.makeAsyncIterator()
        guard let port = await iterator.next() else {
            _ = try await serving.value
            throw PropertyViolation("the web demo did not start")
        }
        let token = demo.inspector.token
        return FuzzRunner(
            run: { bytes throws(PropertyViolation) in
                try webDemoRequest(bytes, port: port, token: token, paths: paths, demo: demo)
            },
            stop: {
                stop.finish()
                _ = try? await serving.value
                await demo.stop()
            })
    }

    static func webDemoRequest(_ bytes: [UInt8], port: Int, token: String, paths: [String], demo: FeedWebDemo) throws(PropertyViolation) {
        var reader = FuzzReader(bytes)
        let method = reader.pick(["GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH", reader.string(maxCount: 8)])
        let path = reader.pick(paths) + oneLine(reader.string(maxCount: 24))
        let query = reader.pick([
            "", "?online=true", "?online=false", "?advance=60", "?advance=-1", "?advance=99999999999",
            "?key=" + oneLine(reader.string(maxCount: 24)), "?token=" + token, "?",
        ]) + oneLine(reader.string(maxCount: 24))
        let tokenChoice = reader.int(in: 0...3)
        let authorized = tokenChoice == 0
        var head = "\(oneLine(method)) \(path)\(query) HTTP/1.1\r\nHost: \(reader.pick(["127.0.0.1", "localhost", "evil.test", oneLine(reader.string(maxCount: 16))]))\r\n"
        switch tokenChoice {
        case 0: head += "X-Strata-Token: \(token)\r\n"
        case 1: head += "X-Strata-Token: \(oneLine(reader.string(maxCount: 40)))\r\n"
        default: break
        }
        if reader.bool() { head += "Origin: \(reader.pick(["http://127.0.0.1", "https://evil.test", "null"]))\r\n" }
        if reader.bool() { head += "Content-Type: \(reader.pick(["application/json", "text/plain", "application/x-www-form-urlencoded"]))\r\n" }
        if reader.bool() { head += oneLine(reader.string(maxCount: 40)) + "\r\n" }
        let body = reader.rest()
        head += "Content-Length: \(body.count)\r\nConnection: close\r\n\r\n"
        let answer = LoopbackConnection.exchange(port: port, sending: Array(head.utf8) + body, timeout: .seconds(1))
        try checkResponses(answer, from: "the web demo")
        if let status = LoopbackConnection.statusCodes(in: answer).first {
            try check(status != 500, "\(method) \(path)\(query) was answered 500")
            if !authorized, method == "POST", path.hasPrefix("/api/") || path.hasPrefix("/inspector/api/") {
                try check(status >= 400, "\(method) \(path)\(query) without the token was answered \(status)")
            }
        }
        try checkAlive(
            port: port, request: "GET /api/feed HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Strata-Token: \(token)\r\nConnection: close\r\n\r\n",
            server: "the web demo")
    }

    /// `text` without the bytes that would end a header line.
    static func oneLine(_ text: String) -> String {
        String(text.unicodeScalars.filter { $0 != "\r" && $0 != "\n" }.map(Character.init))
    }

    // MARK: Properties

    /// Whatever a server answered on one connection: nothing (it closed), or responses each with a
    /// status line `HTTP/1.x NNN`.
    static func checkResponses(_ answer: [UInt8], from server: String) throws(PropertyViolation) {
        guard !answer.isEmpty else { return }
        try check(answer.starts(with: Array("HTTP/1.".utf8)), "\(server) answered bytes that are not an HTTP response: \(String(decoding: answer.prefix(80), as: UTF8.self).debugDescription)")
        try check(LoopbackConnection.statusCodes(in: answer).first.map { (100...599).contains($0) } ?? false, "\(server) answered a status line without a valid status")
    }

    /// A request on a new connection is answered 200: the input did not take the server down.
    static func checkAlive(port: Int, request: String, server: String) throws(PropertyViolation) {
        let answer = LoopbackConnection.exchange(port: port, sending: Array(request.utf8), timeout: .seconds(10))
        try check(
            LoopbackConnection.statusCodes(in: answer).first == 200,
            "\(server) no longer answers: \(String(decoding: answer.prefix(80), as: UTF8.self).debugDescription)")
    }
}

/// One blocking TCP exchange with a server on 127.0.0.1: connect, send, half-close, read to the end.
enum LoopbackConnection {
    /// What the server sent before it closed the connection or `timeout` passed.
    static func exchange(port: Int, sending bytes: [UInt8], timeout: Duration) -> [UInt8] {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return [] }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var wait = timeval(tv_sec: Int(timeout.components.seconds), tv_usec: Int(timeout.components.attoseconds / 1_000_000_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { return [] }
        var sent = 0
        while sent < bytes.count {
            let written = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard written > 0 else { break }
            sent += written
        }
        shutdown(fd, Int32(SHUT_WR))
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while answer.count < 4 * 1024 * 1024 {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { break }
            answer += buffer[..<count]
        }
        return answer
    }

    /// The status codes of the status lines that open the responses in `answer` (the first one, and
    /// each later line that starts with `HTTP/1.` after a blank line).
    static func statusCodes(in answer: [UInt8]) -> [Int] {
        let text = String(decoding: answer, as: UTF8.self)
        var codes: [Int] = []
        for (index, part) in text.components(separatedBy: "\r\n\r\n").enumerated() {
            let line = index == 0 ? Substring(part) : part.drop(while: { $0 != "H" })
            guard line.hasPrefix("HTTP/1."), let code = Int(line.dropFirst(9).prefix(3)) else { continue }
            codes.append(code)
        }
        return codes
    }
}
#else
enum ServerTargets {
    static let all: [FuzzTarget] = []
}
#endif
