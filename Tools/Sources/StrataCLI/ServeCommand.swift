import ArgumentParser
import DemoServer
import Foundation
import Strata

/// `strata serve`.
public struct ServeCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the demo server (feed JSON, posts REST) with faults you can turn on.",
        discussion: """
            Routes: GET /feed, GET /posts, GET /posts/pages/{n}?size=N (newest first, with the next
            page's number), GET /posts/{id}, POST /posts with {"title","body"},
            PUT /posts/{id}, PATCH /posts/{id}, DELETE /posts/{id} (these honour If-Match: 412).
            GET /feed sends ETag and Last-Modified and answers If-None-Match / If-Modified-Since with 304.

            Writes honour Idempotency-Key (IETF httpapi draft): the first request with a key is
            applied and its answer recorded; a repeat gets the recorded answer (same status and
            body, Idempotent-Replayed: true) and is not applied again; the key with a different
            body gets 422; a repeat while the first is in flight gets 409. Every write is printed,
            with the key it carried and what the server did. --ignore-idempotency-keys turns this
            off (a repeat is applied again), to see what a client without it would cause.

            --write-fault hits writes only (POST, PUT, PATCH, DELETE), never reads:
              503 (or any status from 400 to 599)  answer it, not applied (Retry-After with --retry-after)
              drop-after-apply   apply the write, record its key, then reset the connection without
                                 an answer (the lost acknowledgement); a retry with the same key
                                 gets the recorded answer
              409                answer 409 Conflict with the resource's current ETag, not applied
              422                answer 422 with a JSON problem body, not applied
            --write-fault-count N limits it to the next N writes.

            While it runs, type a command and Enter to change faults live:
              offline | online | status CODE [RATE] | healthy | latency DURATION | truncate on|off |
              cache-control VALUE|off | write-fault FAULT [COUNT] | write-fault off |
              idempotency on|off | help | quit
            `offline` stops listening (connections are refused) until `online`, on the same port.
            Stop with Ctrl-C or `quit`.
            """
    )

    @Option(help: "The address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "The port to listen on (0 picks a free one).")
    var port = 8080

    @Option(help: "Added latency before every answer (for example 300ms, 2s).", transform: DurationArgument.init(parsing:))
    var latency: DurationArgument?

    @Option(help: "Answer with this HTTP status instead of the resource (for example 500, 503, 429).")
    var status: Int?

    @Option(help: "The share of requests --status hits, from 0 to 1.")
    var errorRate: Double = 1

    @Option(help: "Send Retry-After with this many seconds on fault statuses.")
    var retryAfter: Int?

    @Flag(help: "Send only the first half of every body (valid HTTP, truncated JSON).")
    var truncate = false

    @Option(help: "Send this Cache-Control header on GET answers (for example max-age=60, no-cache, no-store).")
    var cacheControl: String?

    @Flag(help: "Start offline: refuse connections until the `online` command.")
    var offline = false

    @Option(help: ArgumentHelp(
        "Answer writes (POST, PUT, PATCH, DELETE) with a fault: a status (503, 500, …), drop-after-apply, 409 or 422.",
        valueName: "fault"))
    var writeFault: String?

    @Option(help: "Apply --write-fault to the next N writes only (default: every write).")
    var writeFaultCount: Int?

    @Flag(help: "Apply every write, even one whose Idempotency-Key was seen before (idempotency off).")
    var ignoreIdempotencyKeys = false

    public init() {}

    public func validate() throws {
        if let status, !(100...599).contains(status) { throw ValidationError("--status must be an HTTP status from 100 to 599") }
        guard (0...1).contains(errorRate) else { throw ValidationError("--error-rate must be between 0 and 1") }
        if let retryAfter, !(0...CacheControl.maxDeltaSeconds).contains(Int64(retryAfter)) {
            throw ValidationError("--retry-after must be a number of seconds from 0 to \(CacheControl.maxDeltaSeconds)")
        }
        guard (0...65_535).contains(port) else { throw ValidationError("--port must be between 0 and 65535") }
        if let writeFault, DemoServer.WriteFault(writeFault) == nil {
            throw ValidationError("--write-fault must be a status from 400 to 599, drop-after-apply, 409 or 422 (not '\(writeFault)')")
        }
        if let writeFaultCount, writeFaultCount < 0 { throw ValidationError("--write-fault-count must not be negative") }
        if writeFaultCount != nil, writeFault == nil { throw ValidationError("--write-fault-count needs --write-fault") }
    }

    public func run() async throws {
        let server: DemoServer
        do {
            server = try await DemoServer.start(host: host, port: port)
        } catch {
            throw ValidationError("could not listen on \(host):\(port): \(error)")
        }
        server.faults = .init(
            status: status, errorRate: errorRate, retryAfterSeconds: retryAfter, latency: latency?.duration,
            truncateBodies: truncate, cacheControl: cacheControl,
            writeFault: writeFault.flatMap { DemoServer.WriteFault($0, retryAfterSeconds: retryAfter) },
            remainingWriteFaults: writeFaultCount)
        server.honoursIdempotencyKeys = !ignoreIdempotencyKeys
        server.onWrite { event in StandardOutput.writeLine("  write: \(event)") }
        let control = ServeControl(server: server)
        StandardOutput.writeLine("strata serve: listening on \(server.baseURL.absoluteString)")
        StandardOutput.writeLine("  GET  \(server.baseURL.absoluteString)/feed        the demo feed (JSON; ETag, Last-Modified, 304)")
        StandardOutput.writeLine("  GET  \(server.baseURL.absoluteString)/posts/pages/{n}  the posts, newest first, 5 a page (?size=N)")
        StandardOutput.writeLine("  GET  \(server.baseURL.absoluteString)/posts/{id}  a post (JSON); 404 when unknown")
        StandardOutput.writeLine("  POST \(server.baseURL.absoluteString)/posts       create a post from {\"title\",\"body\"}")
        StandardOutput.writeLine("  PUT|PATCH|DELETE \(server.baseURL.absoluteString)/posts/{id}  change a post (If-Match honoured)")
        StandardOutput.writeLine(
            "  writes honour Idempotency-Key: " + (server.honoursIdempotencyKeys ? "yes" : "no (--ignore-idempotency-keys)"))
        StandardOutput.writeLine("  faults: \(ServeControl.describe(server.faults))")
        if offline { StandardOutput.writeLine(await control.apply("offline")) }
        StandardOutput.writeLine("Type a command and Enter: \(ServeControl.commandSummary)")

        let (events, continuation) = AsyncStream<ServeEvent>.makeStream()
        StandardInputReader.start { continuation.yield(.line($0)) }
        let signals = SignalWaiter.start { continuation.yield(.stop) }
        defer { signals.forEach { $0.cancel() } }
        loop: for await event in events {
            switch event {
            case .line(let line):
                let reply = await control.apply(line)
                if reply == ServeControl.quitReply { break loop }
                if !reply.isEmpty { StandardOutput.writeLine(reply) }
            case .stop:
                break loop
            }
        }
        StandardOutput.writeLine("strata serve: stopping")
        await server.stop()
    }
}

/// The live commands of `strata serve`, applied to a running server.
public struct ServeControl: Sendable {
    public static let commandSummary =
        "offline | online | status CODE [RATE] | healthy | latency DURATION | truncate on|off | cache-control VALUE|off | "
        + "write-fault FAULT [COUNT]|off | idempotency on|off | help | quit"
    public static let quitReply = "quit"

    let server: DemoServer

    public init(server: DemoServer) {
        self.server = server
    }

    /// Applies one command line and returns what to tell the person (``quitReply`` for `quit`).
    public func apply(_ line: String) async -> String {
        let words = line.split(separator: " ").map(String.init)
        guard let command = words.first?.lowercased() else { return "" }
        switch (command, words.count) {
        case ("offline", 1):
            await server.goOffline()
            return "offline: connections to port \(server.port) are refused (type `online` to listen again)"
        case ("online", 1):
            do {
                try await server.goOnline()
                return "online: listening on \(server.baseURL.absoluteString)"
            } catch {
                return "could not listen again on port \(server.port): \(error)"
            }
        case ("status", 2), ("status", 3):
            guard let code = Int(words[1]), (100...599).contains(code) else { return "usage: status CODE [RATE], CODE from 100 to 599" }
            var rate = 1.0
            if words.count == 3 {
                guard let parsed = Double(words[2]), (0...1).contains(parsed) else { return "usage: status CODE [RATE], RATE from 0 to 1" }
                rate = parsed
            }
            server.faults.status = code
            server.faults.errorRate = rate
            server.faults.remainingFaults = nil
            return "faults: \(Self.describe(server.faults))"
        case ("healthy", 1):
            server.faults = .none
            return "faults: none"
        case ("latency", 2):
            guard let latency = DurationArgument(argument: words[1]) else { return "usage: latency DURATION (for example 300ms or 2s)" }
            server.faults.latency = latency.duration == .zero ? nil : latency.duration
            return "faults: \(Self.describe(server.faults))"
        case ("truncate", 2) where ["on", "off"].contains(words[1].lowercased()):
            server.faults.truncateBodies = words[1].lowercased() == "on"
            return "faults: \(Self.describe(server.faults))"
        case ("cache-control", 2...):
            let value = words.dropFirst().joined(separator: " ")
            server.faults.cacheControl = value.lowercased() == "off" ? nil : value
            return "faults: \(Self.describe(server.faults))"
        case ("write-fault", 2) where words[1].lowercased() == "off":
            server.faults.writeFault = nil
            server.faults.remainingWriteFaults = nil
            return "faults: \(Self.describe(server.faults))"
        case ("write-fault", 2), ("write-fault", 3):
            guard let fault = DemoServer.WriteFault(words[1], retryAfterSeconds: server.faults.retryAfterSeconds) else {
                return "usage: write-fault FAULT [COUNT], FAULT a status from 400 to 599, drop-after-apply, 409 or 422; or write-fault off"
            }
            var count: Int?
            if words.count == 3 {
                guard let parsed = Int(words[2]), parsed >= 0 else { return "usage: write-fault FAULT [COUNT], COUNT a number of writes" }
                count = parsed
            }
            server.faults.writeFault = fault
            server.faults.remainingWriteFaults = count
            return "faults: \(Self.describe(server.faults))"
        case ("idempotency", 2) where ["on", "off"].contains(words[1].lowercased()):
            server.honoursIdempotencyKeys = words[1].lowercased() == "on"
            return server.honoursIdempotencyKeys
                ? "idempotency: on (a repeated Idempotency-Key gets the recorded answer)"
                : "idempotency: off (every write is applied, repeated keys too)"
        case ("help", 1):
            return "commands: \(Self.commandSummary)"
        case ("quit", 1), ("exit", 1):
            return Self.quitReply
        default:
            return "unknown command '\(line)'; commands: \(Self.commandSummary)"
        }
    }

    /// The faults in words: `status 503 on 50% of requests (Retry-After 5s), +200ms latency`.
    public static func describe(_ faults: DemoServer.Faults) -> String {
        var parts: [String] = []
        if let status = faults.status {
            var part = "status \(status) on \(Int((faults.errorRate * 100).rounded()))% of requests"
            if let retryAfter = faults.retryAfterSeconds { part += " (Retry-After \(retryAfter)s)" }
            parts.append(part)
        }
        if let latency = faults.latency { parts.append("+\(DurationText.format(latency)) latency") }
        if faults.truncateBodies { parts.append("truncated bodies") }
        if let cacheControl = faults.cacheControl { parts.append("Cache-Control: \(cacheControl)") }
        if let writeFault = faults.writeFault {
            var part = "writes: \(writeFault)"
            if case .status(_, let retryAfter?) = writeFault { part += " (Retry-After \(retryAfter)s)" }
            if let remaining = faults.remainingWriteFaults { part += " on the next \(remaining)" }
            parts.append(part)
        }
        return parts.isEmpty ? "none" : parts.joined(separator: ", ")
    }
}

enum DurationText {
    static func format(_ duration: Duration) -> String {
        let parts = duration.components
        let milliseconds = parts.seconds * 1000 + parts.attoseconds / 1_000_000_000_000_000
        return milliseconds % 1000 == 0 ? "\(milliseconds / 1000)s" : "\(milliseconds)ms"
    }
}

/// What the serve loop reacts to.
enum ServeEvent: Sendable {
    case line(String)
    case stop
}

/// Reads standard input line by line on a thread of its own (reading blocks, and must not block the
/// concurrency pool), handing each line to `handle`. When input ends (or is not a terminal at all) the
/// server simply keeps running until a signal.
///
/// It reads file descriptor 0 with `read(2)`, not `readLine()`: `readLine()` holds the lock of the C
/// `stdin` stream while it waits, and `exit()` takes every stream's lock to flush it, so a process
/// whose input is still open would hang on its way out after `quit`.
enum StandardInputReader {
    static func start(_ handle: @escaping @Sendable (String) -> Void) {
        let thread = Thread {
            var pending = [UInt8]()
            var buffer = [UInt8](repeating: 0, count: 1024)
            while true {
                let count = read(0, &buffer, buffer.count)
                if count < 0, errno == EINTR { continue }
                if count <= 0 { break }
                pending.append(contentsOf: buffer[0..<count])
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    handle(String(decoding: pending[..<newline], as: UTF8.self))
                    pending.removeSubrange(...newline)
                }
            }
            if !pending.isEmpty { handle(String(decoding: pending, as: UTF8.self)) }
        }
        thread.start()
    }
}

/// Calls `onSignal` on SIGINT or SIGTERM; keep the returned sources alive while you wait.
enum SignalWaiter {
    static func start(_ onSignal: @escaping @Sendable () -> Void) -> [any DispatchSourceSignal] {
        [SIGINT, SIGTERM].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler(handler: onSignal)
            source.resume()
            return source
        }
    }
}
