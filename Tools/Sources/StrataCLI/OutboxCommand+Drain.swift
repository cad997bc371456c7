import ArgumentParser
import Foundation
import Strata

extension OutboxCommand {
    /// `strata outbox drain`.
    public struct Drain: AsyncParsableCommand {
        public static let configuration = CommandConfiguration(
            abstract: "Send every write that is due, scope by scope in order; report each.",
            discussion: """
                Writes that failed because the server could not be reached are due at once (a drain \
                says the network is back); writes backing off after a 408, 429 or 5xx wait for their \
                next attempt. One line per write: sent STATUS ID, parked ID: REASON, deferred ID: REASON \
                (tried, failed transiently, still queued), waiting ID: REASON (not tried) or elsewhere \
                ID (delivered by another process sharing the outbox); a summary on standard error.

                Several drains (and an application) may share one outbox at once: each scope is sent \
                by one of them at a time, so every write is sent once, in order per scope. A scope \
                another drain is sending is left to it (waiting ID: another process is sending scope \
                S).

                -H gives credentials back: a write queued with an Authorization (Proxy-Authorization, \
                Cookie) header gets the one given here; writes queued without it never do.

                Exit codes: 0 every write that was due delivered; 2 at least one parked; 75 some still \
                queued; 1 the store failed.
                """)

        @Option(name: [.customShort("H"), .customLong("header")],
                help: "A credential header, 'Authorization: value' (or Proxy-Authorization, Cookie), for the writes queued with one (repeatable).")
        var headers: [String] = []

        @Option(help: "Give up on each attempt after this long (the write stays queued).", transform: DurationArgument.init(parsing:))
        var timeout: DurationArgument = DurationArgument(.seconds(30), description: "30s")

        @OptionGroup var outboxLocation: OutboxLocationOptions

        public init() {}

        public func validate() throws {
            _ = try credentials()
            guard timeout.duration > .zero else { throw ValidationError("--timeout must be longer than 0 (for example 30s)") }
        }

        func credentials() throws -> [HTTPField] {
            try headers.map { header in
                guard let colon = header.firstIndex(of: ":"),
                      let name = HTTPField.Name(header[..<colon].trimmingCharacters(in: .whitespaces)), WithheldCredentials.isCredential(name)
                else {
                    throw ValidationError("-H '\(Redaction.redactingSecrets(in: header))': drain takes only credential headers (Authorization, Proxy-Authorization, Cookie) as 'Name: value'")
                }
                return HTTPField(name: name, value: header[header.index(after: colon)...].trimmingCharacters(in: .whitespaces))
            }
        }

        public func run() async throws {
            try await OutboxCommand.perform(.drain(timeout: timeout.duration, credentials: try credentials()), at: outboxLocation)
        }
    }
}
