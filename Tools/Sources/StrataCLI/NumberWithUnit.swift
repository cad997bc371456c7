import Foundation

/// Why a value on the command line was refused. ArgumentParser prints its description after
/// "The value '…' is invalid for '--option <option>': ", so the message names the option and the value.
struct InvalidArgument: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) {
        self.description = description
    }
}

/// A number followed by an optional unit suffix, as the command line's sizes and durations are
/// written (`8MB`, `500ms`, `30`).
enum NumberWithUnit {
    /// The number in `text` (trimmed, lowercased) times the scale of the first unit in `units` whose
    /// suffix it ends with, or times 1 without a suffix. List longer suffixes before the suffixes they
    /// end with (`"ms"` before `"s"`).
    ///
    /// - Throws: ``InvalidArgument`` saying why when the rest is not a number, is NaN or infinite, is
    ///   negative, or the scaled value overflows; `expected` is appended to the "not a number" reason.
    static func parse(_ text: String, units: [(suffix: String, scale: Double)], expected: String) throws -> Double {
        let text = text.trimmingCharacters(in: .whitespaces).lowercased()
        let unit = units.first { text.hasSuffix($0.suffix) }
        let number = text.dropLast(unit?.suffix.count ?? 0).trimmingCharacters(in: .whitespaces)
        guard let value = Double(number) else { throw InvalidArgument("not a number; expected \(expected)") }
        guard !value.isNaN else { throw InvalidArgument("NaN is not a number; expected \(expected)") }
        guard value.isFinite else { throw InvalidArgument("must be finite; expected \(expected)") }
        guard value >= 0 else { throw InvalidArgument("must not be negative") }
        let scaled = value * (unit?.scale ?? 1)
        guard scaled.isFinite else { throw InvalidArgument("too large") }
        return scaled
    }
}
