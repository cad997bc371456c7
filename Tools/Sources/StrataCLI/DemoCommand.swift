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

            --web serves the offline-first feed (S4) as a page on 127.0.0.1 instead: the posts, where \
            they came from and how old they are, the live query's phase, posts pending in the outbox, \
            and buttons that take the network away, move the clock a day, post and load the next page. \
            The inspector is at /inspector. Stop with Ctrl-C.
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
        /// The fleet tier: three `strata proxy` processes on one PostgreSQL (needs `STRATA_POSTGRES_URL`
        /// or `--postgres-url`; not part of `all`).
        case fleet
        /// Every scenario but `fleet`, one after another.
        case all
    }

    @Option(help: "Which scenario to run: \(Scenario.allCases.map(\.rawValue).joined(separator: ", ")).")
    var scenario: Scenario = .all

    @Flag(help: "Serve the offline-first feed as a page on 127.0.0.1, with the inspector, until Ctrl-C.")
    var web = false

    @Option(help: "With --web: the port to listen on (0 picks a free one).")
    var port = 8000

    @Option(help: "With --scenario fleet: the PostgreSQL the nodes share (default: $STRATA_POSTGRES_URL).")
    var postgresURL: String?

    public init() {}

    public func validate() throws {
        guard (0...65_535).contains(port) else { throw ValidationError("--port must be between 0 and 65535") }
        if !web, port != 8000 { throw ValidationError("--port needs --web") }
    }

    public func run() async throws {
        if web { return try await serveWeb() }
        let write = StandardOutput.writeLine
        if scenario == .fleet {
            guard let url = postgresURL ?? ProcessInfo.processInfo.environment["STRATA_POSTGRES_URL"], !url.isEmpty else {
                throw ValidationError(
                    "the fleet scenario needs PostgreSQL: --postgres-url URL, or STRATA_POSTGRES_URL (scripts/postgres.sh start prints one)")
            }
            return try await FleetDemo(postgresURL: url, write: write).run()
        }
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
            case .fleet, .all: break
            }
        }
    }
}

extension DemoCommand {
    /// `--web`: the feed page and the inspector on 127.0.0.1 until SIGINT or SIGTERM (exit 0).
    func serveWeb() async throws {
        let demo = try await FeedWebDemo.start()
        let (stop, stopRequested) = AsyncStream.makeStream(of: Void.self)
        let signals = SignalWaiter.start { stopRequested.yield() }
        defer { signals.forEach { $0.cancel() } }
        do {
            try await demo.serving(port: port) { port in
                let base = "http://127.0.0.1:\(port)"
                StandardOutput.writeLine("strata demo: the offline-first feed at \(base)/")
                StandardOutput.writeLine("  inspector  \(base)/inspector")
                StandardOutput.writeLine("  server     \(demo.server.baseURL.absoluteString)  (the demo server, in this process)")
                StandardOutput.writeLine("  token      \(demo.inspector.token)  (the pages send it with every request)")
                StandardOutput.writeLine("Ctrl-C to stop.")
                for await _ in stop { break }
            }
        } catch {
            await demo.stop()
            throw ValidationError("could not serve the web demo on 127.0.0.1:\(port): \(error)")
        }
        StandardOutput.writeLine("strata demo: stopping")
        await demo.stop()
    }
}
