import Foundation
import Testing
@_spi(StrataInternals) import Strata
import StrataTesting
#if canImport(Glibc)
import Glibc
#endif

/// The value `strata-crash-writer` writes, checked independently of the writer's own code: the test
/// rebuilds the payload from the sequence number and recomputes the digest.
struct CrashRecord: Codable, Equatable, Sendable {
    var seq: Int
    var payload: Data
    var digest: String

    /// Why this record is not the one the writer wrote for `seq`, or `nil` when it is.
    var defect: String? {
        let expected = Self.payload(for: seq)
        if payload.count != expected.count { return "payload of \(payload.count) bytes, \(expected.count) expected for seq \(seq)" }
        if payload != expected { return "payload bytes differ from those of seq \(seq)" }
        if digest != Self.digest(of: payload) { return "digest \(digest) does not match the payload" }
        return nil
    }

    /// SplitMix64 seeded with `seq`: the size class (one in four 100–200 KB, the rest up to 40 KB),
    /// the size, then the bytes. The same algorithm as the writer's, written again here on purpose.
    static func payload(for seq: Int) -> Data {
        var generator = SplitMix64(seed: UInt64(bitPattern: Int64(seq)) &* 0x9E37_79B9_7F4A_7C15)
        let size: Int
        switch generator.next() % 4 {
        case 0: size = 100_000 + Int(generator.next() % 100_001)
        case 1: size = 1 + Int(generator.next() % 64)
        default: size = 64 + Int(generator.next() % 40_000)
        }
        var bytes = [UInt8]()
        bytes.reserveCapacity(size + 8)
        while bytes.count < size {
            let word = generator.next()
            for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: word >> UInt64(shift))) }
        }
        return Data(bytes.prefix(size))
    }

    /// FNV-1a, 64 bits, in hexadecimal.
    static func digest(of data: Data) -> String {
        String(data.reduce(UInt64(0xCBF2_9CE4_8422_2325)) { ($0 ^ UInt64($1)) &* 0x0000_0100_0000_01B3 }, radix: 16)
    }
}


/// One run of `strata-crash-writer`: a child process whose standard output is a pipe read line by line.
final class WriterProcess: Sendable {
    let pid: pid_t
    private let output: Int32
    private let reaped = Locked(false)
    private let pending = Locked([UInt8]())

    /// The built `strata-crash-writer` next to this test binary.
    static func executable() throws -> URL {
        let candidates = [
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent(),
            Bundle.main.bundleURL,
            Bundle.main.bundleURL.deletingLastPathComponent(),
        ].map { $0.appendingPathComponent("strata-crash-writer") }
        guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0.path) }) else {
            throw TestError("no built strata-crash-writer next to the tests (looked in \(candidates.map(\.path)))")
        }
        return found
    }

    /// Starts the writer with `arguments`; its standard error goes to `stderrFile`. `environment`
    /// replaces the inherited environment when given.
    init(_ arguments: [String], stderrFile: URL, environment: [String: String]? = nil) throws {
        let executable = try Self.executable()
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var fds: [Int32] = [-1, -1]
        // Closed on exec; every spawn of the tests also closes all but its standard streams, so no
        // other child holds the write end (this side would then never see end-of-file).
        guard pipe(&fds) == 0 else { throw TestError("pipe failed: \(errno)") }
        _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
        posix_spawn_file_actions_addopen(&actions, 2, stderrFile.path, O_WRONLY | O_CREAT | O_APPEND, 0o600)
        // Nothing else of this process reaches the writer: a listening socket of another test's
        // server that a writer inherited stayed bound, accepting no connection, after that test
        // closed it (other tests then saw "connection lost" or a timeout where nothing was to
        // listen, and EADDRINUSE).
        try Child.closeFrom(3, in: &actions)

        let argv: [UnsafeMutablePointer<CChar>?] = ([executable.path] + arguments).map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?]? = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
        defer {
            argv.forEach { free($0) }
            envp?.forEach { free($0) }
        }
        var pid: pid_t = 0
        let result = envp.map { envp in posix_spawn(&pid, executable.path, &actions, nil, argv, envp) }
            ?? posix_spawn(&pid, executable.path, &actions, nil, argv, environ)
        close(fds[1])
        guard result == 0 else {
            close(fds[0])
            throw TestError("posix_spawn \(executable.path) failed: \(result)")
        }
        self.pid = pid
        output = fds[0]
        // A failsafe, not a wait: a writer still running after two minutes is killed, so a hang fails
        // the test instead of blocking the run.
        let reaped = reaped
        let spawned = pid
        DispatchQueue.global().asyncAfter(deadline: .now() + 120) {
            reaped.withLock { done in if !done { _ = Glibc.kill(spawned, SIGKILL) } }
        }
    }

    deinit {
        if !reaped.withLock({ $0 }) {
            _ = Glibc.kill(pid, SIGKILL)
            wait()
        }
    }

    /// The next line the writer printed, or `nil` once its output is closed (it exited or was killed).
    func nextLine() -> String? {
        pending.withLock { buffer in
            var chunk = [UInt8](repeating: 0, count: 4096)
            while true {
                if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: buffer[..<newline], as: UTF8.self)
                    buffer.removeSubrange(...newline)
                    return line
                }
                let n = read(output, &chunk, chunk.count)
                if n < 0, errno == EINTR { continue }
                if n <= 0 { return nil }
                buffer.append(contentsOf: chunk[..<n])
            }
        }
    }

    /// Sends SIGKILL.
    func kill() {
        reaped.withLock { done in if !done { _ = Glibc.kill(pid, SIGKILL) } }
    }

    /// Waits for the writer to end; its exit status, or 128 + the signal that ended it.
    @discardableResult
    func wait() -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        reaped.withLock { done in
            if !done { close(output) }
            done = true
        }
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }
}

/// Where one writer run stood when it was killed.
struct KillPoint: Sendable {
    /// The last round the writer acknowledged (every insert of it returned).
    var acknowledged: Int?
    /// The round in flight when the kill landed, if one had begun and was not acknowledged.
    var inFlight: Int?
    /// How the writer ended (137 for SIGKILL).
    var status: Int32
    /// Reads of another writer's key (`--watch`) that found a value, and that found none.
    var watchedFound = 0
    var watchedMissing = 0

    /// When each round began and was acknowledged (CLOCK_MONOTONIC, nanoseconds, as the writer
    /// printed it): the order of two writers' rounds.
    var startedAt: [Int: UInt64] = [:]
    var acknowledgedAt: [Int: UInt64] = [:]

    /// Takes one line the writer printed: `w <seq> <ns>`, `a <seq> <ns>`, or `r <seq>`/`r -` (`--watch`).
    mutating func note(_ line: String) throws {
        let parts = line.split(separator: " ")
        guard parts.count >= 2 else { throw TestError("unexpected writer output '\(line)'") }
        if parts[0] == "r" {
            if parts[1] == "-" { watchedMissing += 1 } else { watchedFound += 1 }
            return
        }
        guard let seq = Int(parts[1]) else { throw TestError("unexpected writer output '\(line)'") }
        let instant = parts.count > 2 ? UInt64(parts[2]) : nil
        switch parts[0] {
        case "w":
            inFlight = seq
            startedAt[seq] = instant
        case "a":
            acknowledged = seq
            acknowledgedAt[seq] = instant
            inFlight = nil
        default: throw TestError("unexpected writer output '\(line)'")
        }
    }
}

enum KillLoop {
    /// Runs the writer until it has acknowledged `acks` rounds and begun the next one, spins for
    /// `spin` (a kill timing, busy-waiting on the clock: nothing sleeps), kills it with SIGKILL, then
    /// drains what it printed before it died. Blocking: run it with ``TwoProcessTests/offPool(_:)``.
    static func killDuringWrite(_ arguments: [String], afterAcks acks: Int, spin: Duration, stderrFile: URL) throws -> KillPoint {
        let writer = try WriterProcess(arguments, stderrFile: stderrFile)
        var point = KillPoint(status: 0)
        var seen = 0
        var killed = false
        func note(_ line: String) throws {
            let before = point.acknowledged
            try point.note(line)
            if point.acknowledged != before { seen += 1 }
        }
        while !killed, let line = writer.nextLine() {
            try note(line)
            if seen >= acks, point.inFlight != nil {
                spinFor(spin)
                writer.kill()
                killed = true
            }
        }
        while let line = writer.nextLine() { try note(line) }
        point.status = writer.wait()
        guard killed else {
            let stderr = (try? String(contentsOf: stderrFile, encoding: .utf8)) ?? ""
            throw TestError("the writer ended on its own (status \(point.status)) before it was killed: \(stderr)")
        }
        return point
    }

    /// Two writers at once on one store: runs both until the first has acknowledged `acks` rounds
    /// and begun the next and the second has acknowledged at least one, spins for `spin`, then kills
    /// both with SIGKILL (the second whatever it is doing) and drains what each printed. Blocking: run
    /// it with ``TwoProcessTests/offPool(_:)``.
    static func killTwoDuringWrites(
        _ first: [String], _ second: [String], afterAcks acks: Int, spin: Duration, stderrFiles: (URL, URL)
    ) throws -> (KillPoint, KillPoint) {
        let writers = (try WriterProcess(first, stderrFile: stderrFiles.0), try WriterProcess(second, stderrFile: stderrFiles.1))
        // The second writer's output is read on a thread of its own, so neither pipe fills while the
        // other is read; the first's reader decides the kill.
        let secondPoint = Locked(KillPoint(status: 0))
        let secondFailure = Locked<(any Error)?>(nil)
        let secondDone = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            while let line = writers.1.nextLine() {
                do {
                    try secondPoint.withLock { try $0.note(line) }
                } catch {
                    secondFailure.withLock { $0 = error }
                }
            }
            // The second writer ended: killed with the first, or on its own (a failed check), when
            // the first must not run on waiting for it.
            writers.0.kill()
            secondDone.signal()
        }
        var point = KillPoint(status: 0)
        var seen = 0
        var killed = false
        while !killed, let line = writers.0.nextLine() {
            let before = point.acknowledged
            try point.note(line)
            if point.acknowledged != before { seen += 1 }
            if seen >= acks, point.inFlight != nil, secondPoint.withLock({ $0.acknowledged != nil }) {
                spinFor(spin)
                writers.0.kill()
                writers.1.kill()
                killed = true
            }
        }
        if !killed { writers.1.kill() }
        while let line = writers.0.nextLine() { try point.note(line) }
        point.status = writers.0.wait()
        secondDone.wait()
        var other = secondPoint.withLock { $0 }
        other.status = writers.1.wait()
        if let error = secondFailure.withLock({ $0 }) { throw error }
        guard killed else {
            let stderr = (try? String(contentsOf: stderrFiles.0, encoding: .utf8)) ?? ""
            let stderr2 = (try? String(contentsOf: stderrFiles.1, encoding: .utf8)) ?? ""
            throw TestError("a writer ended on its own (status \(point.status), \(other.status)) before it was killed: \(stderr) \(stderr2)")
        }
        return (point, other)
    }

    /// Busy-waits for `duration` on the monotonic clock.
    static func spinFor(_ duration: Duration) {
        let clock = ContinuousClock()
        let end = clock.now.advanced(by: duration)
        while clock.now < end {}
    }

    /// Runs the writer to completion (for `--count` runs); throws when it fails.
    static func runToCompletion(_ arguments: [String], environment: [String: String]? = nil, stderrFile: URL) throws {
        let writer = try WriterProcess(arguments, stderrFile: stderrFile, environment: environment)
        while writer.nextLine() != nil {}
        let status = writer.wait()
        guard status == 0 else {
            let stderr = (try? String(contentsOf: stderrFile, encoding: .utf8)) ?? ""
            throw TestError("strata-crash-writer \(arguments.joined(separator: " ")) exited with \(status): \(stderr)")
        }
    }
}

/// Permission bits of `path` (not following a final symbolic link).
func permissions(_ path: String) -> mode_t? {
    var info = stat()
    guard lstat(path, &info) == 0 else { return nil }
    return info.st_mode & 0o7777
}

/// Every path under `root` (recursively, `root` itself excluded), relative to `root`.
func tree(_ root: URL) -> [String] {
    guard let enumerator = FileManager.default.enumerator(atPath: root.path) else { return [] }
    return enumerator.compactMap { $0 as? String }.sorted()
}
