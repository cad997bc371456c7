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
        // "ms" is checked before "s", so "500ms" is never read as 500 m + "s".
        let units: [(suffix: String, scale: Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86_400)]
        guard let seconds = NumberWithUnit.parse(argument, units: units), seconds >= 0 else { return nil }
        self.duration = .milliseconds(Int64((seconds * 1000).rounded()))
        self.description = argument
    }

    public static var defaultCompletionKind: CompletionKind { .default }
}
