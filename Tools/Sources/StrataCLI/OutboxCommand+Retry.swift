import ArgumentParser
import Foundation
import Strata

extension OutboxCommand {
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
}
