import ArgumentParser
import Foundation

/// The `strata` command-line tool.
public struct StrataCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "strata",
        abstract: "Composable, offline-first data loading: demos and tools.",
        subcommands: [
            DemoCommand.self, ServeCommand.self, FetchCommand.self, WatchCommand.self, SendCommand.self, OutboxCommand.self,
            ProxyCommand.self,
        ]
    )

    public init() {}
}
