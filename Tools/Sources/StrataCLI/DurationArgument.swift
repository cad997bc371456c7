import ArgumentParser

/// A duration on the command line: `500ms`, `30s`, `10m`, `2h`, `7d`, or a bare number of seconds;
/// at most ``maximum`` (100 years), kept to the millisecond.
public struct DurationArgument: ExpressibleByArgument, Sendable, Equatable, CustomStringConvertible {
    public var duration: Duration
    public let description: String

    /// The longest duration accepted: 100 years (36,525 days). Longer spans mean "forever" to a cache,
    /// and refusing them keeps every later computation (dates, deadlines) far from overflow.
    public static let maximum = Duration.seconds(maximumSeconds)
    static let maximumSeconds: Int64 = 36_525 * 86_400

    public init(_ duration: Duration, description: String) {
        self.duration = duration
        self.description = description
    }

    /// Parses `text`, or throws an error whose description says why it is not a duration (not a
    /// number, NaN, infinite, negative, longer than 100 years); used as the options' `transform`, so
    /// the usage error names the option.
    public init(parsing text: String) throws {
        // "ms" is checked before "s", so "500ms" is never read as 500 m + "s".
        let units: [(suffix: String, scale: Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86_400)]
        let seconds = try NumberWithUnit.parse(
            text, units: units, expected: "a duration such as 500ms, 30s, 10m, 2h, 7d or a number of seconds")
        guard seconds <= Double(Self.maximumSeconds) else {
            throw InvalidArgument("longer than 100 years (36525d), the longest duration accepted")
        }
        self.duration = .milliseconds(Int64((seconds * 1000).rounded()))
        self.description = text
    }

    public init?(argument: String) {
        guard let parsed = try? Self(parsing: argument) else { return nil }
        self = parsed
    }

    public static var defaultCompletionKind: CompletionKind { .default }
}
