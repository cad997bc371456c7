import ArgumentParser
import Foundation
import Strata

extension OutboxCommand {
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
