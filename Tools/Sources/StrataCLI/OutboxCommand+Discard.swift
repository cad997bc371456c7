import ArgumentParser
import Foundation
import Strata

extension OutboxCommand {
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
}
