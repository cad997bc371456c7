#if DEBUG  // `@testable` needs a build with testing enabled; the fuzz build is a debug build.
import Foundation
import HTTPTypes
@testable import Strata
@testable import StrataProxy

/// The parsers of header fields an origin or a client sends: `Cache-Control` (the library's and the
/// proxy's), HTTP dates, entity-tag lists, `Vary`, and the targeted fields of RFC 9213.
enum HeaderTargets {
    static let all: [FuzzTarget] = [
        FuzzTarget(
            name: "cache-control", seeds: Seeds.cacheControl,
            summary: "Cache-Control directives (CacheControl and the proxy's SharedCacheDirectives): a field value printed back from its directives parses to the same directives",
            run: cacheControl),
        FuzzTarget(
            name: "http-date", seeds: Seeds.httpDate,
            summary: "HTTP dates in the three forms: a parsed date printed as IMF-fixdate parses back to the same instant; every instant prints and parses back",
            run: httpDate),
        FuzzTarget(
            name: "entity-tags", seeds: Seeds.entityTags,
            summary: "If-None-Match entity-tag lists and Vary field names: a list printed back from its tags parses to the same tags, and each listed tag matches",
            run: entityTags),
        FuzzTarget(
            name: "targeted-fields", seeds: Seeds.targetedFields,
            summary: "RFC 9213 targeted fields (CDN-Cache-Control and the like) and the storability of a response: a targeted value stands for Cache-Control, a lifetime is never negative",
            run: targetedFields),
    ]

    /// Visible ASCII, space and tab: what a field value is made of (RFC 9110 §5.5, without obs-text).
    /// The round-trip properties are checked on such values; any other bytes must only not crash.
    static func isFieldValue(_ text: String) -> Bool {
        text.utf8.allSatisfy { $0 == 0x09 || (0x20...0x7E).contains($0) }
    }

    /// A `token` (RFC 9110 §5.6.2).
    static func isToken(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                return true
            default:
                return "!#$%&'*+-.^_`|~".utf8.contains(byte)
            }
        }
    }

    /// `directives` printed as a field value, each value as a quoted string.
    static func printed(_ directives: [(name: String, value: String?)]) -> String {
        directives.map { directive in
            guard let value = directive.value else { return directive.name }
            let escaped = value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            return "\(directive.name)=\"\(escaped)\""
        }.joined(separator: ", ")
    }

    static func cacheControl(_ bytes: [UInt8]) throws(PropertyViolation) {
        let text = String(decoding: bytes, as: UTF8.self)
        let directives = CacheControl.directives(in: text)
        let parsed = CacheControl(parsing: text)
        let shared = SharedCacheDirectives(parsing: text)
        for directive in directives {
            try check(!directive.name.isEmpty, "an empty directive name from \(text.debugDescription)")
            try check(directive.name == directive.name.lowercased(), "a directive name not lowercased: \(directive.name.debugDescription)")
        }
        if let maxAge = parsed.maxAge {
            try check(maxAge >= .zero && maxAge <= .seconds(CacheControl.maxDeltaSeconds), "max-age out of range: \(maxAge)")
        }
        for lifetime in [shared.maxAge, shared.sMaxAge, shared.staleIfError, shared.staleWhileRevalidate, shared.maxStale, shared.minFresh] {
            if let lifetime { try check(lifetime >= .zero, "a negative delta-seconds: \(lifetime)") }
        }
        guard isFieldValue(text), directives.allSatisfy({ isToken($0.name) }) else { return }
        let again = printed(directives)
        let reparsed = CacheControl.directives(in: again)
        try check(
            reparsed.map(\.name) == directives.map(\.name) && reparsed.map(\.value) == directives.map(\.value),
            "\(text.debugDescription) printed as \(again.debugDescription) parses to other directives")
        try check(CacheControl(parsing: again) == parsed, "CacheControl differs after printing \(text.debugDescription)")
        try check(SharedCacheDirectives(parsing: again) == shared, "SharedCacheDirectives differ after printing \(text.debugDescription)")

        // delta-seconds: digits only, capped, exact below the cap.
        let token = directives.first?.value ?? text
        if let seconds = CacheControl.deltaSeconds(token) {
            try check(token.utf8.allSatisfy { (0x30...0x39).contains($0) }, "delta-seconds accepted \(token.debugDescription)")
            try check((0...CacheControl.maxDeltaSeconds).contains(seconds), "delta-seconds out of range: \(seconds)")
            if let exact = Int64(token), exact < CacheControl.maxDeltaSeconds {
                try check(seconds == exact, "delta-seconds \(token) read as \(seconds)")
            }
        }
    }

    static func httpDate(_ bytes: [UInt8]) throws(PropertyViolation) {
        var reader = FuzzReader(bytes)
        // Any instant from year 1 to 9999 prints and parses back (whole seconds).
        let instant = Int64(bitPattern: reader.uint64()) % 253_402_300_800
        let seconds = instant < -62_135_596_800 ? instant + 253_402_300_800 : instant
        let date = Date(timeIntervalSince1970: TimeInterval(seconds))
        let printed = HTTPDate.format(date)
        try check(printed.utf8.count == 29 && printed.hasSuffix(" GMT"), "\(seconds) printed as \(printed.debugDescription)")
        try check(HTTPDate.date(from: printed) == date, "\(printed) does not parse back to \(seconds)")

        // Any text: a date it names prints as IMF-fixdate and parses back to the same instant.
        let now = Date(timeIntervalSince1970: TimeInterval(reader.int(in: 0...65_535) * 86_400))
        let text = String(decoding: reader.rest(), as: UTF8.self)
        guard let parsed = HTTPDate.date(from: text, now: now) else { return }
        try check(parsed.timeIntervalSince1970.rounded(.down) == parsed.timeIntervalSince1970, "\(text.debugDescription) parsed to a fraction of a second")
        let again = HTTPDate.format(parsed)
        try check(HTTPDate.date(from: again, now: now) == parsed, "\(text.debugDescription) printed as \(again) parses to another instant")
        try check(HTTPDate.format(HTTPDate.date(from: again, now: now) ?? parsed) == again, "printing \(again) is not stable")
    }

    static func entityTags(_ bytes: [UInt8]) throws(PropertyViolation) {
        let text = String(decoding: bytes, as: UTF8.self)
        let tags = SharedCachePolicy.entityTags(in: text)
        var fields = HTTPFields()
        fields.append(HTTPField(name: .vary, value: text))
        let names = SharedCachePolicy.varyFieldNames(in: fields)
        try check(names == Array(Set(names)).sorted(), "Vary names neither sorted nor unique: \(names)")
        try check(names.allSatisfy { !$0.isEmpty && $0 == $0.lowercased() }, "a Vary name empty or not lowercased: \(names)")
        guard isFieldValue(text) else { return }
        for tag in tags {
            try check(!tag.isEmpty, "an empty entity-tag from \(text.debugDescription)")
            let opaque = tag.hasPrefix("W/") ? tag.dropFirst(2) : Substring(tag)
            if opaque.first == "\"" {
                try check(opaque.count >= 2 && opaque.last == "\"" && !opaque.dropFirst().dropLast().contains("\""), "a malformed quoted entity-tag \(tag.debugDescription)")
            }
            var request = HTTPRequest(method: .get, scheme: "http", authority: "example.test", path: "/")
            request.headerFields[.ifNoneMatch] = text
            try check(
                SharedCachePolicy.notModified(request: request, etag: tag, lastModified: nil),
                "If-None-Match \(text.debugDescription) lists \(tag.debugDescription) yet does not match it")
        }
        let again = tags.joined(separator: ", ")
        try check(SharedCachePolicy.entityTags(in: again) == tags, "\(text.debugDescription) printed as \(again.debugDescription) lists other tags")
    }

    static func targetedFields(_ bytes: [UInt8]) throws(PropertyViolation) {
        var reader = FuzzReader(bytes)
        let names: [HTTPField.Name] = [HTTPField.Name("CDN-Cache-Control")!, HTTPField.Name("Strata-Cache-Control")!]
        var response = HTTPResponse(status: .init(code: reader.pick([200, 203, 204, 206, 301, 304, 404, 410, 500, 503])))
        let targeted = reader.string(maxCount: 80)
        response.headerFields.append(HTTPField(name: names[0], value: targeted))
        response.headerFields.append(HTTPField(name: .cacheControl, value: reader.string(maxCount: 80)))
        if reader.bool() { response.headerFields.append(HTTPField(name: .expires, value: reader.string(maxCount: 40))) }
        if reader.bool() { response.headerFields.append(HTTPField(name: .vary, value: reader.string(maxCount: 40))) }
        if reader.bool() { response.headerFields.append(HTTPField(name: .age, value: reader.string(maxCount: 12))) }
        let date = Date(timeIntervalSince1970: 1_700_000_000)
        response.headerFields.append(HTTPField(name: .date, value: HTTPDate.format(date)))

        let judged = SharedCachePolicy.targeted(response, targets: names)
        let stored = response.headerFields[values: names[0]].joined(separator: ", ").trimmingCharacters(in: .whitespaces)
        if stored.isEmpty {
            try check(judged == response, "a response without a targeted value was changed")
        } else {
            try check(judged.headerFields[.cacheControl] == stored, "the targeted value \(stored.debugDescription) does not stand for Cache-Control")
            try check(judged.headerFields[.expires] == nil, "Expires kept beside a targeted field")
        }
        var request = HTTPRequest(method: reader.pick([.get, .head, .post]), scheme: "http", authority: "example.test", path: "/")
        request.headerFields[.cacheControl] = reader.string(maxCount: 40)
        if reader.bool() { request.headerFields[.authorization] = "Basic x" }
        let storability = SharedCachePolicy.storability(request: request, response: judged, responseTime: date)
        if case .store(let plan) = storability {
            try check(plan.lifetime >= .zero, "a negative freshness lifetime: \(plan.lifetime)")
        }
        let age = SharedCachePolicy.initialAge(response: judged, requestTime: date, responseTime: date)
        try check(age >= .zero, "a negative age: \(age)")
    }
}
#else
enum HeaderTargets {
    static let all: [FuzzTarget] = []
}
#endif
