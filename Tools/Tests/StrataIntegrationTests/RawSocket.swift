import Foundation
import StrataTesting
#if canImport(Glibc)
import Glibc
#endif

/// A plain TCP connection to an IPv4 address: to ask whether a server accepts connections on an
/// address, and to read a server-sent event stream line by line as it arrives (URLSession on Linux
/// hands a body over only once it has ended). Blocking: use it from ``TwoProcessTests/offPool(_:)``.
/// Every read gives up after `timeout`, so a stream that stops never hangs a test.
///
/// `@unchecked Sendable`: its buffer is used by one thread at a time. A test hands it to one
/// `offPool` call at a time and awaits each before the next, so no two reads overlap.
final class RawSocket: @unchecked Sendable {
    let fd: Int32
    private var buffer: [UInt8] = []
    /// The field names (lowercased) the last ``readResponse()`` saw more than once.
    private(set) var repeatedFieldNames: Set<String> = []

    /// Connects to `host:port`; throws when the connection is refused (or fails otherwise).
    init(host: String, port: Int, timeout: Duration = .seconds(10)) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TestError("socket failed: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else {
            throw TestError("\(host) is not an IPv4 address")
        }
        var limit = timeval(tv_sec: Int(timeout.components.seconds), tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            let failure = errno
            throw TestError("could not connect to \(host):\(port): \(String(cString: strerror(failure)))")
        }
    }

    /// The one place the descriptor is closed. It runs also when `init` throws once `fd` is set (a
    /// class whose stored properties are all initialised is deinitialised when its initialiser
    /// throws): a `close` in `init`'s error paths as well closed the number twice, and the second
    /// `close` could close whatever another thread had opened under it in between, such as a socket
    /// the demo server had just accepted (NIO then failed `getsockname` with EBADF and trapped).
    deinit {
        if fd >= 0 { Glibc.close(fd) }
    }

    /// Whether `host:port` accepts a TCP connection now.
    static func accepts(host: String, port: Int) -> Bool {
        (try? RawSocket(host: host, port: port)) != nil
    }

    /// The first IPv4 address of this machine that is not a loopback one (`nil` if it has none).
    static func nonLoopbackAddress() -> String? {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0 else { return nil }
        defer { freeifaddrs(list) }
        var node = list
        while let current = node {
            defer { node = current.pointee.ifa_next }
            guard let address = current.pointee.ifa_addr, address.pointee.sa_family == sa_family_t(AF_INET) else { continue }
            var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
            let found = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { ipv4 -> String? in
                var bytes = ipv4.pointee.sin_addr
                guard inet_ntop(AF_INET, &bytes, &text, socklen_t(INET_ADDRSTRLEN)) != nil else { return nil }
                return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            }
            if let found, !found.hasPrefix("127.") { return found }
        }
        return nil
    }

    func send(_ text: String) throws {
        let bytes = Array(text.utf8)
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard count > 0 else { throw TestError("send failed: errno \(errno)") }
            sent += count
        }
    }

    /// The next `count` bytes; throws when the peer closed or nothing came in time.
    func readBytes(_ count: Int) throws -> [UInt8] {
        while buffer.count < count {
            var chunk = [UInt8](repeating: 0, count: 4096)
            let received = recv(fd, &chunk, chunk.count, 0)
            guard received > 0 else {
                throw TestError(received == 0 ? "the server closed the connection" : "nothing arrived in time (errno \(errno))")
            }
            buffer.append(contentsOf: chunk[..<received])
        }
        defer { buffer.removeFirst(count) }
        return Array(buffer[..<count])
    }

    /// One HTTP/1.1 response: its status line, its header fields (names lowercased) and its body,
    /// framed by `Content-Length`.
    func readResponse() throws -> (status: String, fields: [String: String], body: String) {
        let status = try readLine()
        var fields: [String: String] = [:]
        repeatedFieldNames = []
        while true {
            let line = try readLine()
            if line.isEmpty { break }
            if let colon = line.firstIndex(of: ":") {
                let name = line[..<colon].lowercased()
                if fields[name] != nil { repeatedFieldNames.insert(name) }
                fields[name] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
        }
        let length = Int(fields["content-length"] ?? "0") ?? 0
        return (status, fields, String(decoding: try readBytes(length), as: UTF8.self))
    }

    /// The next line (without its CR LF); throws when the peer closed or nothing came in time.
    func readLine() throws -> String {
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                var line = Array(buffer[..<newline])
                buffer.removeSubrange(...newline)
                if line.last == UInt8(ascii: "\r") { line.removeLast() }
                return String(decoding: line, as: UTF8.self)
            }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let count = recv(fd, &chunk, chunk.count, 0)
            guard count > 0 else {
                throw TestError(count == 0 ? "the server closed the connection" : "nothing arrived in time (errno \(errno))")
            }
            buffer.append(contentsOf: chunk[..<count])
        }
    }
}

/// A server-sent event stream read over a ``RawSocket``: `GET path`, the response head, then one
/// event at a time. Sendable as its socket is, for the same reason.
final class EventStreamReader: Sendable {
    struct Event: Sendable {
        var name: String
        var data: String
    }

    private let socket: RawSocket
    /// The response's status line and header fields.
    let head: [String]

    init(port: Int, path: String) throws {
        socket = try RawSocket(host: "127.0.0.1", port: port)
        try socket.send("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nAccept: text/event-stream\r\n\r\n")
        var head: [String] = []
        while true {
            let line = try socket.readLine()
            if line.isEmpty { break }
            head.append(line)
        }
        self.head = head
    }

    /// Whether the body is chunked (Hummingbird streams a body of unknown length so).
    private var chunked: Bool { head.contains { $0.lowercased() == "transfer-encoding: chunked" } }

    /// The next event: its `event:` name and its `data:` lines joined.
    func next() throws -> Event {
        var name = "message"
        var data: [String] = []
        while true {
            let line = try socket.readLine()
            // A chunked body's size lines are not part of the stream; an event never holds a line
            // of bare hexadecimal digits.
            if chunked, !line.isEmpty, line.allSatisfy(\.isHexDigit) { continue }
            if line.isEmpty {
                if !data.isEmpty { return Event(name: name, data: data.joined(separator: "\n")) }
                continue
            }
            if line.hasPrefix("event:") { name = line.dropFirst(6).trimmingCharacters(in: .whitespaces) }
            if line.hasPrefix("data:") { data.append(String(line.dropFirst(5)).trimmingCharacters(in: .whitespaces)) }
        }
    }
}
