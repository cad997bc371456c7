import Foundation
import Testing
import StrataTesting

/// The `strata` binary revalidating against static-file servers this project did not write:
/// Python's `http.server` (sends `Last-Modified`, honours `If-Modified-Since`) and nginx (sends
/// `ETag` and `Last-Modified`, answers 304, adds `Cache-Control` where configured). Each test starts
/// its server as a child process on a free port of 127.0.0.1, waits until the port accepts (bounded),
/// and stops it. Time moves through the binary's hidden `--now`, so "ten minutes later" takes no time;
/// the server's own clock and the files' modification times are real.
@Suite("strata fetch against other servers", .timeLimit(.minutes(3)))
struct ExternalServerFetchTests {
    /// The time of the first fetch; later fetches pass `--now` this plus some minutes.
    static let start = Date(timeIntervalSince1970: 1_893_456_000)  // 2030-01-01T00:00:00Z

    static func now(plus seconds: Int) -> String {
        ISO8601DateFormatter().string(from: start.addingTimeInterval(TimeInterval(seconds)))
    }

    /// `strata fetch URL` at `start + seconds`, with its own cache directory.
    static func fetch(_ url: URL, cache: URL, at seconds: Int, maxAge: String = "5m") async throws -> (status: Int32, stdout: Data, stderr: String) {
        try await TwoProcessTests.run([
            "fetch", url.absoluteString, "--cache-dir", cache.path, "--max-age", maxAge, "--retries", "0",
            "--now", now(plus: seconds),
        ])
    }

    /// Writes `text` to `file` and sets its modification time to `modified`.
    static func write(_ text: String, to file: URL, modified: Date) throws {
        try Data(text.utf8).write(to: file)
        try FileManager.default.setAttributes([.modificationDate: modified], ofItemAtPath: file.path)
    }

    /// The scenario both servers must pass: download (200); past `--max-age` a conditional request
    /// that gets 304 and serves the same body; re-stamped, so fresh again; after the file changed, the
    /// new body (200).
    static func revalidationScenario(_ server: ExternalServer, directory: TemporaryDirectory) async throws {
        let file = server.root.appendingPathComponent("data.json")
        let url = server.baseURL.appendingPathComponent("data.json")
        let cache = directory.appending("cache")
        let realNow = Date()
        try write(#"{"version":1}"#, to: file, modified: realNow.addingTimeInterval(-3600))

        let first = try await fetch(url, cache: cache, at: 0)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout == Data(#"{"version":1}"#.utf8))
        #expect(first.stderr.contains("served from remote (downloaded: 200, age 0s, saved to the cache)"), "\(first.stderr)")

        let second = try await fetch(url, cache: cache, at: 600)
        #expect(second.status == 0, "\(second.stderr)")
        #expect(second.stdout == first.stdout)
        #expect(second.stderr.contains("served from remote (revalidated: 304 Not Modified, served the cached copy, fresh again)"), "\(second.stderr)")
        #expect(try server.statuses(of: "/data.json") == [200, 304], "the server's log: \(server.logText())")

        let third = try await fetch(url, cache: cache, at: 840)
        #expect(third.stdout == first.stdout)
        #expect(third.stderr.contains("served from fresh cache (age 4m 0s)"), "re-stamped by the 304: \(third.stderr)")
        #expect(try server.statuses(of: "/data.json") == [200, 304], "no request while fresh again")

        try write(#"{"version":2}"#, to: file, modified: realNow)
        let fourth = try await fetch(url, cache: cache, at: 1800)
        #expect(fourth.status == 0, "\(fourth.stderr)")
        #expect(fourth.stdout == Data(#"{"version":2}"#.utf8))
        #expect(fourth.stderr.contains("served from remote (downloaded: 200, age 0s, saved to the cache)"), "\(fourth.stderr)")
        #expect(try server.statuses(of: "/data.json") == [200, 304, 200], "the server's log: \(server.logText())")
    }

    @Test func pythonHTTPServer_lastModified_304() async throws {
        let directory = try TemporaryDirectory(prefix: "strata-python-http")
        let server = try await ExternalServer.python(in: directory)
        do {
            try await Self.revalidationScenario(server, directory: directory)
        } catch {
            await server.stop()
            throw error
        }
        let status = await server.stop()
        #expect(status == 0 || status == 128 + SIGTERM, "stopped by SIGTERM, not by the watchdog: \(String(describing: status))")
        #expect(!ExternalServer.accepts(port: server.port), "the server is gone")
    }

    @Test func nginx_etagAndLastModified_304() async throws {
        let directory = try TemporaryDirectory(prefix: "strata-nginx")
        let server = try await ExternalServer.nginx(in: directory)
        do {
            try await Self.revalidationScenario(server, directory: directory)
        } catch {
            await server.stop()
            throw error
        }
        let status = await server.stop()
        #expect(status == 0 || status == 128 + SIGTERM, "stopped by SIGTERM, not by the watchdog: \(String(describing: status))")
        #expect(!ExternalServer.accepts(port: server.port), "the server is gone")
    }

    /// nginx adding `Cache-Control` (`add_header`) under three folders: what the second fetch does.
    @Test(arguments: [
        // no-store: never cached, so the second fetch downloads again although --max-age is 5m.
        (folder: "no-store", secondAt: 60, maxAge: "5m", statuses: [200, 200], report: "downloaded: 200, age 0s, not cached: Cache-Control no-store"),
        // no-cache: revalidated every time, even within --max-age.
        (folder: "no-cache", secondAt: 60, maxAge: "5m", statuses: [200, 304], report: "revalidated: 304 Not Modified"),
        // max-age=60 shortens --max-age 1h: at 30 s the copy is fresh ...
        (folder: "max-age-60", secondAt: 30, maxAge: "1h", statuses: [200], report: "served from fresh cache (age 30s)"),
        // ... and at 2 minutes it is revalidated.
        (folder: "max-age-60", secondAt: 120, maxAge: "1h", statuses: [200, 304], report: "revalidated: 304 Not Modified"),
    ])
    func nginx_cacheControl(folder: String, secondAt: Int, maxAge: String, statuses: [Int], report: String) async throws {
        let directory = try TemporaryDirectory(prefix: "strata-nginx-cc")
        let server = try await ExternalServer.nginx(in: directory)
        do {
            let path = "/\(folder)/data.json"
            let file = server.root.appendingPathComponent(folder).appendingPathComponent("data.json")
            try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Self.write(#"{"folder":"\#(folder)"}"#, to: file, modified: Date().addingTimeInterval(-3600))
            let url = server.baseURL.appendingPathComponent(folder).appendingPathComponent("data.json")
            let cache = directory.appending("cache")

            let first = try await Self.fetch(url, cache: cache, at: 0, maxAge: maxAge)
            let second = try await Self.fetch(url, cache: cache, at: secondAt, maxAge: maxAge)

            #expect(first.status == 0 && second.status == 0, "\(first.stderr) \(second.stderr)")
            #expect(second.stdout == first.stdout)
            #expect(second.stdout == Data(#"{"folder":"\#(folder)"}"#.utf8))
            #expect(second.stderr.contains(report), "\(second.stderr)")
            #expect(try server.statuses(of: path) == statuses, "the server's log: \(server.logText())")
        } catch {
            await server.stop()
            throw error
        }
        let status = await server.stop()
        #expect(status == 0, "nginx stopped by SIGTERM: \(String(describing: status))")
    }
}

/// A static-file server run as a child process on 127.0.0.1; ``stop()`` ends and reaps it.
struct ExternalServer {
    let child: Child
    let port: Int
    /// The folder the server serves.
    let root: URL
    /// Where the server logs its requests (nginx's access log, Python's standard error).
    let log: URL

    var baseURL: URL { URL(string: "http://127.0.0.1:\(port)")! }

    /// `python3 -m http.server --bind 127.0.0.1 PORT --directory ROOT`, on a free port or on `port`
    /// (a server started again where a stopped one was). Its log starts empty each time.
    static func python(in directory: TemporaryDirectory, port: Int? = nil) async throws -> ExternalServer {
        let python = try executable("python3", hint: "install Python 3")
        let root = directory.appending("www")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let port = try port ?? ListeningSocket.freePort()
        let log = directory.appending("python-stderr.log")
        let child = try Child.spawn(
            python, ["-u", "-m", "http.server", "--bind", "127.0.0.1", String(port), "--directory", root.path],
            pipeStdin: false, pipeStdout: false, stdoutFile: directory.appending("python-stdout.log"), stderrFile: log)
        return try await ExternalServer(child: child, port: port, root: root, log: log).ready()
    }

    /// nginx in the foreground, one process (`daemon off; master_process off`), with its
    /// configuration, pid file, logs and temporary folders in `directory`. `/no-store/`,
    /// `/no-cache/` and `/max-age-60/` answer with that `Cache-Control`.
    static func nginx(in directory: TemporaryDirectory) async throws -> ExternalServer {
        let nginx = try executable("nginx", hint: "Debian: apt-get install -y --no-install-recommends nginx")
        let root = directory.appending("www")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let port = try ListeningSocket.freePort()
        let prefix = directory.url.path
        let log = directory.appending("access.log")
        let configuration = """
            daemon off;
            master_process off;
            worker_processes 1;
            pid \(prefix)/nginx.pid;
            error_log \(prefix)/error.log;
            events { worker_connections 64; }
            http {
                access_log \(log.path);
                client_body_temp_path \(prefix)/client_body;
                proxy_temp_path \(prefix)/proxy;
                fastcgi_temp_path \(prefix)/fastcgi;
                uwsgi_temp_path \(prefix)/uwsgi;
                scgi_temp_path \(prefix)/scgi;
                types { application/json json; }
                server {
                    listen 127.0.0.1:\(port);
                    root \(root.path);
                    location /no-store/ { add_header Cache-Control "no-store"; }
                    location /no-cache/ { add_header Cache-Control "no-cache"; }
                    location /max-age-60/ { add_header Cache-Control "max-age=60"; }
                }
            }
            """
        let configurationFile = directory.appending("nginx.conf")
        try Data(configuration.utf8).write(to: configurationFile)
        let child = try Child.spawn(
            nginx, ["-p", prefix, "-c", configurationFile.path, "-e", "\(prefix)/error.log"],
            pipeStdin: false, pipeStdout: false, stdoutFile: directory.appending("nginx-stdout.log"),
            stderrFile: directory.appending("nginx-stderr.log"))
        return try await ExternalServer(child: child, port: port, root: root, log: log).ready()
    }

    /// Waits until the port accepts connections: polls every 20 ms for at most 20 s, then stops the
    /// server and fails with what it logged.
    private func ready() async throws -> ExternalServer {
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            if Self.accepts(port: port) { return self }
            try await Task.sleep(for: .milliseconds(20))
        }
        await stop()
        let logs = (try? FileManager.default.contentsOfDirectory(at: log.deletingLastPathComponent(), includingPropertiesForKeys: nil)) ?? []
        let text = logs.filter { $0.pathExtension == "log" }
            .map { "\($0.lastPathComponent): " + ((try? String(contentsOf: $0, encoding: .utf8)) ?? "") }
        throw TestError("the server did not listen on 127.0.0.1:\(port) within 20 s; \(text.joined(separator: "\n"))")
    }

    /// Ends the server (SIGTERM) and reaps it, waiting on a thread of its own (never on the
    /// cooperative pool, which the other tests' servers and fetches need).
    /// Returns its exit status (143 for a SIGTERM that killed it; 137 would mean the one-minute
    /// watchdog had to SIGKILL it).
    @discardableResult
    func stop() async -> Int32? {
        let child = child
        child.signal(SIGTERM)
        return try? await TwoProcessTests.offPool { child.wait() }
    }

    /// The server's log, or why it cannot be read.
    func logText() -> String {
        do {
            return String(decoding: try Data(contentsOf: log), as: UTF8.self)
        } catch {
            return "(cannot read \(log.path): \(error))"
        }
    }

    /// The statuses the server logged for `GET path`, in order. Both servers log
    /// `"GET /path HTTP/1.1" STATUS …`.
    func statuses(of path: String) throws -> [Int] {
        String(decoding: try Data(contentsOf: log), as: UTF8.self).split(separator: "\n").compactMap { line -> Int? in
            guard let request = line.range(of: "\"GET \(path) HTTP/") else { return nil }
            guard let close = line[request.upperBound...].range(of: "\" ") else { return nil }
            return Int(line[close.upperBound...].prefix { $0.isNumber })
        }
    }

    /// The first `name` on `PATH`, then in the usual system folders.
    static func executable(_ name: String, hint: String) throws -> URL {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        let folders = path.split(separator: ":").map(String.init) + ["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin", "/opt/homebrew/bin"]
        guard let found = folders.map({ URL(fileURLWithPath: $0).appendingPathComponent(name) })
            .first(where: { FileManager.default.isExecutableFile(atPath: $0.path) })
        else { throw TestError("\(name) is not installed (\(hint)); these tests need it") }
        return found
    }

    /// Whether a TCP connection to 127.0.0.1:`port` is accepted now.
    static func accepts(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = loopback(port: UInt16(port))
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
    }

    private static func loopback(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return address
    }
}
