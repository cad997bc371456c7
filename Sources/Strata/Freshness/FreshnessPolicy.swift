import Foundation

/// What ``FreshnessPolicy`` looks at when it judges a cached entry.
public struct FreshnessContext: Sendable {
    /// When the entry was stored.
    public var storedAt: Date
    /// The current wall-clock time (from the injected `now`).
    public var now: Date
    /// `now - storedAt`; negative when the entry claims to come from the future.
    public var age: Duration { .between(storedAt, now) }

    public init(storedAt: Date, now: Date) {
        self.storedAt = storedAt
        self.now = now
    }
}

/// Decides whether a cached entry may be served.
///
/// ```swift
/// store.loader(key: "feed", freshness: .maxAge(.seconds(24 * 3600)))   // the offline-first example's TwentyFourHoursPolicy
/// store.loader(key: "feed", freshness: .any)                 // the offline-first example's NullPolicy
/// store.loader(key: "feed", freshness: .custom("same day") { calendar.isDate($0.storedAt, inSameDayAs: $0.now) })
/// ```
public struct FreshnessPolicy: Sendable, CustomStringConvertible {
    @usableFromInline let predicate: @Sendable (FreshnessContext) -> Bool
    /// A short description used in errors, for example `max age 1d 0h`.
    public let description: String
    /// Whether every entry is acceptable whatever its age (``any``): a store loader then serves a hit
    /// without reading the clock, unless a load report asks for the entry's age.
    @usableFromInline let acceptsAnyAge: Bool

    init(predicate: @escaping @Sendable (FreshnessContext) -> Bool, description: String, acceptsAnyAge: Bool = false) {
        self.predicate = predicate
        self.description = description
        self.acceptsAnyAge = acceptsAnyAge
    }

    /// A policy defined by `predicate`.
    public static func custom(
        _ description: String = "custom",
        _ predicate: @escaping @Sendable (FreshnessContext) -> Bool
    ) -> FreshnessPolicy {
        FreshnessPolicy(predicate: predicate, description: description)
    }

    /// Fresh while `age < maxAge`. An entry exactly `maxAge` old is expired.
    ///
    /// An entry stored *after* `now` (the clock moved backwards, or the entry was written by a machine
    /// with a clock ahead of ours) cannot be aged and is treated as expired, so a wrong clock never
    /// pins stale data as fresh.
    public static func maxAge(_ maxAge: Duration) -> FreshnessPolicy {
        FreshnessPolicy(
            predicate: { context in
                let age = context.age
                return age >= .zero && age < maxAge
            },
            description: "max age \(maxAge.formattedAge)"
        )
    }

    /// Anything cached is acceptable, however old (the offline-first example's `NullPolicy`).
    public static let any = FreshnessPolicy(predicate: { _ in true }, description: "any age", acceptsAnyAge: true)

    /// The policy of a staleness bound: `.maxAge(bound)`, or `.any` when there is none (`nil`).
    package static func staleness(_ bound: Duration?) -> FreshnessPolicy {
        bound.map { .maxAge($0) } ?? .any
    }

    /// Whether an entry stored at `storedAt` may be served at `now`.
    @inlinable
    public func isFresh(storedAt: Date, now: Date) -> Bool {
        predicate(FreshnessContext(storedAt: storedAt, now: now))
    }
}

extension FreshnessPolicy {
    /// Whether this policy accepts `entry` at `now`: ``FreshnessPolicy/any`` accepts every entry;
    /// any other policy, an entry no invalidation expired (``CacheEntry/isExpired``) whose age it accepts.
    @inlinable
    public func accepts<Value>(_ entry: CacheEntry<Value>, now: Date) -> Bool {
        acceptsAnyAge || (!entry.isExpired && isFresh(storedAt: entry.storedAt, now: now))
    }
}
