import Foundation

/// A number followed by an optional unit suffix, as the command line's sizes and durations are
/// written (`8MB`, `500ms`, `30`).
enum NumberWithUnit {
    /// The number in `text` (trimmed, lowercased) times the scale of the first unit in `units` whose
    /// suffix it ends with, or times 1 without a suffix; `nil` when the rest is not a finite number.
    /// List longer suffixes before the suffixes they end with (`"ms"` before `"s"`).
    static func parse(_ text: String, units: [(suffix: String, scale: Double)]) -> Double? {
        let text = text.trimmingCharacters(in: .whitespaces).lowercased()
        let unit = units.first { text.hasSuffix($0.suffix) }
        let number = text.dropLast(unit?.suffix.count ?? 0).trimmingCharacters(in: .whitespaces)
        guard let value = Double(number), value.isFinite else { return nil }
        return value * (unit?.scale ?? 1)
    }
}
