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

    /// Parses `text`, or throws an error whose description says why it is not a size (not a number,
    /// NaN, infinite, negative, less than one byte, more than `Int.max` bytes); used as the option's
    /// `transform`, so the usage error names the option.
    public init(parsing argument: String) throws {
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
        let value = try NumberWithUnit.parse(
            argument, units: units, expected: "a size such as 512KB, 8MB, 1GB, a number of bytes, or none")
        let bytes = value.rounded()
        guard bytes >= 1 else { throw InvalidArgument("must be at least 1 byte (none means no limit)") }
        // Double(Int.max) rounds up to 2^63, which Int cannot hold: every smaller Double converts.
        guard bytes < Double(Int.max) else { throw InvalidArgument("too large (at most \(Int.max) bytes)") }
        self.init(bytes: Int(bytes), description: argument)
    }

    public init?(argument: String) {
        guard let parsed = try? Self(parsing: argument) else { return nil }
        self = parsed
    }

    public static var defaultCompletionKind: CompletionKind { .default }
}
