import Foundation

/// Every `Duration` helper of the library, in one place: the units its own code and tests read in
/// (`.minutes`, `.hours`, `.days`), ages for people, and conversions to and from wall-clock time.
///
/// The units are `package`, not public: an app that declares the same helpers (many do) would
/// otherwise meet an ambiguous `.minutes(5)` as soon as it imports Strata. Public examples write
/// `.seconds(5 * 60)`.
extension Duration {
    /// `minutes` minutes: `.minutes(5)`.
    package static func minutes(_ minutes: Int) -> Duration { .seconds(minutes * 60) }

    /// `minutes` minutes, fractional: `.minutes(1.5)` is 90 seconds.
    package static func minutes(_ minutes: Double) -> Duration { .seconds(minutes * 60) }

    /// `hours` hours: `.hours(24)`.
    package static func hours(_ hours: Int) -> Duration { .seconds(hours * 3600) }

    /// `hours` hours, fractional: `.hours(0.5)` is 30 minutes.
    package static func hours(_ hours: Double) -> Duration { .seconds(hours * 3600) }

    /// `days` days of 24 hours (not calendar days: no daylight-saving shifts): `.days(7)`.
    package static func days(_ days: Int) -> Duration { .seconds(days * 86_400) }

    /// `days` days of 24 hours, fractional.
    package static func days(_ days: Double) -> Duration { .seconds(days * 86_400) }
}

extension Duration {
    /// This duration as an age for people: `250ms`, `42s`, `5m 3s`, `2h 0m`, `3d 4h`. Negative ages
    /// read as zero.
    public var formattedAge: String { Self.formatAge(self) }

    private static func formatAge(_ age: Duration) -> String {
        let seconds = max(0, Int(age.components.seconds))
        if seconds == 0 {
            let milliseconds = max(0, age.components.attoseconds / 1_000_000_000_000_000)
            return milliseconds == 0 || age < .zero ? "0s" : "\(milliseconds)ms"
        }
        if seconds < 60 { return "\(seconds)s" }
        if seconds < 3600 { return "\(seconds / 60)m \(seconds % 60)s" }
        if seconds < 86_400 { return "\(seconds / 3600)h \((seconds % 3600) / 60)m" }
        return "\(seconds / 86_400)d \((seconds % 86_400) / 3600)h"
    }
}

extension Duration {
    /// The duration between two wall-clock dates (negative when `end` is before `start`).
    @usableFromInline
    package static func between(_ start: Date, _ end: Date) -> Duration {
        let interval = end.timeIntervalSince(start)
        // Whole nanoseconds, through an integer: `.seconds(Double)` converts exactly, at several
        // times the cost, and every recorded cache hit ages its entry.
        guard abs(interval) < 9e9 else { return .seconds(interval) }
        return .nanoseconds(Int64((interval * 1e9).rounded()))
    }
}

extension Duration {
    /// The duration in seconds, as a `Double`.
    package var seconds: Double {
        // `components` once: each reading divides a 128-bit count (a live query asks on every step).
        let parts = components
        return Double(parts.seconds) + Double(parts.attoseconds) / 1e18
    }
}
