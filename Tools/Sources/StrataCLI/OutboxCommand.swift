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
}
