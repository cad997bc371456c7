import ArgumentParser
import Foundation
import StrataDemo

/// `strata demo`.
public struct DemoCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Narrate the source systems working against an in-process server and real caches.",
        discussion: """
            Each scenario starts the demo server on 127.0.0.1 (ephemeral port) in this process, \
            caches in a temporary location that is removed afterwards, and prints, step by step, \
            which tier served the data, how old it was and which requests were made. Time moves on a \
            simulated clock, so "a day later" takes no time.
            """
    )

    /// The scenarios, one per source system.
    public enum Scenario: String, ExpressibleByArgument, CaseIterable, Sendable {
        case offlineFirst = "offline-first"
        case all
    }

    @Option(help: "Which scenario to run: \(Scenario.allCases.map(\.rawValue).joined(separator: ", ")).")
    var scenario: Scenario = .all

    public init() {}

    public func run() async throws {
        let print: @Sendable (String) -> Void = { Swift.print($0) }
        switch scenario {
        case .offlineFirst, .all:
            _ = try await OfflineFirstDemo().run(print: print)
        }
    }
}
