import ArgumentParser
import Foundation
import StrataDemo

@main
struct StrataCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "strata",
        abstract: "Composable, offline-first data loading: demos and tools.",
        subcommands: [Demo.self]
    )
}

extension StrataCommand {
    struct Demo: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Narrate the offline-first chain (S4) against an in-process server and a real file cache.",
            discussion: """
                Starts the demo server on 127.0.0.1 (ephemeral port), caches in a temporary directory \
                that is removed afterwards, and moves a simulated clock so the whole scenario takes a \
                second: first launch offline, online, relaunch within max age, expired with the server \
                down, server back.
                """
        )

        func run() async throws {
            _ = try await OfflineFirstDemo().run()
        }
    }
}
