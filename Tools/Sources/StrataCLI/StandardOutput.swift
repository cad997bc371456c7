import Foundation

/// Where the command-line tool's output goes: the commands' product for people and scripts (not
/// diagnostics, which go through swift-log). Each line is written with one unbuffered `write(2)`, so a
/// script reading a pipe sees it at once.
enum StandardOutput {
    static let writeLine: @Sendable (String) -> Void = { line in
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }
}
