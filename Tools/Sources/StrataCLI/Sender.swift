import Foundation
import Logging
import Strata
import StrataOutbox

/// `strata send`: queues an HTTP write in the durable outbox, then tries to send it at once.
///
/// The write is saved before anything is sent, so it is never lost: if the server cannot be reached
/// or fails transiently (408, 429, 5xx) it stays queued for `strata outbox drain`; if the server
/// refuses it (another 4xx, a 501) it is parked as a dead letter for `strata outbox retry` or
/// `discard`. Every attempt carries the same `Idempotency-Key` (the entry's id), so a server that
/// honours it applies the write once however often it is sent. A request that carries its own
/// `Idempotency-Key` (a UUID) is queued under that id: running the same command again after an error
/// answers with the entry already queued, never a second copy. Credentials (`Authorization`,
/// `Proxy-Authorization`, `Cookie`) are never written to the outbox: this command adds them back to
/// its own attempt.
public struct Sender: Sendable {
    public struct Options: Sendable {
        /// The method, as sent (`POST`, `PUT`, `PATCH`, `DELETE`).
        public var method: HTTPRequest.Method
        public var url: URL
        /// Header fields in order, credentials included (they are not stored).
        public var headerFields: HTTPFields
        public var body: Data?
        /// The write's scope; `nil`: the URL's path.
        public var scope: String?
        /// Sent as `If-Match`; a 409/412 parks the write as a conflict.
        public var ifMatch: String?
        public var timeout: Duration?
        public var location: OutboxLocation

        public init(method: HTTPRequest.Method, url: URL, headerFields: HTTPFields = HTTPFields(), body: Data? = nil,
                    scope: String? = nil, ifMatch: String? = nil, timeout: Duration? = .seconds(30), location: OutboxLocation) {
            self.method = method
            self.url = url
            self.headerFields = headerFields
            self.body = body
            self.scope = scope
            self.ifMatch = ifMatch
            self.timeout = timeout
            self.location = location
        }
    }

    let options: Options
    let transport: any HTTPTransport
    let environment: LoadEnvironment

    /// - Parameters:
    ///   - transport: sends the write (the shared URLSession client by default).
    ///   - environment: `now` stamps the entry; its logger reports the outbox's storage failures.
    public init(options: Options, transport: any HTTPTransport = URLSessionHTTPClient.shared, environment: LoadEnvironment = OutboxTool.defaultEnvironment) {
        self.options = options
        self.transport = transport
        self.environment = environment
    }

    /// Queues the write and tries it once, writing one result line with `stdout` (`sent …`,
    /// `queued …`, `parked …`) and details with `stderr`; returns the exit code.
    public func run(stdout: @Sendable (String) -> Void, stderr: @Sendable (String) -> Void) async -> OutboxExitCode {
        let opened: OutboxLocation.Opened
        do {
            opened = try await options.location.open(logger: environment.logger)
        } catch {
            stderr("strata send: not queued, nothing sent: \(options.location) cannot be opened: \(Redaction.redactingSecrets(in: "\(error)"))")
            return error is OutboxLocationError ? .usage : .storage
        }
        let code = await run(storage: opened.storage, stdout: stdout, stderr: stderr)
        await opened.close()
        return code
    }

    private func run(storage: any OutboxStorage, stdout: (String) -> Void, stderr: (String) -> Void) async -> OutboxExitCode {
        var request = HTTPRequest(method: options.method, url: options.url, headerFields: options.headerFields)
        request = WithheldCredentials.marking(request)
        let credentials = Array(options.headerFields.filter { WithheldCredentials.isCredential($0.name) })

        // 1. Durable first: the write is in the outbox before anything is sent.
        let outbox = Outbox(storage: storage, name: "strata", environment: environment)
        let entry: OutboxEntry
        do {
            entry = try await outbox.enqueue(request, body: options.body, scope: options.scope, baseVersion: options.ifMatch)
        } catch OutboxError.outcomeUnknown(let id, let underlying) {
            // Neither queued nor refused: the same command with the same key settles it.
            let key = id.uuidString.lowercased()
            stderr("strata send: not known whether the write was queued (\(Redaction.redactingSecrets(in: "\(underlying)"))); "
                + "nothing was sent. Run the same command with -H 'Idempotency-Key: \(key)' to settle it: it is queued once, never twice")
            return .storage
        } catch {
            stderr("strata send: not queued, nothing sent: \(Redaction.redactingSecrets(in: "\(error)"))")
            return .storage
        }
        let id = entry.idempotencyKey

        // 2. Writes of one scope go out in order: behind earlier ones, this one waits for the drain.
        let ahead: Int
        do {
            ahead = try await outbox.pendingEntries(scope: entry.scope).prefix { $0.id != entry.id }.count
        } catch {
            stdout("queued \(id): the outbox could not be read again (\(Redaction.redactingSecrets(in: "\(error)"))); will be sent by 'strata outbox drain'")
            return .ok
        }
        if ahead > 0 {
            let writes = ahead == 1 ? "1 earlier write" : "\(ahead) earlier writes"
            stdout("queued \(id): \(writes) to scope \(entry.scope) must be delivered first; will be sent by 'strata outbox drain'")
            return .ok
        }

        // 3. One attempt, of this write only, with this command's credentials.
        let single = Outbox(
            storage: OneEntryOutboxStorage(base: storage, id: entry.id), name: "strata", environment: environment)
        let writes = OutboxHTTPWrites(transport: transport, timeout: options.timeout, credentials: credentials)
        writes.register(on: single)
        let after: OutboxEntry?
        let report: OutboxDrainReport
        do {
            report = try await single.drain()
            after = try await single.entry(entry.id)
        } catch {
            stdout("queued \(id): the attempt could not start (\(Redaction.redactingSecrets(in: "\(error)"))); will be sent by 'strata outbox drain'")
            return .ok
        }
        let attempt = writes.lastAttempt(of: entry)
        if attempt == nil, report.heldElsewhere > 0 || after == nil {
            // Another process sharing the outbox drains the scope, or queued a write ahead of this one.
            stdout("queued \(id): another process is sending scope \(entry.scope) or queued a write to it first; "
                + "will be sent by that process or 'strata outbox drain'")
            return .ok
        }
        guard let after else {
            let status = if case .answered(let status, _) = attempt { "\(status)" } else { "2xx" }
            stdout("sent \(status) \(id)")
            return .ok
        }
        if let letter = after.deadLetter {
            let reason = OutboxTool.describe(letter)
            stdout("parked \(id): \(reason); 'strata outbox retry \(id)' sends it again, 'strata outbox discard \(id)' removes it")
            stderr("strata send: \(options.method.rawValue) \(Redaction.redactedString(for: options.url)) was refused: "
                + OutboxTool.statusAndExcerpt(letter, attempt: attempt))
            return letter.reason == .conflict ? .conflict : .parked
        }
        stdout("queued \(id): \(OutboxTool.reasonQueued(after, attempt: attempt)); will be sent by 'strata outbox drain'")
        return .ok
    }
}
