import ArgumentParser
import Foundation
import Strata

extension OutboxCommand {
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
}
