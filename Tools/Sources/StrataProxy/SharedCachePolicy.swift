import Foundation
@_spi(StrataInternals) import Strata

// The decisions of a *shared* cache (RFC 9111), as pure functions of a request, a response and the
// times the caller measured: what to store and for how long, how old a stored response is, whether it
// may answer a request, which stored response a `Vary` selects, when a client's conditional request
// can be answered 304, and what an unsafe request invalidates. No I/O and no clock: every instant is
// a parameter, so each rule is a table test.

/// The `Cache-Control` directives a shared cache acts on (RFC 9111 §5.2), from a request or a response.
///
/// Parsed leniently with the library's own tokenizer (``CacheControl/directives(in:)``): names are
/// case-insensitive, values may be quoted (`max-age="60"`), a duration that is not delta-seconds is
/// ignored as if absent (RFC 9111 §4.2.1 lets a cache treat it as stale instead; ignoring it lets a
/// later valid one or `Expires` decide), the first valid occurrence wins, and durations are capped at
/// 2³¹ seconds (§1.2.2). Unknown directives are ignored (§5.2.3).
///
/// The qualified forms `private="Set-Cookie"` and `no-cache="Set-Cookie"` (§5.2.2.7, §5.2.2.4) are
/// read as their unqualified forms, which the RFC allows and which is the conservative reading.
struct SharedCacheDirectives: Sendable, Hashable {
    /// `max-age` (response §5.2.2.1: the freshness lifetime; request §5.2.1.1: the oldest response
    /// the client accepts without validation).
    var maxAge: Duration?
    /// `s-maxage` (§5.2.2.10): the freshness lifetime for a shared cache, ahead of `max-age` and
    /// `Expires`; it also carries the meaning of `proxy-revalidate`.
    var sMaxAge: Duration?
    /// `no-store` (request §5.2.1.5, response §5.2.2.5): store nothing of this exchange.
    var noStore = false
    /// `no-cache` (request §5.2.1.4: validate before using a stored response; response §5.2.2.4:
    /// a stored copy must be validated before every use).
    var noCache = false
    /// `private` (§5.2.2.7): only a private cache may store the response.
    var isPrivate = false
    /// `public` (§5.2.2.9): a shared cache may store it even where it otherwise could not
    /// (a request with `Authorization`, no explicit freshness, and here: a `Set-Cookie`).
    var isPublic = false
    /// `must-revalidate` (§5.2.2.2): once stale, never served without successful validation.
    var mustRevalidate = false
    /// `proxy-revalidate` (§5.2.2.8): `must-revalidate` for shared caches only.
    var proxyRevalidate = false
    /// `stale-if-error` (RFC 5861 §4): how long past its freshness a response may still be served
    /// when the origin answers with an error or cannot be reached.
    var staleIfError: Duration?
    /// `stale-while-revalidate` (RFC 5861 §3): how long past its freshness a response may be
    /// served while it is revalidated in the background.
    var staleWhileRevalidate: Duration?
    /// `max-stale=N` (request, §5.2.1.2): the client accepts a response stale by at most N.
    var maxStale: Duration?
    /// A bare `max-stale` (request, §5.2.1.2): the client accepts a stale response of any staleness.
    var acceptsAnyStaleness = false
    /// `min-fresh` (request, §5.2.1.3): the client wants a response still fresh for at least this long.
    var minFresh: Duration?
    /// `only-if-cached` (request, §5.2.1.7): answer from the cache or with 504, never forward.
    var onlyIfCached = false

    /// No directives: what a message without `Cache-Control` says.
    init() {}

    /// The directives of one `Cache-Control` field value; anything not understood is ignored.
    init(parsing fieldValue: String) {
        for (name, value) in CacheControl.directives(in: fieldValue) {
            switch name {
            case "max-age": maxAge = Self.firstValid(maxAge, value)
            case "s-maxage": sMaxAge = Self.firstValid(sMaxAge, value)
            case "no-store": noStore = true
            case "no-cache": noCache = true
            case "private": isPrivate = true
            case "public": isPublic = true
            case "must-revalidate": mustRevalidate = true
            case "proxy-revalidate": proxyRevalidate = true
            case "stale-if-error": staleIfError = Self.firstValid(staleIfError, value)
            case "stale-while-revalidate": staleWhileRevalidate = Self.firstValid(staleWhileRevalidate, value)
            case "max-stale":
                if value == nil { acceptsAnyStaleness = true } else { maxStale = Self.firstValid(maxStale, value) }
            case "min-fresh": minFresh = Self.firstValid(minFresh, value)
            case "only-if-cached": onlyIfCached = true
            default: continue
            }
        }
    }

    /// The directives of all the `Cache-Control` field lines of `fields`, combined with ", " as
    /// RFC 9110 §5.3 combines a list field.
    init(_ fields: HTTPFields) {
        self = fields[.cacheControl].map(Self.init(parsing:)) ?? Self()
    }

    /// `current` when already set (the first valid occurrence wins), else `value` read as
    /// delta-seconds, else `nil` (an invalid or missing value is ignored).
    private static func firstValid(_ current: Duration?, _ value: String?) -> Duration? {
        if let current { return current }
        guard let value, let seconds = CacheControl.deltaSeconds(value) else { return nil }
        return .seconds(seconds)
    }
}

/// What a shared cache does with a response it just received (RFC 9111 §3): store it, with a
/// ``StoredResponsePlan``, or not, with the reason (for logs and a debugging response header).
enum Storability: Sendable, Hashable {
    /// Store the response and use it as the plan says.
    case store(StoredResponsePlan)
    /// Do not store the response; `reason` says which rule forbade it, for people.
    case doNotStore(reason: String)
}

/// How a storable response is kept and used: everything the storing decision worked out, so the
/// proxy does not parse the response's fields again on every hit.
struct StoredResponsePlan: Sendable, Hashable {
    /// The freshness lifetime (RFC 9111 §4.2.1), counted from the response's generation: compare it
    /// with the response's current age (``SharedCachePolicy/initialAge(response:requestTime:responseTime:)``
    /// plus the time it has been stored), not with the time since it was stored. Zero means every
    /// use must be validated first.
    var lifetime: Duration
    /// The field names the response's `Vary` lists (§4.1), lowercased, deduplicated and sorted: the
    /// request fields whose values select this stored response
    /// (``SharedCachePolicy/varyValues(names:request:)``). Empty when the response does not vary.
    var varyFieldNames: [String]
    /// The purge tags of the response: `Cache-Tag` (comma-separated, Cloudflare's convention) then
    /// `Surrogate-Key` (space-separated, Fastly's), trimmed, empties dropped, each kept once in the
    /// order first seen. Compared exactly (case-sensitive).
    var tags: [String]
    /// Whether the cache may serve the response once stale without validating it (a client's
    /// `max-stale`, `stale-if-error`, an unreachable origin; §4.2.4). `false` when the response has
    /// `must-revalidate` (§5.2.2.2), `proxy-revalidate` (§5.2.2.8), `s-maxage` (§5.2.2.10) or
    /// `no-cache` (§5.2.2.4: never used without successful validation).
    var mayServeStale: Bool
    /// RFC 5861 `stale-while-revalidate=N`: how long past its lifetime it may be served while a
    /// background revalidation runs; `nil` without it.
    var staleWhileRevalidate: Duration? = nil
    /// RFC 5861 `stale-if-error=N`: how long past its lifetime it may be served when the upstream
    /// fails; `nil` without it.
    var staleIfError: Duration? = nil
}

/// The rules of a shared HTTP cache (RFC 9111), as pure functions; see the file's opening comment.
enum SharedCachePolicy {
    /// The status codes a cache may give a heuristic freshness lifetime when the response has no
    /// explicit one (RFC 9110 §15.1, "heuristically cacheable"; RFC 9111 §4.2.2).
    static let heuristicallyCacheableStatusCodes: Set<Int> = [200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501]

    /// The longest heuristic freshness lifetime given: one day. RFC 9111 §4.2.2 suggests 10 % of the
    /// time since `Last-Modified` and a cap; a day keeps a years-old resource from being trusted for
    /// weeks, and is the ceiling past which RFC 7234 §5.5.4 asked for a warning (113).
    static let maxHeuristicLifetime: Duration = .seconds(86_400)

    /// The methods RFC 9110 §9.2.1 defines as safe: the only ones that invalidate nothing (§4.4).
    static let safeMethods: Set<HTTPRequest.Method> = [.get, .head, .options, .trace]

    // MARK: Storing (RFC 9111 §3)

    /// Whether a shared cache may store `response` to `request`, and if so for how long and how.
    ///
    /// The rules, in order (the first that refuses wins):
    /// - only `GET` (§3: the method must be understood and cacheable; this cache stores GET
    ///   responses only, so HEAD and POST responses are passed through);
    /// - only a final status (§3), and neither 206 (this cache does not combine partial content,
    ///   §3.3–§3.4) nor 304 (a 304 freshens a stored response, §4.3.4; it is not a response to store);
    /// - no `no-store` in the request or the response (§5.2.1.5, §5.2.2.5);
    /// - no `private`, qualified or not (§5.2.2.7: a shared cache must not store it; storing it
    ///   without the named fields is allowed but not done here);
    /// - a request with `Authorization` only when the response has `public`, `s-maxage` or
    ///   `must-revalidate` (§3.5);
    /// - a response with `Set-Cookie` only when it has `public`. Stricter than the RFC, which lets a
    ///   shared cache store it (§7.3 warns about it): nginx and Varnish do not cache such a response
    ///   at all by default, since one visitor's cookie would be handed to the next. With `public`,
    ///   the proxy stores the response without its `Set-Cookie` fields: the client whose request
    ///   fetched it gets its cookie, later clients get the response without one;
    /// - not `Vary: *` (§4.1: such a response never matches a later request);
    /// - a freshness lifetime (§4.2.1): `s-maxage`, else `max-age`, else `Expires` − `Date`
    ///   (`Date` defaults to `responseTime`; an `Expires` that is not an HTTP-date, such as `0`,
    ///   means already expired: lifetime 0, §5.3; one before `Date` also gives 0), else, for a
    ///   heuristically cacheable status or a `public` response (§4.2.2, §3), 10 % of `Date` −
    ///   `Last-Modified` capped at ``maxHeuristicLifetime`` (0 without a usable `Last-Modified`).
    ///   Any other response without explicit freshness is not stored (§3);
    /// - `no-cache` in the response makes the lifetime 0 (§5.2.2.4);
    /// - a lifetime of 0 needs a validator (`ETag` or `Last-Modified`): a response that is stale on
    ///   arrival and cannot be revalidated is not stored ("no freshness information"), whatever its
    ///   `stale-if-error`.
    ///
    /// `responseTime` is when the response was received, for a response without a valid `Date`.
    static func storability(request: HTTPRequest, response: HTTPResponse, responseTime: Date) -> Storability {
        guard request.method == .get else {
            return .doNotStore(reason: "method \(request.method.rawValue): only GET responses are stored")
        }
        let code = response.status.code
        switch response.status.kind {
        case .informational, .invalid:
            return .doNotStore(reason: "status \(code) is not a final response")
        case .successful, .redirection, .clientError, .serverError:
            break
        }
        if code == 206 { return .doNotStore(reason: "206 Partial Content: partial responses are not stored") }
        if code == 304 { return .doNotStore(reason: "304 Not Modified updates a stored response; it is not stored itself") }

        let fields = response.headerFields
        let requestDirectives = SharedCacheDirectives(request.headerFields)
        let directives = SharedCacheDirectives(fields)
        if requestDirectives.noStore { return .doNotStore(reason: "the request's Cache-Control has no-store") }
        if directives.noStore { return .doNotStore(reason: "the response's Cache-Control has no-store") }
        if directives.isPrivate { return .doNotStore(reason: "the response is private: a shared cache must not store it") }
        if request.headerFields[.authorization] != nil,
           !(directives.isPublic || directives.sMaxAge != nil || directives.mustRevalidate) {
            return .doNotStore(reason: "the request has Authorization and the response has none of public, s-maxage, must-revalidate")
        }
        if fields[.setCookie] != nil, !directives.isPublic {
            return .doNotStore(reason: "the response has Set-Cookie and is not public")
        }
        let varyNames = Self.varyFieldNames(in: fields)
        if varyNames.contains("*") {
            return .doNotStore(reason: "Vary: * never matches a later request")
        }

        guard var lifetime = freshnessLifetime(response: response, directives: directives, responseTime: responseTime) else {
            return .doNotStore(reason: "no explicit freshness, and status \(code) is not heuristically cacheable")
        }
        if directives.noCache { lifetime = .zero }
        let hasValidator = fields[.eTag] != nil || fields[.lastModified] != nil
        if lifetime <= .zero, !hasValidator {
            return .doNotStore(reason: "no freshness information: stale on arrival, with no ETag or Last-Modified to revalidate")
        }
        let staleAllowed = !(directives.mustRevalidate || directives.proxyRevalidate || directives.sMaxAge != nil || directives.noCache)
        return .store(StoredResponsePlan(
            lifetime: max(.zero, lifetime),
            varyFieldNames: varyNames,
            tags: Self.tags(in: fields),
            mayServeStale: staleAllowed,
            staleWhileRevalidate: directives.staleWhileRevalidate,
            staleIfError: directives.staleIfError
        ))
    }

    /// The freshness lifetime of `response` for a shared cache (RFC 9111 §4.2.1, §4.2.2), or `nil`
    /// when it has no explicit one and may not be given a heuristic one. See
    /// ``storability(request:response:responseTime:)`` for the order of the sources. Never negative.
    static func freshnessLifetime(response: HTTPResponse, directives: SharedCacheDirectives, responseTime: Date) -> Duration? {
        if let sMaxAge = directives.sMaxAge { return sMaxAge }
        if let maxAge = directives.maxAge { return maxAge }
        let fields = response.headerFields
        let date = fields[.date].flatMap(HTTPDate.date(from:)) ?? responseTime
        if let expires = fields[.expires] {
            guard let expiry = HTTPDate.date(from: expires) else { return .zero }
            return max(.zero, duration(from: date, to: expiry))
        }
        guard heuristicallyCacheableStatusCodes.contains(response.status.code) || directives.isPublic else { return nil }
        guard let lastModified = fields[.lastModified].flatMap(HTTPDate.date(from:)), lastModified <= date else { return .zero }
        return min(duration(from: lastModified, to: date) / 10, maxHeuristicLifetime)
    }

    /// The field names a `Vary` lists (all its field lines), lowercased, deduplicated and sorted;
    /// `*` is kept as a name of its own for the caller to refuse.
    static func varyFieldNames(in fields: HTTPFields) -> [String] {
        let names = fields[values: .vary]
            .flatMap { $0.split(separator: ",") }
            .map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            .filter { !$0.isEmpty }
        return Set(names).sorted()
    }

    /// The purge tags of a response: `Cache-Tag` (comma-separated) then `Surrogate-Key`
    /// (space-separated), trimmed, empties dropped, each once, in the order first seen.
    static func tags(in fields: HTTPFields) -> [String] {
        let cacheTags = fieldLines(named: "cache-tag", in: fields).flatMap { $0.split(separator: ",") }
        let surrogateKeys = fieldLines(named: "surrogate-key", in: fields).flatMap { $0.split(whereSeparator: { $0 == " " || $0 == "\t" }) }
        var seen: Set<String> = []
        var tags: [String] = []
        for candidate in cacheTags + surrogateKeys {
            let tag = candidate.trimmingCharacters(in: .whitespaces)
            if !tag.isEmpty, seen.insert(tag).inserted { tags.append(tag) }
        }
        return tags
    }

    // MARK: Age and freshness (RFC 9111 §4.2)

    /// The age a response already had when it arrived: RFC 9111 §4.2.3's `corrected_initial_age`.
    ///
    /// `apparent_age` is `responseTime` − `Date` (0 when negative, as with a skewed origin clock, and
    /// when there is no valid `Date`); `corrected_age_value` is the `Age` field plus the response
    /// delay (`responseTime` − `requestTime`), counting the time the response spent on the way as
    /// time spent in caches. The result is the larger of the two, never negative. An `Age` that is a
    /// list uses its first member; one that is not delta-seconds is ignored (§5.1).
    ///
    /// `requestTime` is when the request was sent upstream, `responseTime` when the response arrived.
    static func initialAge(response: HTTPResponse, requestTime: Date, responseTime: Date) -> Duration {
        let fields = response.headerFields
        let date = fields[.date].flatMap(HTTPDate.date(from:)) ?? responseTime
        let apparentAge = max(.zero, duration(from: date, to: responseTime))
        let ageValue = fields[values: .age].first
            .flatMap { $0.split(separator: ",", omittingEmptySubsequences: false).first }
            .flatMap { CacheControl.deltaSeconds($0.trimmingCharacters(in: .whitespaces)) }
            .map { Duration.seconds($0) } ?? .zero
        let correctedAgeValue = ageValue + duration(from: requestTime, to: responseTime)
        return max(.zero, apparentAge, correctedAgeValue)
    }

    /// A stored response's `current_age` (RFC 9111 §4.2.3): its initial age plus the time it has
    /// been stored (`resident_time`, `now` − `responseTime`, 0 if the clock went back).
    static func currentAge(initialAge: Duration, responseTime: Date, now: Date) -> Duration {
        initialAge + max(.zero, duration(from: responseTime, to: now))
    }

    /// Whether a stored response of freshness `lifetime` and current `age` may answer a request with
    /// the given directives without contacting the origin.
    ///
    /// Fresh means `lifetime` > `age` (§4.2). The request can ask for more (§5.2.1): `max-age`
    /// rejects an `age` above it, `min-fresh` rejects a response fresh for less than it from now
    /// (`lifetime` − `age` < `min-fresh`), and `no-cache` rejects every stored response
    /// (validate first). `Pragma: no-cache` is not read (§5.4 deprecates it).
    static func isFresh(lifetime: Duration, age: Duration, request: SharedCacheDirectives) -> Bool {
        guard !request.noCache, lifetime > age else { return false }
        if let maxAge = request.maxAge, age > maxAge { return false }
        if let minFresh = request.minFresh, lifetime - age < minFresh { return false }
        return true
    }

    /// Whether a stale stored response may answer a request because the client said it accepts
    /// staleness: a bare `max-stale`, or `max-stale=N` with `age` − `lifetime` ≤ N (RFC 9111
    /// §5.2.1.2). Never when the response forbids serving it stale (`responseAllowsStale`, the
    /// plan's ``StoredResponsePlan/mayServeStale``; §4.2.4) or the request has `no-cache`.
    /// (`stale-if-error` and serving stale while the origin is down are the caller's to decide.)
    static func mayServeStale(lifetime: Duration, age: Duration, responseAllowsStale: Bool, request: SharedCacheDirectives) -> Bool {
        guard responseAllowsStale, !request.noCache else { return false }
        if request.acceptsAnyStaleness { return true }
        guard let maxStale = request.maxStale else { return false }
        return age - lifetime <= maxStale
    }

    // MARK: Vary (RFC 9111 §4.1)

    /// The values of the fields a stored response varies on, as `request` carries them: keys are the
    /// lowercased `names`, values the field lines combined with ", " (with "; " for `Cookie`, RFC 9113
    /// §8.2.3) after trimming each, or `nil` when the request does not have the field. Store this
    /// with the response and compare later requests with ``matchesVary(storedRequestValues:request:)``.
    ///
    /// The values of credentials (`Cookie`, `Authorization`, `Proxy-Authorization`) are kept as
    /// their SHA-256 (`sha256:` and 64 hex digits), never raw: the table and the memory tier hold no
    /// client's secret, and a later request still matches by its own value's digest.
    static func varyValues(names: [String], request: HTTPRequest) -> [String: String?] {
        Dictionary(
            names.map { name in (name.lowercased(), selectingValue(named: name.lowercased(), in: request.headerFields)) },
            uniquingKeysWith: { first, _ in first }
        )
    }

    /// The request fields whose values are credentials: kept hashed for `Vary` matching.
    static let credentialFieldNames: Set<String> = ["cookie", "authorization", "proxy-authorization"]

    /// The targeted fields (RFC 9213) the proxy obeys by default, before `Cache-Control`.
    static let defaultTargetedFields = [HTTPField.Name("CDN-Cache-Control")!]

    /// `response` as the cache judges it (RFC 9213 §2.1): when one of `targets` (in their order)
    /// has a non-empty value, that value stands for `Cache-Control`, and `Expires` is ignored;
    /// otherwise `response` as it is. What the client gets keeps the origin's own fields.
    static func targeted(_ response: HTTPResponse, targets: [HTTPField.Name]) -> HTTPResponse {
        for name in targets {
            let value = response.headerFields[values: name].joined(separator: ", ").trimmingCharacters(in: .whitespaces)
            guard !value.isEmpty else { continue }
            var judged = response
            judged.headerFields[.cacheControl] = value
            judged.headerFields[.expires] = nil
            return judged
        }
        return response
    }

    /// Whether `request` selects a response stored with `storedRequestValues` (from
    /// ``varyValues(names:request:)`` on the request that stored it): every field has the same
    /// combined, trimmed value in both (compared exactly, so `gzip` and `GZIP` differ), and a field
    /// absent from both matches (§4.1).
    static func matchesVary(storedRequestValues: [String: String?], request: HTTPRequest) -> Bool {
        storedRequestValues.allSatisfy { entry in
            selectingValue(named: entry.key.lowercased(), in: request.headerFields) == entry.value
        }
    }

    /// One selecting header value (§4.1): the field lines named `canonicalName`, each trimmed, joined
    /// with ", " ("; " for `Cookie`); `nil` when there are none.
    private static func selectingValue(named canonicalName: String, in fields: HTTPFields) -> String? {
        let lines = fieldLines(named: canonicalName, in: fields)
        guard !lines.isEmpty else { return nil }
        let separator = canonicalName == "cookie" ? "; " : ", "
        let value = lines.map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: separator)
        return credentialFieldNames.contains(canonicalName) ? "sha256:" + SHA256.hexDigest(value) : value
    }

    // MARK: Freshening (RFC 9111 §3.2, §4.3.4)

    /// A stored response's header fields updated by a 304's (RFC 9111 §4.3.4, §3.2): each field the
    /// 304 carries replaces the stored field lines of its name (its `Date` included: the freshened
    /// response's age and `Expires` lifetime are the 304's), hop-by-hop fields and `Content-Length`
    /// excepted. The stored `Age` goes whatever the 304 says: it was the age of the first response,
    /// and the freshened one's age is worked out from the 304 alone (its own `Age`, if any).
    static func freshened(_ stored: HTTPFields, by notModified: HTTPFields) -> HTTPFields {
        let update = HopByHop.removing(from: notModified)
        var fields = stored
        fields[.age] = nil
        for field in update { fields[field.name] = nil }
        for field in update { fields.append(field) }
        return fields
    }

    // MARK: Conditional requests (RFC 9110 §13.1, RFC 9111 §4.3.2)

    /// Whether a client's conditional `GET` or `HEAD` can be answered 304 Not Modified from a stored
    /// response with the given `etag` and `lastModified` field values.
    ///
    /// - `If-None-Match` (RFC 9110 §13.1.2): `*` matches any stored response; otherwise a list of
    ///   entity-tags (commas inside quotes allowed) matches when one of them equals `etag` by weak
    ///   comparison (`W/` ignored on both sides, §8.8.3.2). No stored `etag`: no match.
    /// - `If-Modified-Since` (§13.1.3), only when there is no `If-None-Match` (§13.2.2): not modified
    ///   when `lastModified` is at or before the date. An invalid date, or no stored `lastModified`,
    ///   means no 304 (this cache does not fall back on the stored `Date`, as §4.3.2 would allow).
    ///   A date later than the cache's clock is not checked: there is no clock here.
    /// - Any other method: `false` (RFC 9110 §13.1.2: other methods get 412, the origin's business).
    static func notModified(request: HTTPRequest, etag: String?, lastModified: String?) -> Bool {
        guard request.method == .get || request.method == .head else { return false }
        let fields = request.headerFields
        if let ifNoneMatch = fields[.ifNoneMatch] {
            if ifNoneMatch.trimmingCharacters(in: .whitespaces) == "*" { return true }
            guard let etag else { return false }
            let stored = opaqueTag(etag)
            return entityTags(in: ifNoneMatch).contains { opaqueTag($0) == stored }
        }
        guard let ifModifiedSince = fields[.ifModifiedSince].flatMap(HTTPDate.date(from:)),
              let lastModified = lastModified.flatMap(HTTPDate.date(from:))
        else { return false }
        return lastModified <= ifModifiedSince
    }

    /// The entity-tags of an `If-None-Match` list, as written (`W/` kept). A quoted tag may contain
    /// commas; an unquoted member (not valid, but sent by some clients) is kept as a trimmed token;
    /// an unterminated quoted tag is dropped.
    static func entityTags(in list: String) -> [String] {
        var tags: [String] = []
        var rest = Substring(list)
        while true {
            rest = rest.drop(while: { $0 == " " || $0 == "\t" || $0 == "," })
            guard !rest.isEmpty else { return tags }
            let weakPrefix = rest.hasPrefix("W/") ? "W/" : ""
            let tagStart = rest.dropFirst(weakPrefix.count)
            if tagStart.first == "\"" {
                guard let closing = tagStart.dropFirst().firstIndex(of: "\"") else { return tags }
                tags.append(weakPrefix + String(tagStart[...closing]))
                rest = tagStart[tagStart.index(after: closing)...]
            } else {
                let end = rest.firstIndex(of: ",") ?? rest.endIndex
                tags.append(rest[..<end].trimmingCharacters(in: .whitespaces))
                rest = rest[end...]
            }
        }
    }

    /// An entity-tag without its weakness indicator and surrounding spaces: what weak comparison
    /// (RFC 9110 §8.8.3.2) compares.
    private static func opaqueTag(_ entityTag: String) -> String {
        let trimmed = entityTag.trimmingCharacters(in: .whitespaces)
        return trimmed.hasPrefix("W/") ? String(trimmed.dropFirst(2)) : trimmed
    }

    // MARK: Invalidation (RFC 9111 §4.4)

    /// The stored targets (path with query) an exchange invalidates (RFC 9111 §4.4): for an unsafe
    /// method (anything but GET, HEAD, OPTIONS, TRACE, including methods this cache does not know)
    /// answered with a 2xx or 3xx status, the request's own path, then the targets of `Location` and
    /// `Content-Location`, each resolved against the request's URI (RFC 3986 §5) and kept only when
    /// it has the request's authority: the same host (case-insensitive) and the same port (the
    /// scheme's default when absent), so that a response cannot purge another site's entries.
    /// Each target once, in that order; `[]` for anything else. A request without a path (CONNECT's
    /// authority form) invalidates nothing; one without an authority (swift-http-types carries an
    /// HTTP/1.1 `Host` as `:authority`) only its own path, since the fields' targets cannot be
    /// checked against it.
    static func invalidatedTargets(request: HTTPRequest, response: HTTPResponse) -> [String] {
        guard !safeMethods.contains(request.method), (200..<400).contains(response.status.code),
              let path = request.path
        else { return [] }
        var targets = [path]
        let base = request.authority.flatMap { URL(string: "\(request.scheme ?? "http")://\($0)\(path)") }
        for name in [HTTPField.Name.location, .contentLocation] {
            guard let base, let value = response.headerFields[name],
                  let target = sameAuthorityTarget(value.trimmingCharacters(in: .whitespaces), base: base),
                  !targets.contains(target)
            else { continue }
            targets.append(target)
        }
        return targets
    }

    /// The path with query of `reference` resolved against `base`, when the result has `base`'s host
    /// and port; `nil` otherwise or when either does not parse.
    private static func sameAuthorityTarget(_ reference: String, base: URL) -> String? {
        guard let resolved = URL(string: reference, relativeTo: base)?.absoluteURL,
              let target = URLComponents(url: resolved, resolvingAgainstBaseURL: false),
              let origin = URLComponents(url: base, resolvingAgainstBaseURL: false),
              let host = target.host?.lowercased(), host == origin.host?.lowercased(),
              effectivePort(target) == effectivePort(origin)
        else { return nil }
        let path = target.percentEncodedPath.isEmpty ? "/" : target.percentEncodedPath
        return target.percentEncodedQuery.map { "\(path)?\($0)" } ?? path
    }

    /// The port of a URL, or its scheme's default (443 for https, 80 otherwise).
    private static func effectivePort(_ components: URLComponents) -> Int {
        components.port ?? (components.scheme?.lowercased() == "https" ? 443 : 80)
    }

    // MARK: Helpers

    /// The values of the field lines of `fields` whose lowercased name is `canonicalName`, in order:
    /// for names that need no `HTTPField.Name` (custom ones, and those read from `Vary`).
    private static func fieldLines(named canonicalName: String, in fields: HTTPFields) -> [String] {
        fields.filter { $0.name.canonicalName == canonicalName }.map(\.value)
    }

    /// `end` − `start` as a `Duration` (negative when `end` is earlier).
    private static func duration(from start: Date, to end: Date) -> Duration {
        .seconds(end.timeIntervalSince(start))
    }
}
