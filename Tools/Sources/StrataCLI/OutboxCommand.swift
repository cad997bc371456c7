import ArgumentParser
import Foundation
import Strata

/// `strata outbox`: the writes `strata send` queued.
public struct OutboxCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "outbox",
        abstract: "See and act on the writes 'strata send' queued: list, drain, retry, discard, count.",
        discussion: """
            The outbox is the one strata send uses: give the same --cache-dir and --store. Ids may be \
            given as a unique prefix (dashes optional).

            \(OutboxExitCode.helpTable)
            """,
        subcommands: [List.self, Drain.self, Retry.self, Discard.self, Count.self]
    )

    public init() {}

    /// Runs `action` on the outbox `location` names, with the commands' output, and exits with its code.
    static func perform(_ action: OutboxTool.Action, at location: OutboxLocationOptions) async throws {
        let code = await OutboxTool(location: location.location).run(
            action, stdout: StandardOutput.writeLine,
            stderr: { FileHandle.standardError.write(Data(($0 + "\n").utf8)) })
        if code != .ok { throw ExitCode(code.rawValue) }
    }

    /// `strata outbox list`.
    public struct List: AsyncParsableCommand {
        public static let configuration = CommandConfiguration(
            abstract: "One line per queued or parked write, in delivery order.",
            discussion: """
                Each line: ID STATE scope=SCOPE METHOD URL attempts=N next=TIME [credentials-not-kept=NAMES] error=TEXT
                STATE is pending or parked:REASON (rejected, conflict, unauthorized, retentionExceeded, \
                unknownKind, unreadablePayload). next is when a pending write may be attempted (- for a \
                parked one); error is the last failure, or for a dead letter the status and the start of \
                the server's answer. credentials-not-kept names the credential fields the write was \
                queued with and the outbox did not store. Bodies are not shown. --json prints one array \
                of objects with the same facts.
                """)

        @Flag(help: "Print one JSON array.")
        var json = false

        @OptionGroup var outboxLocation: OutboxLocationOptions

        public init() {}

        public func run() async throws { try await OutboxCommand.perform(.list(json: json), at: outboxLocation) }
    }

    /// `strata outbox drain`.
    public struct Drain: AsyncParsableCommand {
        public static let configuration = CommandConfiguration(
            abstract: "Send every write that is due, scope by scope in order; report each.",
            discussion: """
                Writes that failed because the server could not be reached are due at once (a drain \
                says the network is back); writes backing off after a 408, 429 or 5xx wait for their \
                next attempt. One line per write: sent STATUS ID, parked ID: REASON, deferred ID: REASON \
                (tried, failed transiently, still queued) or waiting ID: REASON (not tried); a summary \
                on standard error.

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

    /// `strata outbox retry ID`.
    public struct Retry: AsyncParsableCommand {
        public static let configuration = CommandConfiguration(
            abstract: "Put a parked write (a dead letter) back in the queue, its attempts reset.",
            discussion: "Refuses a pending write (exit 5). 'strata outbox drain' then sends it.")

        @Argument(help: "The entry's id, or a unique prefix of it.")
        var id: String

        @OptionGroup var outboxLocation: OutboxLocationOptions

        public init() {}

        public func run() async throws { try await OutboxCommand.perform(.retry(idPrefix: id), at: outboxLocation) }
    }

    /// `strata outbox discard ID`.
    public struct Discard: AsyncParsableCommand {
        public static let configuration = CommandConfiguration(
            abstract: "Remove a parked write (a dead letter) for good: it will not be sent.",
            discussion: "Refuses a pending write (exit 5): it may still be delivered. Retry it, or wait for it to be parked.")

        @Argument(help: "The entry's id, or a unique prefix of it.")
        var id: String

        @OptionGroup var outboxLocation: OutboxLocationOptions

        public init() {}

        public func run() async throws { try await OutboxCommand.perform(.discard(idPrefix: id), at: outboxLocation) }
    }

    /// `strata outbox count`.
    public struct Count: AsyncParsableCommand {
        public static let configuration = CommandConfiguration(
            abstract: "How many writes are pending and parked: 'N pending, M parked'.")

        @Flag(help: #"Print {"parked":M,"pending":N}."#)
        var json = false

        @OptionGroup var outboxLocation: OutboxLocationOptions

        public init() {}

        public func run() async throws { try await OutboxCommand.perform(.count(json: json), at: outboxLocation) }
    }
}
