extension Duration {
    /// `minutes` minutes: `.maxAge(.minutes(5))`.
    public static func minutes(_ minutes: Int) -> Duration { .seconds(minutes * 60) }

    /// `minutes` minutes, fractional: `.minutes(1.5)` is 90 seconds.
    public static func minutes(_ minutes: Double) -> Duration { .seconds(minutes * 60) }

    /// `hours` hours: `.maxAge(.hours(24))`.
    public static func hours(_ hours: Int) -> Duration { .seconds(hours * 3600) }

    /// `hours` hours, fractional: `.hours(0.5)` is 30 minutes.
    public static func hours(_ hours: Double) -> Duration { .seconds(hours * 3600) }

    /// `days` days of 24 hours (not calendar days: no daylight-saving shifts): `.days(7)`.
    public static func days(_ days: Int) -> Duration { .seconds(days * 86_400) }

    /// `days` days of 24 hours, fractional.
    public static func days(_ days: Double) -> Duration { .seconds(days * 86_400) }
}
