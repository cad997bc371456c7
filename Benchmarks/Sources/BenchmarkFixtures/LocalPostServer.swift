import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Python's `ThreadingHTTPServer` on 127.0.0.1 answering `201` to every `POST` (HTTP/1.1, keep-alive):
/// a server this project did not write, the same for both sides of the drain benchmark.
public final class LocalPostServer: Sendable {
    let process: Process
    /// `http://127.0.0.1:<port>`.
    public let baseURL: URL

    private init(process: Process, port: Int) {
        self.process = process
        self.baseURL = URL(string: "http://127.0.0.1:\(port)")!
    }

    static let script = """
        import http.server, sys, time
        delay = float(sys.argv[1]) if len(sys.argv) > 1 else 0.0
        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed-ACK stall
            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if delay > 0: time.sleep(delay)  # the network's round trip, in its own thread
                body = b'{"id":1}'
                self.send_response(201)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            def log_message(self, *args):
                pass
        # A backlog of 5 (socketserver's default) drops the SYN of the 6th of 10 connections opened
        # at once, which the client sends again only after a second.
        http.server.ThreadingHTTPServer.request_queue_size = 64
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        print(server.server_address[1], flush=True)
        server.serve_forever()
        """

    /// Starts the server and waits for its port. With a `delay`, each answer waits that long first,
    /// in its request's own thread: a network's round trip, during which other requests go on.
    public static func start(delay: Duration = .zero) throws -> LocalPostServer {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", script, String(Double(delay.components.attoseconds) / 1e18 + Double(delay.components.seconds))]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = output.fileHandleForReading.availableData
            guard !chunk.isEmpty else { throw CocoaError(.fileReadUnknown) }
            line.append(chunk)
        }
        guard let port = Int(String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw CocoaError(.fileReadCorruptFile)
        }
        return LocalPostServer(process: process, port: port)
    }

    /// Kills the server (SIGKILL: `terminate()`'s SIGTERM was seen not to end it here) and waits
    /// until it is gone.
    public func stop() {
        kill(process.processIdentifier, SIGKILL)
        while process.isRunning { usleep(1_000) }
    }
}
