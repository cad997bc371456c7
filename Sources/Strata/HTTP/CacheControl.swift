import Foundation

/// The `Cache-Control` directives a private cache acts on (RFC 9111 §5.2.2), parsed leniently.
///
/// - Directive names are case-insensitive; values may be tokens or quoted strings (`max-age="60"`).
/// - Directives are separated by commas; commas inside quoted strings (`no-cache="Set-Cookie, Vary"`)
///   do not split.
/// - A `max-age` that is not a non-negative whole number of seconds is ignored (as if absent); the
///   first valid one wins; a number too large for the cache is capped at 2³¹ seconds (RFC 9111 §1.2.2).
/// - `s-maxage`, `public`, `private`, `proxy-revalidate` and unknown directives are ignored: they
///   speak to shared caches or do not change what a private cache stores.
///
/// ```swift
/// let directives = CacheControl(parsing: "private, Max-Age=\"60\", no-cache=\"Set-Cookie, Vary\"")
/// directives.maxAge    // .seconds(60)
/// directives.noCache   // true
/// ```
public struct CacheControl: Sendable, Hashable {
    /// `max-age`: how long the response stays fresh; `nil` when absent or invalid.
    public var maxAge: Duration?
    /// `no-store`: the response must not be stored.
    public var noStore: Bool
    /// `no-cache` (with or without field names): a stored response must be revalidated before every use.
    public var noCache: Bool

    /// The largest `max-age` kept: 2³¹ seconds, the cap RFC 9111 §1.2.2 gives for delta-seconds.
    public static let maxDeltaSeconds: Int64 = 2_147_483_648

    /// Directives with the given values.
    public init(maxAge: Duration? = nil, noStore: Bool = false, noCache: Bool = false) {
        self.maxAge = maxAge
        self.noStore = noStore
        self.noCache = noCache
    }

    /// Parses a `Cache-Control` field value; anything it does not understand is ignored.
    public init(parsing fieldValue: String) {
        self.init()
        for (name, value) in Self.directives(in: fieldValue) {
            switch name {
            case "max-age":
                if maxAge == nil, let value, let seconds = Self.deltaSeconds(value) { maxAge = .seconds(seconds) }
            case "no-store":
                noStore = true
            case "no-cache":
                noCache = true
            default:
                continue
            }
        }
    }

    /// The `name[=value]` pairs of a field value: names lowercased and trimmed, values unquoted
    /// (`\x` escapes resolved), in order, empty names dropped. Commas inside quoted strings do not
    /// split. Public so that a cache acting on other directives (a shared cache's `s-maxage`,
    /// `private`, `max-stale`…) reads them with this same lenient tokenizer.
    public static func directives(in fieldValue: String) -> [(name: String, value: String?)] {
        var result: [(name: String, value: String?)] = []
        for segment in splitOutsideQuotes(fieldValue) {
            let parts = segment.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = parts[0].trimmingCharacters(in: .whitespaces).lowercased()
            guard !name.isEmpty else { continue }
            let value = parts.count == 2 ? unquote(parts[1].trimmingCharacters(in: .whitespaces)) : nil
            result.append((name, value))
        }
        return result
    }

    /// The comma-separated parts of `text`, leaving commas inside quoted strings alone.
    private static func splitOutsideQuotes(_ text: String) -> [String] {
        var segments: [String] = []
        var current = ""
        var inQuotes = false
        var escaped = false
        for character in text {
            if inQuotes {
                if escaped {
                    escaped = false
                } else if character == "\\" {
                    escaped = true
                } else if character == "\"" {
                    inQuotes = false
                }
                current.append(character)
            } else if character == "," {
                segments.append(current)
                current = ""
            } else {
                if character == "\"" { inQuotes = true }
                current.append(character)
            }
        }
        segments.append(current)
        return segments
    }

    /// `text` without its surrounding quotes and with `\x` escapes resolved, when it is a quoted
    /// string (an unterminated one runs to the end); `text` itself otherwise.
    private static func unquote(_ text: String) -> String {
        guard text.first == "\"" else { return text }
        var result = ""
        var escaped = false
        for character in text.dropFirst() {
            if escaped {
                result.append(character)
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else if character == "\"" {
                break
            } else {
                result.append(character)
            }
        }
        return result
    }

    /// A delta-seconds value (`1*DIGIT`, RFC 9111 §1.2.2), capped at ``maxDeltaSeconds``; `nil` for
    /// anything else (empty, signs, fractions, spaces inside). Public for the same reason as
    /// ``directives(in:)``, and for the `Age` field, which is delta-seconds too.
    public static func deltaSeconds(_ text: String) -> Int64? {
        guard !text.isEmpty, text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else { return nil }
        return Int64(text).map { min($0, maxDeltaSeconds) } ?? maxDeltaSeconds
    }
}

extension HTTPFields {
    /// The `Cache-Control` directives of these fields (all `Cache-Control` fields combined; none when
    /// there is no such field).
    public var cacheControl: CacheControl {
        self[.cacheControl].map(CacheControl.init(parsing:)) ?? CacheControl()
    }

    /// How long the response stays fresh from the moment it was received (RFC 9111 §4.2.1 for a
    /// private cache), or `nil` when the server gave no freshness information:
    ///
    /// - `no-cache`: zero (revalidate before every use);
    /// - otherwise `max-age`, or else `Expires` minus `Date` (`Date` defaults to `receivedAt`; an
    ///   `Expires` that is not an HTTP-date, such as `0`, means already expired);
    /// - less the `Age` the response already had in upstream caches; never negative.
    public func freshnessLifetime(receivedAt: Date) -> Duration? {
        let directives = cacheControl
        if directives.noCache { return .zero }
        let lifetime: Duration
        if let maxAge = directives.maxAge {
            lifetime = maxAge
        } else if let expires = self[.expires] {
            guard let expiry = HTTPDate.date(from: expires) else { return .zero }
            let date = self[.date].flatMap(HTTPDate.date(from:)) ?? receivedAt
            lifetime = .between(date, expiry)
        } else {
            return nil
        }
        let age = self[.age].flatMap { CacheControl.deltaSeconds($0.trimmingCharacters(in: .whitespaces)) } ?? 0
        return Swift.max(.zero, lifetime - .seconds(age))
    }

    /// Whether the fields carry freshness information (`Cache-Control` or `Expires`).
    var hasFreshnessFields: Bool {
        self[.cacheControl] != nil || self[.expires] != nil
    }
}
