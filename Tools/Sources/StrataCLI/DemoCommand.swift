import ArgumentParser
import Foundation
import StrataDemo

/// `strata demo`.
public struct DemoCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Narrate the source systems working against an in-process server and real caches.",
        discussion: """
            Each scenario starts the demo server on 127.0.0.1 (a free port) in this process, \
            caches in a temporary location that is removed afterwards, and prints, step by step, \
            which tier served the data, how old it was and which requests were made. Time moves on a \
            simulated clock, so "a day later" takes no time.
            """
    )

    /// The scenarios, one per source system (named after it), and two more.
    public enum Scenario: String, ExpressibleByArgument, CaseIterable, Sendable {
        /// S0 FeedCaching (and S1 FileFeedStore): a feed repository with a caching decorator over a file store.
        case feedCaching = "feed-caching"
        /// S2 PostsRepository: a posts REST repository, mock and production configurations.
        case postsRepository = "posts-repository"
        /// S3 CrossCutting: analytics, logging and delivery on the main queue as decorators.
        case crossCutting = "cross-cutting"
        /// S4 OfflineFirst: the whole offline-first policy as one chain.
        case offlineFirst = "offline-first"
        /// Timeouts, a circuit breaker and request coalescing keeping the feed up through outages.
        case resilience
        /// S2 offline: a post written offline is queued durably, survives a relaunch and is created once.
        case offlineWrite = "offline-write"
        /// Every scenario, one after another.
        case all
    }

    @Option(help: "Which scenario to run: \(Scenario.allCases.map(\.rawValue).joined(separator: ", ")).")
    var scenario: Scenario = .all

    public init() {}

    public func run() async throws {
        let write = StandardOutput.writeLine
        let selected: [Scenario] = scenario == .all ? [.feedCaching, .postsRepository, .crossCutting, .offlineFirst, .resilience, .offlineWrite] : [scenario]
        for (index, scenario) in selected.enumerated() {
            if index > 0 { write("\n" + String(repeating: "─", count: 72) + "\n") }
            switch scenario {
            case .feedCaching: _ = try await FeedCachingScenario().run(write: write)
            case .postsRepository: _ = try await PostsRepositoryScenario().run(write: write)
            case .crossCutting: _ = try await CrossCuttingScenario().run(write: write)
            case .offlineFirst: _ = try await OfflineFirstScenario().run(write: write)
            case .resilience: _ = try await ResilienceScenario().run(write: write)
            case .offlineWrite: _ = try await OfflineWriteScenario().run(write: write)
            case .all: break
            }
        }
    }
}
