import ArgumentParser
import Foundation
import Testing
@_spi(StrataInternals) import Strata
@testable import StrataCLI
import DemoServer
import StrataTesting

/// What one `strata fetch` run printed.
final class CapturedOutput: Sendable {
    private let out = Locked(Data())
    private let err = Locked([String]())
    var body: Data { out.withLock { $0 } }
    var report: [String] { err.withLock { $0 } }
    var stdout: @Sendable (Data) -> Void { { data in self.out.withLock { $0.append(data) } } }
    var stderr: @Sendable (String) -> Void { { line in self.err.withLock { $0.append(line) } } }
}

@Suite("strata fetch", .timeLimit(.minutes(3)))
final class FetchTests {
    let directory: TemporaryDirectory
    let clock = ManualClock()

    init() throws {
        directory = try TemporaryDirectory(prefix: "strata-fetch")
    }

    func fetch(_ url: URL, maxAge: Duration = .seconds(300), maxStale: Duration? = nil, retries: Int = 0,
               defaultFile: URL? = nil, json: Bool = false) async -> (Fetcher.ExitCode, CapturedOutput) {
        let output = CapturedOutput()
        let options = Fetcher.Options(
            url: url, cacheDirectory: directory.url, maxAge: maxAge, maxStale: maxStale, retries: retries,
            // Generous: a real request to the in-process server. The whole test process has been seen
            // to stall for ~30 s early in a loaded CI run; no test here is about the timeout.
            timeout: .seconds(90), defaultFile: defaultFile, json: json)
        let code = await Fetcher(options: options, now: clock.wallClock).run(stdout: output.stdout, stderr: output.stderr)
        return (code, output)
    }

    @Test func online_servesTheRemoteBodyAndSavesIt() async throws {
        try await withDemoServer { server in
            let (code, output) = await fetch(server.feedURL)

            let feed = try JSONDecoder().decode([FeedItem].self, from: output.body)
            #expect(code == .served)
            #expect(feed == DemoData.feed)
            #expect(output.report == ["strata fetch: served from remote (downloaded: 200, age 0s, saved to the cache), \(output.body.count) bytes"])
        }
    }

    @Test func withinMaxAge_servesTheFreshCacheWithoutARequest() async throws {
        try await withDemoServer { server in
            _ = await fetch(server.feedURL)
            clock.advance(by: .seconds(60))

            let (code, output) = await fetch(server.feedURL, maxAge: .seconds(120))

            #expect(code == .served)
            #expect(output.report.last?.hasPrefix("strata fetch: served from fresh cache (age 1m 0s)") == true)
            #expect(server.requestCount() == 1)
        }
    }

    @Test func serverStopped_servesTheStaleCopy() async throws {
        try await withDemoServer { server in
            let (_, first) = await fetch(server.feedURL)
            await server.goOffline()
            clock.advance(by: .seconds(3600))

            let (code, output) = await fetch(server.feedURL, maxAge: .seconds(60))

            #expect(code == .served)
            #expect(output.body == first.body)
            #expect(output.report.last?.hasPrefix("strata fetch: served from stale cache (age 1h 0m)") == true)
        }
    }

    @Test func copyOlderThanMaxStale_isNotServed() async throws {
        try await withDemoServer { server in
            _ = await fetch(server.feedURL)
            await server.goOffline()
            clock.advance(by: .seconds(2 * 86_400))

            let (code, output) = await fetch(server.feedURL, maxAge: .seconds(60), maxStale: .seconds(86_400))

            #expect(code == .nothingServed)
            #expect(output.body.isEmpty)
            #expect(output.report.count == 1)
            #expect(output.report[0].contains("stale cache: cached copy too old (2d 0h)"))
        }
    }

    @Test func nothingAnywhere_exitsNonZeroWithOneLineSayingWhyPerTier() async throws {
        try await withDemoServer { server in
            await server.goOffline()
            let (code, output) = await fetch(server.feedURL)

            #expect(code == .nothingServed)
            #expect(code.rawValue == 1)
            #expect(output.report == [
                "strata fetch: nothing to serve for \(server.feedURL.absoluteString): "
                    + "remote: could not connect (connection refused); stale cache: nothing cached; default: no --default file given",
            ])
        }
    }

    @Test func defaultFile_isServedWhenThereIsNeitherNetworkNorCache() async throws {
        try await withDemoServer { server in
            await server.goOffline()
            let file = directory.appending("default.json")
            try Data("[]".utf8).write(to: file)

            let (code, output) = await fetch(server.feedURL, defaultFile: file)

            #expect(code == .served)
            #expect(output.body == Data("[]".utf8))
            #expect(output.report.last?.hasPrefix("strata fetch: served from default") == true)
        }
    }

    @Test func serverError_isNotCachedAndFallsBackToTheCopy() async throws {
        try await withDemoServer { server in
            let (_, first) = await fetch(server.feedURL)
            server.faults = .init(status: 500)
            clock.advance(by: .seconds(600))

            let (code, output) = await fetch(server.feedURL, maxAge: .seconds(60))

            #expect(code == .served)
            #expect(output.body == first.body)
            let cached = try await FileStore<Data>(directory: directory.url, codec: DataCodec()).retrieve(server.feedURL.absoluteString)
            #expect(cached?.value == first.body, "the 500 body never replaces the good copy")
        }
    }

    @Test func json_reportsProvenanceAsOneObject() async throws {
        try await withDemoServer { server in
            _ = await fetch(server.feedURL)
            clock.advance(by: .seconds(30))

            let (_, output) = await fetch(server.feedURL, json: true)

            let object = try #require(try JSONSerialization.jsonObject(with: Data(output.report[0].utf8)) as? [String: Any])
            #expect(object["servedFrom"] as? String == "fresh cache")
            #expect(object["origin"] as? String == "disk")
            #expect(object["ageSeconds"] as? Double == 30)
            #expect(object["url"] as? String == server.feedURL.absoluteString)
        }
    }
}

@Suite("strata command line", .timeLimit(.minutes(3)))
struct CommandLineTests {
    @Test(arguments: [
        ("500ms", Duration.milliseconds(500)), ("30s", .seconds(30)), ("10m", .seconds(600)), ("2h", .seconds(7200)),
        ("7d", .seconds(604_800)), ("90", .seconds(90)), ("1.5s", .milliseconds(1500)),
    ])
    func durations_parse(text: String, expected: Duration) {
        #expect(DurationArgument(argument: text)?.duration == expected)
    }

    @Test(arguments: ["", "abc", "-5s", "10x", "s", "infs"])
    func badDurations_areRejected(text: String) {
        #expect(DurationArgument(argument: text) == nil)
    }

    @Test(arguments: [
        ["fetch", "notaurl"], ["fetch", "ftp://example.com/x"], ["fetch", "http://"],
        ["fetch", "http://example.com", "--retries", "99"], ["fetch", "http://example.com", "--max-age", "soon"],
        ["fetch", "http://example.com", "--default", "/no/such/file"], ["serve", "--status", "42"],
        ["serve", "--error-rate", "2"], ["demo", "--scenario", "nope"],
    ])
    func badFlagsAndURLs_areUsageErrorsWithAMessage(arguments: [String]) {
        do {
            _ = try StrataCommand.parseAsRoot(arguments)
            Issue.record("expected \(arguments) to be rejected")
        } catch {
            #expect(StrataCommand.exitCode(for: error).rawValue == 64)
            #expect(!StrataCommand.message(for: error).isEmpty)
        }
    }

    @Test(arguments: ["", "demo", "serve", "fetch"])
    func everySubcommandHasHelp(subcommand: String) {
        let types: [String: any ParsableCommand.Type] = [
            "": StrataCommand.self, "demo": DemoCommand.self, "serve": ServeCommand.self, "fetch": FetchCommand.self,
        ]
        let help = StrataCommand.helpMessage(for: types[subcommand]!)
        #expect(help.contains("USAGE: strata" + (subcommand.isEmpty ? "" : " \(subcommand)")))
        #expect(help.contains("OVERVIEW:"))
    }
}

@Suite("strata serve controls", .timeLimit(.minutes(3)))
struct ServeControlTests {
    @Test func commandsChangeTheRunningServer() async throws {
        try await withDemoServer { server in
            let control = ServeControl(server: server)

            #expect(await control.apply("status 503 0.5") == "faults: status 503 on 50% of requests")
            #expect(server.faults.status == 503 && server.faults.errorRate == 0.5)
            #expect(await control.apply("latency 250ms") == "faults: status 503 on 50% of requests, +250ms latency")
            #expect(await control.apply("truncate on").hasSuffix("truncated bodies"))
            #expect(await control.apply("cache-control max-age=60, public").hasSuffix("truncated bodies, Cache-Control: max-age=60, public"))
            #expect(server.faults.cacheControl == "max-age=60, public")
            #expect(await control.apply("cache-control off").hasSuffix("truncated bodies"))
            #expect(server.faults.cacheControl == nil)
            #expect(await control.apply("healthy") == "faults: none")
            #expect(server.faults == .none)

            _ = await control.apply("offline")
            #expect(!server.isOnline)
            await #expect(throws: HTTPError.self) { try await HTTPLoader(url: server.feedURL).load() }
            #expect(await control.apply("online").hasPrefix("online: listening on"))
            let status = try await HTTPLoader(url: server.feedURL).load().status.code
            #expect(status == 200)

            #expect(await control.apply("status 42").hasPrefix("usage:"))
            #expect(await control.apply("dance").hasPrefix("unknown command"))
            #expect(await control.apply("quit") == ServeControl.quitReply)
        }
    }
}

/// A child process spawned with `posix_spawn` and reaped with `waitpid`: Foundation's `Process` on
/// Linux sometimes misses a child's exit when many tests run in one process, so the test does not
/// depend on it.
struct Child {
    let pid: pid_t
    /// The child's exit status once it has been reaped; `nil` before. The child is signalled only
    /// under this lock while it is `nil`, so no signal reaches a recycled pid.
    let reaped = Locked<Int32?>(nil)
    /// Held by the one `wait()` that reaps the child: a second `wait()` (a test's, then its
    /// cleanup's, as `ProxyFleetTests` does for a node it killed) returns the same status, and never
    /// closes the pipes' descriptors again: by then those numbers may belong to another test's
    /// socket or file.
    let reaping = Locked(())
    /// The write end of the child's standard input (the parent's copy), or -1.
    let stdinWriter: Int32
    /// The read end of the child's standard output (the parent's copy), or -1.
    let stdoutReader: Int32

    /// Spawns `executable` with `arguments`. Standard input and output are pipes when asked for,
    /// otherwise `/dev/null` and `stdoutFile`; standard error goes to `stderrFile`. A child still
    /// running after `failsafe` seconds is killed.
    static func spawn(_ executable: URL, _ arguments: [String], pipeStdin: Bool, pipeStdout: Bool,
                      stdoutFile: URL?, stderrFile: URL, failsafe: Double = 60) throws -> Child {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var stdinPipe: [Int32] = [-1, -1]
        var stdoutPipe: [Int32] = [-1, -1]
        if pipeStdin {
            try makePipe(&stdinPipe)
            posix_spawn_file_actions_adddup2(&actions, stdinPipe[0], 0)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        if pipeStdout {
            try makePipe(&stdoutPipe)
            posix_spawn_file_actions_adddup2(&actions, stdoutPipe[1], 1)
        } else if let stdoutFile {
            posix_spawn_file_actions_addopen(&actions, 1, stdoutFile.path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        }
        posix_spawn_file_actions_addopen(&actions, 2, stderrFile.path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        // Nothing else of this process reaches the child: not the listening sockets of the in-process
        // servers other tests run, which would keep their ports accepting after those tests stop them.
        try closeFrom(3, in: &actions)

        // The child starts with no signal blocked and SIGTERM / SIGINT at their defaults: the thread
        // that spawns it (a Dispatch or pool thread) may block signals, and a child inheriting that
        // mask would never see the SIGTERM that stops it.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGTERM)
        sigaddset(&defaults, SIGINT)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let argv: [UnsafeMutablePointer<CChar>?] = ([executable.path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable.path, &actions, &attributes, argv, environ)
        if pipeStdin { close(stdinPipe[0]) }
        if pipeStdout { close(stdoutPipe[1]) }
        guard result == 0 else { throw TestError("posix_spawn \(executable.path) failed: \(result)") }
        let child = Child(pid: pid, stdinWriter: stdinPipe[1], stdoutReader: stdoutPipe[0])
        // A failsafe, not a wait: a child still running after a minute (by default) is killed, so a
        // hang (say, a server that never exits) fails the test through its exit status instead of
        // blocking the run.
        let reaped = child.reaped
        let spawned = pid
        DispatchQueue.global().asyncAfter(deadline: .now() + failsafe) {
            reaped.withLock { status in if status == nil { kill(spawned, SIGKILL) } }
        }
        return child
    }

    /// `posix_spawn_file_actions_addclosefrom_np` (glibc 2.34+), which Swift's Glibc module does not
    /// export, looked up at run time.
    static func closeFrom(_ fd: Int32, in actions: inout posix_spawn_file_actions_t) throws {
        typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        guard let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") else {
            throw TestError("this libc has no posix_spawn_file_actions_addclosefrom_np (glibc 2.34+ needed)")
        }
        guard unsafeBitCast(symbol, to: AddCloseFrom.self)(&actions, fd) == 0 else {
            throw TestError("posix_spawn_file_actions_addclosefrom_np failed")
        }
    }

    /// A pipe whose ends are closed on exec, so only the dup2'd copy reaches the child.
    private static func makePipe(_ fds: inout [Int32]) throws {
        guard pipe(&fds) == 0 else { throw TestError("pipe failed: \(errno)") }
        _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
    }

    /// Sends `number` to the child, unless it has been reaped (its pid may then be another process's).
    func signal(_ number: Int32) {
        reaped.withLock { status in if status == nil { kill(pid, number) } }
    }

    /// Waits for the child to exit and returns its exit status (128 + signal when it was killed).
    /// Only the first call reaps the child and closes the parent's pipe ends; a later one returns
    /// the same status.
    func wait() -> Int32 {
        reaping.withLock { _ in
            if let status = reaped.withLock({ $0 }) { return status }
            // Waits for the exit without reaping (WNOWAIT): the pid stays the child's, a zombie,
            // until it is reaped below under `reaped`'s lock, so `signal(_:)` and the watchdog
            // never signal a pid the system has handed to another process.
            var info = siginfo_t()
            while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR {}
            let exit = reaped.withLock { reaped in
                var status: Int32 = 0
                while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
                let signal = status & 0x7f
                let exit = signal == 0 ? (status >> 8) & 0xff : 128 + signal
                reaped = exit
                return exit
            }
            if stdinWriter >= 0 { close(stdinWriter) }
            if stdoutReader >= 0 { close(stdoutReader) }
            return exit
        }
    }

    /// Reads standard output until the first newline (or end of output).
    func readLine() -> String {
        var line = Data()
        var byte: UInt8 = 0
        while read(stdoutReader, &byte, 1) == 1 {
            if byte == UInt8(ascii: "\n") { break }
            line.append(byte)
        }
        return String(decoding: line, as: UTF8.self)
    }

    func write(_ text: String) {
        _ = text.utf8CString.withUnsafeBufferPointer { Foundation.write(stdinWriter, $0.baseAddress, $0.count - 1) }
    }
}

/// The built `strata` binary, run as separate processes: `serve` in one, `fetch` in another.
@Suite("strata, two processes", .timeLimit(.minutes(3)))
struct TwoProcessTests {
    /// The `strata` executable built next to this test binary.
    static func executable() throws -> URL {
        let candidates = [
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent(),
            Bundle.main.bundleURL,
            Bundle.main.bundleURL.deletingLastPathComponent(),
        ].map { $0.appendingPathComponent("strata") }
        guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0.path) }) else {
            throw TestError("no built strata executable next to the tests (looked in \(candidates.map(\.path)))")
        }
        return found
    }

    /// Runs `strata arguments` to completion; output is collected in files.
    static func finish(_ arguments: [String]) throws -> (status: Int32, stdout: Data, stderr: String) {
        let directory = try TemporaryDirectory(prefix: "strata-2p-out")
        let out = directory.appending("stdout")
        let err = directory.appending("stderr")
        let child = try Child.spawn(try executable(), arguments, pipeStdin: false, pipeStdout: false, stdoutFile: out, stderrFile: err)
        let status = child.wait()
        return (status, try Data(contentsOf: out), String(decoding: try Data(contentsOf: err), as: UTF8.self))
    }

    /// ``finish(_:)`` on a thread of its own: waiting for the child never blocks the cooperative pool,
    /// which the in-process demo server needs to answer that child.
    static func run(_ arguments: [String]) async throws -> (status: Int32, stdout: Data, stderr: String) {
        try await offPool { try finish(arguments) }
    }

    /// Runs blocking work (waiting for a child, reading its pipe) on a thread of its own, so it never
    /// holds one of the few threads every other test's async work runs on.
    static func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
        }
    }

    @Test func fetchServesFromTheServerThenFromTheCacheOnceTheServerIsStopped() async throws {
        let cache = try TemporaryDirectory(prefix: "strata-2p")
        // A port from the pool, not one the kernel picks: once the server quits, a port the kernel
        // picked may go to another test's server, which would answer the "offline" fetch.
        var started: (child: Child, firstLine: String)?
        for _ in 0..<8 where started == nil {
            let child = try Child.spawn(
                try Self.executable(), ["serve", "--port", "\(DemoServerPorts.shared.take())"], pipeStdin: true,
                pipeStdout: true, stdoutFile: nil, stderrFile: cache.appending("serve-stderr"))
            // The first line names the URL the server listens on (none when the port is held).
            let line = try await Self.offPool { child.readLine() }
            if line.hasPrefix("strata serve: listening on http://127.0.0.1:") {
                started = (child, line)
            } else {
                child.signal(SIGKILL)
                _ = child.wait()
            }
        }
        let (serve, firstLine) = try #require(started, "strata serve listened on none of 8 ports of the pool")
        var serveStatus: Int32?
        defer { if serveStatus == nil { serve.signal(SIGKILL); _ = serve.wait() } }
        let base = try #require(firstLine.split(separator: " ").last.map(String.init))

        let online = try await Self.run(["fetch", base + "/feed", "--cache-dir", cache.url.path, "--max-age", "0s"])
        #expect(online.status == 0)
        #expect(try JSONDecoder().decode([FeedItem].self, from: online.stdout) == DemoData.feed)
        #expect(online.stderr.contains("served from remote"))
        serve.write("quit\n")
        serveStatus = try await Self.offPool { serve.wait() }
        #expect(serveStatus == 0)

        let offline = try await Self.run(["fetch", base + "/feed", "--cache-dir", cache.url.path, "--max-age", "0s", "--retries", "0"])
        #expect(offline.status == 0)
        #expect(offline.stdout == online.stdout)
        #expect(offline.stderr.contains("served from stale cache"))

        let nothing = try await Self.run(["fetch", base + "/other", "--cache-dir", cache.url.path, "--retries", "0"])
        #expect(nothing.status == 1)
        #expect(nothing.stderr.split(separator: "\n").count == 1)
        #expect(nothing.stdout.isEmpty)
    }
}
