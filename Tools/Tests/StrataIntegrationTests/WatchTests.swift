import ArgumentParser
import Foundation
import Testing
@_spi(StrataInternals) import Strata
@testable import StrataCLI
import StrataDemo
import StrataTesting

/// `strata watch` against Python's `http.server`, stopped and restarted on the same port: in process
/// (the ``Watcher`` on a manual clock, every line checked, every request counted) and as the built
/// binary (real time, JSON lines, ended by SIGINT). No test sleeps: each waits, with a bound, for a
/// line, a sleeper on the manual clock, or a port.
@Suite("strata watch", .timeLimit(.minutes(3)))
struct WatchTests {
    /// The interval of the in-process watches.
    static let every = Duration.seconds(10)
    /// The body the server serves.
    static let body = "hello"

    /// A python server in a directory of its own, serving `data.txt`.
    static func startServer() async throws -> (TemporaryDirectory, ExternalServer) {
        let directory = try TemporaryDirectory(prefix: "strata-watch")
        let server = try await ExternalServer.python(in: directory)
        try Data(body.utf8).write(to: server.root.appendingPathComponent("data.txt"))
        return (directory, server)
    }

    /// A ``Watcher`` on `clock`, started; its lines go to `lines`, its requests through `transport`.
    static func startWatch(
        _ server: ExternalServer, directory: TemporaryDirectory, clock: ManualClock, json: Bool = false
    ) -> (Task<Void, Never>, LineSink, CountingHTTPClient) {
        let options = Watcher.Options(
            url: server.baseURL.appendingPathComponent("data.txt"), cacheDirectory: directory.appending("cache"),
            every: every, json: json)
        let transport = CountingHTTPClient()
        let lines = LineSink()
        let watcher = Watcher(options: options, transport: transport, environment: clock.environment())
        let task = Task { await watcher.run(stdout: lines.append, stderr: { Issue.record("unexpected on standard error: \($0)") }) }
        return (task, lines, transport)
    }

    /// Waits until `count` tasks sleep until one interval from now (the query's interval, and the
    /// probe's while the server is away), then moves the clock there.
    static func tick(_ clock: ManualClock, sleepers count: Int) async throws {
        let deadline = clock.now.advanced(by: every)
        try await clock.waitForSleepers(count: count, timeout: .seconds(15)) { $0.deadline == deadline }
        clock.advance(by: every)
    }

    /// Ends a watch and lets the query's drop timer run out, so nothing stays asleep on `clock`.
    static func stop(_ watching: Task<Void, Never>, clock: ManualClock) async {
        watching.cancel()
        await watching.value
        clock.advance(by: .seconds(3600))
    }

    /// A line without its `HH:mm:ss  ` (local time).
    static func withoutTime(_ line: String) -> String {
        String(line.dropFirst("00:00:00  ".count))
    }

    @Test func serverStoppedAndRestarted_cachedCopyStaysShownOffline_andOneRequestRecovers() async throws {
        let (directory, first) = try await Self.startServer()
        var running: ExternalServer? = first
        let clock = ManualClock()
        let (watching, lines, transport) = Self.startWatch(first, directory: directory, clock: clock)
        let refused = "could not connect (connection refused)"
        do {
            var server = first
            // The first observer loads: the server's body.
            #expect(Self.withoutTime(try await lines.line(0)) == "empty  fetching (first observer)")
            #expect(Self.withoutTime(try await lines.line(1)) == "value  idle  remote, age 0s  5 bytes")
            #expect(transport.requestCount == 1)
            #expect(try server.statuses(of: "/data.txt") == [200])

            // The server goes away: the interval's request is refused, the load pauses offline, and
            // the cached copy stays shown.
            await server.stop()
            running = nil
            #expect(!ExternalServer.accepts(port: server.port))
            try await Self.tick(clock, sleepers: 1)
            #expect(Self.withoutTime(try await lines.line(2)) == "value  fetching (interval)  remote, age 10s  5 bytes")
            #expect(Self.withoutTime(try await lines.line(3)) == "value  paused (offline)  stale cache, age 10s  5 bytes  1 failure: \(refused)")
            #expect(transport.requestCount == 2)

            // Each interval while offline: one probe (the paused load continues), the age grown.
            for (tick, failures) in [(2, 2), (3, 3)] {
                try await Self.tick(clock, sleepers: 2)
                let before = failures == 2 ? "1 failure" : "\(failures - 1) failures"
                #expect(Self.withoutTime(try await lines.line(2 * tick))
                    == "value  fetching (interval, probe)  stale cache, age \(tick * 10)s  5 bytes  \(before): \(refused)")
                #expect(Self.withoutTime(try await lines.line(2 * tick + 1))
                    == "value  paused (offline)  stale cache, age \(tick * 10)s  5 bytes  \(failures) failures: \(refused)")
                #expect(transport.requestCount == 1 + tick, "one request per interval while offline")
            }

            // The server is back, same port and files: the next probe's one request recovers.
            server = try await ExternalServer.python(in: directory, port: server.port)
            running = server
            try await Self.tick(clock, sleepers: 2)
            #expect(Self.withoutTime(try await lines.line(8)) == "value  fetching (interval, probe)  stale cache, age 40s  5 bytes  3 failures: \(refused)")
            #expect(Self.withoutTime(try await lines.line(9)) == "value  idle  remote, age 0s  5 bytes")
            #expect(transport.requestCount == 5, "recovered with exactly one request")
            #expect(try server.statuses(of: "/data.txt") == [304], "a conditional request: the body had not changed")

            // And the interval goes on as before: one request per interval.
            try await Self.tick(clock, sleepers: 2)
            #expect(Self.withoutTime(try await lines.line(10)) == "value  fetching (interval)  remote, age 10s  5 bytes")
            #expect(Self.withoutTime(try await lines.line(11)) == "value  idle  remote, age 0s  5 bytes")
            #expect(transport.requestCount == 6)
            #expect(try server.statuses(of: "/data.txt") == [304, 304])
            #expect(lines.count == 12, "\(lines.all)")
        } catch {
            await Self.stop(watching, clock: clock)
            await running?.stop()
            throw error
        }
        await Self.stop(watching, clock: clock)
        await running?.stop()
    }

    @Test func json_oneObjectPerLine_withStableFields() async throws {
        let (directory, server) = try await Self.startServer()
        var running: ExternalServer? = server
        let clock = ManualClock()
        let (watching, lines, _) = Self.startWatch(server, directory: directory, clock: clock, json: true)
        do {
            let keys: Set<String> = [
                "time", "status", "phase", "reason", "probe", "source", "tier", "origin", "ageSeconds", "storedAt", "bytes",
                "stale", "failureCount", "error",
            ]
            let first = try Self.object(try await lines.line(0))
            #expect(Set(first.keys) == keys)
            #expect(first["status"] as? String == "empty")
            #expect(first["phase"] as? String == "fetching")
            #expect(first["reason"] as? String == "first observer")
            #expect(first["source"] is NSNull && first["bytes"] is NSNull && first["error"] is NSNull && first["stale"] is NSNull)
            #expect(first["probe"] as? Bool == false)
            #expect(first["failureCount"] as? Int == 0)
            #expect(first["time"] as? String == "2026-01-01T00:00:00.000Z", "the manual clock's time")

            let loaded = try Self.object(try await lines.line(1))
            #expect(Set(loaded.keys) == keys)
            #expect(loaded["status"] as? String == "value")
            #expect(loaded["phase"] as? String == "idle")
            #expect(loaded["reason"] is NSNull)
            #expect(loaded["source"] as? String == "remote")
            #expect(loaded["tier"] as? String == "remote")
            #expect(loaded["origin"] as? String == "remote")
            #expect(Self.number(loaded["ageSeconds"]) == 0)
            #expect(loaded["bytes"] as? Int == Self.body.utf8.count)

            await server.stop()
            running = nil
            try await Self.tick(clock, sleepers: 1)
            let offline = try Self.object(try await lines.line(3))
            #expect(Set(offline.keys) == keys)
            #expect(offline["status"] as? String == "value")
            #expect(offline["phase"] as? String == "paused")
            #expect(offline["reason"] as? String == "offline")
            #expect(offline["source"] as? String == "stale cache")
            #expect(Self.number(offline["ageSeconds"]) == 10)
            #expect(offline["stale"] as? Bool == true)
            #expect(offline["failureCount"] as? Int == 1)
            #expect(offline["error"] as? String == "could not connect (connection refused)")

            try await Self.tick(clock, sleepers: 2)
            let probe = try Self.object(try await lines.line(4))
            #expect(probe["phase"] as? String == "fetching")
            #expect(probe["reason"] as? String == "interval", "the paused load's own reason")
            #expect(probe["probe"] as? Bool == true)
            #expect(Self.number(probe["ageSeconds"]) == 20)
            let after = try Self.object(try await lines.line(5))
            #expect(after["phase"] as? String == "paused" && after["probe"] as? Bool == false)
            #expect(after["failureCount"] as? Int == 2)
        } catch {
            await Self.stop(watching, clock: clock)
            await running?.stop()
            throw error
        }
        await Self.stop(watching, clock: clock)
    }

    /// Field `key` of the JSON object `line`, as text (`nil` when `line` is not an object).
    static func field(_ line: String, _ key: String) -> String? {
        (try? object(line)).flatMap { $0[key] }.map { "\($0)" }
    }

    /// A JSON number, whichever type the parser gave it.
    static func number(_ value: Any?) -> Double? {
        (value as? NSNumber)?.doubleValue ?? (value as? Double) ?? (value as? Int).map(Double.init)
    }

    /// `line` as a JSON object.
    static func object(_ line: String) throws -> [String: Any] {
        guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
            throw TestError("not a JSON object: \(line)")
        }
        return object
    }

    @Test func theBinary_jsonLines_offlineAndBack_endsOnSIGINTWithExitCode0() async throws {
        let (directory, first) = try await Self.startServer()
        var running: ExternalServer? = first
        let child = try Child.spawn(
            try TwoProcessTests.executable(),
            ["watch", first.baseURL.appendingPathComponent("data.txt").absoluteString, "--every", "200ms", "--json",
             "--cache-dir", directory.appending("cache").path],
            pipeStdin: false, pipeStdout: true, stdoutFile: nil, stderrFile: directory.appending("watch-stderr"))
        var status: Int32?
        defer { if status == nil { child.signal(SIGKILL); _ = child.wait() } }
        let reader = LineReader(fd: child.stdoutReader)
        do {
            var server = first
            let loaded = try await reader.line(within: .seconds(30)) { Self.field($0, "source") == "remote" && Self.field($0, "phase") == "idle" }
            #expect(Self.field(loaded, "bytes") == "5")

            await server.stop()
            running = nil
            let offline = try await reader.line(within: .seconds(30)) { Self.field($0, "phase") == "paused" && Self.field($0, "reason") == "offline" }
            #expect(Self.field(offline, "source") == "stale cache")
            #expect(Self.field(offline, "status") == "value")

            server = try await ExternalServer.python(in: directory, port: server.port)
            running = server
            let back = try await reader.line(within: .seconds(30)) { Self.field($0, "source") == "remote" && Self.field($0, "phase") == "idle" }
            #expect(Self.field(back, "failureCount") == "0")

            child.signal(SIGINT)
            status = try await TwoProcessTests.offPool { child.wait() }
            #expect(status == 0, "ended by SIGINT with exit code 0; standard error: \(String(decoding: (try? Data(contentsOf: directory.appending("watch-stderr"))) ?? Data(), as: UTF8.self))")
            #expect(reader.all.allSatisfy { (try? Self.object($0)) != nil }, "every line a JSON object: \(reader.all)")
        } catch {
            await running?.stop()
            throw error
        }
        await running?.stop()
    }

    @Test func options_defaultsAndLimits() throws {
        let command = try #require(try StrataCommand.parseAsRoot(["watch", "http://127.0.0.1:1/x"]) as? WatchCommand)
        #expect(command.every.duration == .seconds(5))
        #expect(command.maxAge.duration == .zero)
        #expect(command.cache.store == .file)
        #expect(StrataCommand.helpMessage(for: WatchCommand.self).contains("USAGE: strata watch"))
        for arguments in [["watch", "ftp://example.com/x"], ["watch", "http://127.0.0.1:1/x", "--every", "50ms"]] {
            do {
                _ = try StrataCommand.parseAsRoot(arguments)
                Issue.record("expected \(arguments) to be rejected")
            } catch {
                #expect(StrataCommand.exitCode(for: error).rawValue == 64)
            }
        }
    }

    @Test func byteCounts_areExactWithThousandsSeparators() {
        #expect(WatchLine.byteCount(1) == "1 byte")
        #expect(WatchLine.byteCount(999) == "999 bytes")
        #expect(WatchLine.byteCount(1234) == "1,234 bytes")
        #expect(WatchLine.byteCount(1_234_567) == "1,234,567 bytes")
    }
}

/// The lines a ``Watcher`` wrote, and a bounded wait for the next ones.
final class LineSink: Sendable {
    private struct State: Sendable {
        var lines: [String] = []
        var waiters = ConditionWaiters<Int>()
    }

    private let state = Locked(State())

    /// Appends a line (the watcher's `stdout`).
    var append: @Sendable (String) -> Void {
        { [state] line in
            state.withLock { state in
                state.lines.append(line)
                state.waiters.resumeSatisfied(by: state.lines.count)
            }
        }
    }

    var all: [String] { state.withLock { $0.lines } }
    var count: Int { state.withLock { $0.lines.count } }

    /// Line `index` (from 0), once written; fails after 15 s of real time without it.
    func line(_ index: Int) async throws -> String {
        try await withWaitTimeout(.seconds(15)) { [state] in
            try await state.wait(in: \.waiters, current: { $0.lines.count }, until: { $0 > index })
        } timedOut: { timeout in
            let lines = all
            return lines.count > index ? nil : WaitTimeoutError(awaited: "line \(index)", observed: "\(lines)", timeout: timeout)
        }
        return state.withLock { $0.lines[index] }
    }
}

/// Reads a child's standard output line by line, waiting at most until a deadline (`poll(2)`), on
/// a thread of its own.
final class LineReader: Sendable {
    private struct State: Sendable {
        var pending: [UInt8] = []
        var lines: [String] = []
    }

    private let fd: Int32
    private let state = Locked(State())

    init(fd: Int32) {
        self.fd = fd
    }

    /// Every line read so far.
    var all: [String] { state.withLock { $0.lines } }

    /// The first line from now on for which `matches` holds; fails when `timeout` passes first or
    /// the output ends.
    func line(within timeout: Duration, where matches: @escaping @Sendable (String) -> Bool) async throws -> String {
        try await TwoProcessTests.offPool { [self] in
            let deadline = ContinuousClock.now + timeout
            while true {
                while let line = nextBufferedLine() {
                    if matches(line) { return line }
                }
                let left = deadline - ContinuousClock.now
                guard left > .zero else { throw TestError("no matching line within \(timeout); lines: \(all)") }
                var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                let ready = poll(&descriptor, 1, Int32(left / .milliseconds(1)) + 1)
                if ready < 0, errno == EINTR { continue }
                guard ready > 0 else { continue }
                var buffer = [UInt8](repeating: 0, count: 4096)
                let count = read(fd, &buffer, buffer.count)
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { throw TestError("the output ended; lines: \(all)") }
                state.withLock { $0.pending += buffer[0..<count] }
            }
        }
    }

    /// Takes the next complete line out of the buffer.
    private func nextBufferedLine() -> String? {
        state.withLock { state in
            guard let newline = state.pending.firstIndex(of: UInt8(ascii: "\n")) else { return nil }
            let line = String(decoding: state.pending[..<newline], as: UTF8.self)
            state.pending.removeSubrange(...newline)
            state.lines.append(line)
            return line
        }
    }
}
