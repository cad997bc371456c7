import Foundation
import Logging
import Strata
import StrataOutbox

/// `strata outbox list|drain|retry|discard|count`: the outbox `strata send` fills, seen and acted on.
public struct OutboxTool: Sendable {
    /// The environment of the commands: the wall clock, and a logger that writes the outbox's
    /// storage failures (an unreadable entry set aside, a write that could not be saved) to
    /// standard error. Parked writes are reported by the commands themselves.
    public static var defaultEnvironment: LoadEnvironment {
        var logger = Logger(label: "strata.outbox", factory: { StreamLogHandler.standardError(label: $0) })
        logger.logLevel = .error
        return LoadEnvironment(logger: logger)
    }

    let location: OutboxLocation
    let transport: any HTTPTransport
    let environment: LoadEnvironment

    public init(location: OutboxLocation, transport: any HTTPTransport = URLSessionHTTPClient.shared,
                environment: LoadEnvironment = OutboxTool.defaultEnvironment) {
        self.location = location
        self.transport = transport
        self.environment = environment
    }

    /// What a subcommand asks for.
    public enum Action: Sendable {
        /// Every entry, one line each (or a JSON array).
        case list(json: Bool)
        /// Send everything due; `credentials` go to the writes queued with a field of that name.
        case drain(timeout: Duration?, credentials: [HTTPField])
        /// Put the dead letter whose id starts with the prefix back in the queue.
        case retry(idPrefix: String)
        /// Remove the dead letter whose id starts with the prefix.
        case discard(idPrefix: String)
        /// How many writes are pending and parked.
        case count(json: Bool)
    }

    /// Runs `action`, writing results with `stdout` and diagnostics with `stderr`; returns the exit code.
    public func run(_ action: Action, stdout: @Sendable (String) -> Void, stderr: @Sendable (String) -> Void) async -> OutboxExitCode {
        let command = "strata outbox \(action.name)"
        let opened: OutboxLocation.Opened
        do {
            opened = try await location.open(logger: environment.logger)
        } catch {
            stderr("\(command): \(location) cannot be opened: \(Redaction.redactingSecrets(in: "\(error)"))")
            return error is OutboxLocationError ? .usage : .storage
        }
        let outbox = Outbox(storage: opened.storage, name: "strata", environment: environment)
        let code: OutboxExitCode
        do {
            switch action {
            case .list(let json): code = try await list(outbox, json: json, stdout: stdout, stderr: stderr)
            case .drain(let timeout, let credentials):
                code = try await drain(outbox, timeout: timeout, credentials: credentials, stdout: stdout, stderr: stderr)
            case .retry(let prefix): code = try await retry(outbox, prefix: prefix, stdout: stdout, stderr: stderr)
            case .discard(let prefix): code = try await discard(outbox, prefix: prefix, stdout: stdout, stderr: stderr)
            case .count(let json): code = try await count(outbox, json: json, stdout: stdout)
            }
        } catch let error as EntryLookupError {
            stderr("\(command): \(error)")
            code = .noSuchEntry
        } catch {
            stderr("\(command): \(location) failed: \(Redaction.redactingSecrets(in: "\(error)"))")
            code = .storage
        }
        await opened.close()
        return code
    }

    // MARK: list and count

    private func list(_ outbox: Outbox, json: Bool, stdout: (String) -> Void, stderr: (String) -> Void) async throws -> OutboxExitCode {
        let entries = try await outbox.entries()
        if json {
            let objects = entries.map { EntryView($0).jsonObject }
            let data = try JSONSerialization.data(withJSONObject: objects, options: [.sortedKeys, .withoutEscapingSlashes])
            stdout(String(decoding: data, as: UTF8.self))
            return .ok
        }
        if entries.isEmpty { stderr("strata outbox list: the outbox is empty (\(location))") }
        for entry in entries { stdout(EntryView(entry).line) }
        return .ok
    }

    private func count(_ outbox: Outbox, json: Bool, stdout: (String) -> Void) async throws -> OutboxExitCode {
        let entries = try await outbox.entries()
        let pending = entries.filter(\.isPending).count
        let parked = entries.count - pending
        stdout(json ? #"{"parked":\#(parked),"pending":\#(pending)}"# : "\(pending) pending, \(parked) parked")
        return .ok
    }

    // MARK: drain

    private func drain(
        _ outbox: Outbox, timeout: Duration?, credentials: [HTTPField], stdout: (String) -> Void, stderr: (String) -> Void
    ) async throws -> OutboxExitCode {
        let before = try await outbox.entries().filter(\.isPending)
        let writes = OutboxHTTPWrites(transport: transport, timeout: timeout, credentials: credentials)
        writes.register(on: outbox)
        // An explicit drain says the network is there: writes waiting only because the server could
        // not be reached are due now (as when an app's connectivity signal comes back). Writes
        // backing off after a 408, 429 or 5xx keep their wait.
        outbox.connectivityChanged(isOnline: false)
        outbox.connectivityChanged(isOnline: true)
        let report = try await outbox.drain()

        var delivered = 0, parked = 0, deferred = 0, waiting = 0, elsewhere = 0
        let attemptedScopes = Set(before.filter { writes.lastAttempt(of: $0) != nil }.map(\.scope))
        for entry in before {
            let attempt = writes.lastAttempt(of: entry)
            let id = entry.idempotencyKey
            // Not attempted here: another process sharing the outbox may have sent it, or be sending it.
            if attempt == nil {
                let here = try await outbox.entry(entry.id)
                let stored = outbox.storage.isSharedByProcesses ? try await outbox.storage.entry(entry.id) : here
                guard here != nil, stored != nil else {
                    elsewhere += 1
                    stdout("elsewhere \(id): delivered by another process")
                    continue
                }
                if report.heldElsewhere > 0, !attemptedScopes.contains(entry.scope), let stored, stored.isPending {
                    waiting += 1
                    stdout("waiting \(id): another process is sending scope \(entry.scope)")
                    continue
                }
            }
            guard let after = try await outbox.entry(entry.id) else {
                delivered += 1
                let status = if case .answered(let status, _) = attempt { "\(status)" } else { "2xx" }
                stdout("sent \(status) \(id)")
                continue
            }
            if let letter = after.deadLetter {
                parked += 1
                stdout("parked \(id): \(Self.describe(letter))")
                stderr("strata outbox drain: \(id) was refused: " + Self.statusAndExcerpt(letter, attempt: attempt))
            } else if after.attempts > entry.attempts {
                deferred += 1
                stdout("deferred \(id): \(Self.reasonQueued(after, attempt: attempt)); next attempt \(Self.timestamp(after.nextAttemptAt))")
            } else {
                waiting += 1
                stdout("waiting \(id): \(Self.reasonWaiting(after, now: environment.now()))")
            }
        }
        let summary = "drained: \(delivered) delivered, \(parked) parked, \(deferred) deferred, \(waiting) waiting"
            + (elsewhere > 0 ? ", \(elsewhere) delivered by another process" : "")
        stderr("strata outbox drain: \(summary)")
        if parked > 0 { return .parked }
        if deferred + waiting > 0 { return .deferred }
        return .ok
    }

    // MARK: retry and discard

    private func retry(_ outbox: Outbox, prefix: String, stdout: (String) -> Void, stderr: (String) -> Void) async throws -> OutboxExitCode {
        let entry = try await Self.resolve(prefix, in: outbox.entries())
        let id = entry.idempotencyKey
        guard !entry.isPending else {
            stderr("strata outbox retry: \(id) is pending, not a dead letter: it is already queued ('strata outbox drain' sends it)")
            return .notParked
        }
        try await outbox.retry(entry.id)
        stdout("retried \(id): pending again, attempts reset; 'strata outbox drain' sends it")
        return .ok
    }

    private func discard(_ outbox: Outbox, prefix: String, stdout: (String) -> Void, stderr: (String) -> Void) async throws -> OutboxExitCode {
        let entry = try await Self.resolve(prefix, in: outbox.entries())
        let id = entry.idempotencyKey
        guard let letter = entry.deadLetter else {
            stderr("strata outbox discard: refused: \(id) is pending, not a dead letter; only parked writes can be discarded "
                + "(a pending write may still be delivered). Nothing was removed.")
            return .notParked
        }
        try await outbox.discard(entry.id)
        stdout("discarded \(id): \(EntryView(entry).methodAndURL), parked because \(Self.describe(letter)); it will not be sent")
        return .ok
    }

    /// The one entry whose id starts with `prefix` (case-insensitive, dashes optional).
    static func resolve(_ prefix: String, in entries: [OutboxEntry]) throws(EntryLookupError) -> OutboxEntry {
        let wanted = prefix.lowercased().filter { $0 != "-" }
        guard !wanted.isEmpty else { throw .empty }
        let matches = entries.filter { $0.idempotencyKey.filter { $0 != "-" }.hasPrefix(wanted) }
        switch matches.count {
        case 1: return matches[0]
        case 0: throw .notFound(prefix)
        default: throw .ambiguous(prefix, matches.map(\.idempotencyKey))
        }
    }

    // MARK: Words

    /// Why a write is parked, in a few words: `HTTP 422, rejected by the server`.
    static func describe(_ letter: DeadLetter) -> String {
        (letter.status.map { "HTTP \($0), " } ?? "") + letter.reason.description
            + (letter.status == nil ? ": \(Redaction.redactingSecrets(in: letter.detail))" : "")
    }

    /// The status and the first bytes of the body the server refused a write with.
    static func statusAndExcerpt(_ letter: DeadLetter, attempt: AttemptRecorder.Attempt?) -> String {
        var status = letter.status
        var body = letter.body
        if status == nil, case .answered(let code, let answered) = attempt {
            status = code
            body = answered
        }
        let excerpt = body.map(Self.excerpt) ?? ""
        guard let status else { return Redaction.redactingSecrets(in: letter.detail) }
        return "HTTP \(status)" + (excerpt.isEmpty ? " (empty body)" : ": \(excerpt)")
    }

    /// Why a pending write is still queued after an attempt.
    static func reasonQueued(_ entry: OutboxEntry, attempt: AttemptRecorder.Attempt?) -> String {
        switch attempt {
        case .answered(let status, _)?: return "the server answered HTTP \(status), a transient failure"
        case .unanswered(let reason)?: return "the server could not be reached (\(reason))"
        case nil: return entry.lastFailure.map { Redaction.redactingSecrets(in: $0.description) } ?? "not attempted"
        }
    }

    /// Why a pending write was not attempted by a drain.
    static func reasonWaiting(_ entry: OutboxEntry, now: Date) -> String {
        if entry.nextAttemptAt > now {
            let failure = entry.lastFailure.map { " after \(Redaction.redactingSecrets(in: $0.description))" } ?? ""
            return "backing off\(failure); next attempt \(timestamp(entry.nextAttemptAt))"
        }
        return "an earlier write of scope \(entry.scope) is not delivered yet"
    }

    /// The first 300 bytes of a body as one line, secrets masked.
    static func excerpt(_ body: Data) -> String {
        let text = String(decoding: body.prefix(300), as: UTF8.self)
            .replacingOccurrences(of: "\r", with: " ").replacingOccurrences(of: "\n", with: " ")
            .trimmingCharacters(in: .whitespaces)
        return Redaction.redactingSecrets(in: text) + (body.count > 300 ? "…" : "")
    }

    /// A date as ISO 8601 in UTC, to the second.
    static func timestamp(_ date: Date) -> String {
        ISO8601DateFormatter().string(from: date)
    }
}

extension OutboxTool.Action {
    var name: String {
        switch self {
        case .list: "list"
        case .drain: "drain"
        case .retry: "retry"
        case .discard: "discard"
        case .count: "count"
        }
    }
}
