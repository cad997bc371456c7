import ArgumentParser
import Foundation

/// A size on the command line: `8MB`, `512KB`, `1GB`, `100B` or a bare number of bytes; `KB`, `MB` and
/// `GB` are powers of 1024 (`KiB`, `MiB`, `GiB` and `K`, `M`, `G` are accepted too, case-insensitively).
/// `none` means no limit.
public struct ByteCountArgument: ExpressibleByArgument, Sendable, Equatable, CustomStringConvertible {
    /// The size in bytes; `nil` for `none`.
    public var bytes: Int?
    public let description: String

    public init(bytes: Int?, description: String) {
        self.bytes = bytes
        self.description = description
    }

    public init?(argument: String) {
        if argument.trimmingCharacters(in: .whitespaces).lowercased() == "none" {
            self.init(bytes: nil, description: argument)
            return
        }
        // Longest suffixes first, so "kib" is not read as "b" after "ki".
        let units: [(suffix: String, scale: Double)] = [
            ("kib", 1024), ("mib", 1_048_576), ("gib", 1_073_741_824),
            ("kb", 1024), ("mb", 1_048_576), ("gb", 1_073_741_824),
            ("k", 1024), ("m", 1_048_576), ("g", 1_073_741_824), ("b", 1),
        ]
        guard let value = NumberWithUnit.parse(argument, units: units), value > 0 else { return nil }
        let bytes = value.rounded()
        guard bytes >= 1, bytes < Double(Int.max) else { return nil }
        self.init(bytes: Int(bytes), description: argument)
    }

    public static var defaultCompletionKind: CompletionKind { .default }
}
