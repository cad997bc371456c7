import ArgumentParser

/// A duration on the command line: `500ms`, `30s`, `10m`, `2h`, `7d`, or a bare number of seconds.
public struct DurationArgument: ExpressibleByArgument, Sendable, Equatable, CustomStringConvertible {
    public var duration: Duration
    public let description: String

    public init(_ duration: Duration, description: String) {
        self.duration = duration
        self.description = description
    }

    public init?(argument: String) {
        let text = argument.trimmingCharacters(in: .whitespaces).lowercased()
        let units: [(suffix: String, seconds: Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86_400)]
        var number = Substring(text)
        var scale = 1.0
        for unit in units where text.hasSuffix(unit.suffix) {
            // "ms" is checked before "s", so "500ms" is never read as 500 m + "s".
            number = text.dropLast(unit.suffix.count)
            scale = unit.seconds
            break
        }
        guard let value = Double(number), value.isFinite, value >= 0 else { return nil }
        self.duration = .milliseconds(Int64((value * scale * 1000).rounded()))
        self.description = argument
    }

    public static var defaultCompletionKind: CompletionKind { .default }
}

import Foundation
