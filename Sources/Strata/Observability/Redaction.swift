import Foundation

/// Strata's redaction of secrets in text for logs, spans and errors.
///
/// What it removes (each replaced by `***`):
/// - credentials in URLs (`https://user:pass@host`) and every query value (`?token=…`);
/// - `Authorization`, `Proxy-Authorization`, `Cookie`, `Set-Cookie` and API-key header values (to the
///   end of the line), and bearer tokens;
/// - **URL path segments shaped like a secret**: a JSON Web Token (`eyJ….….…`), a segment with a
///   well-known token prefix (`sk_live_`, `sk_test_`, `pk_live_`, `rk_live_`, `ghp_`, `gho_`, `ghs_`,
///   `github_pat_`, `glpat-`, `xoxb-`, `xoxp-`, `AKIA…`), or a long random-looking one (24 or more
///   URL-safe characters mixing letters and at least two digits, at most one in eight a separator).
///   UUIDs, numeric ids and word slugs are kept: they are identifiers, and logs need them;
/// - JSON Web Tokens anywhere in the text.
///
/// What it cannot promise: a secret that looks like an ordinary word or id (a short path segment, a
/// UUID used as a password-reset token, a secret in a request body or a header it does not know).
/// Keep such secrets out of URLs, or redact them yourself before they reach a loader's description.
public enum Redaction {
    /// `text` with the secrets listed on ``Redaction`` replaced by `***`. Strata's logging, tracing,
    /// tracking and error descriptions pass every message and metadata value through it; use it for
    /// logs of your own.
    public static func redactingSecrets(in text: String) -> String {
        // Each pattern runs only when the text holds what it needs to match (a scheme, a query, a
        // header name, the word "bearer", a JWT's header), so a tier or loader name ("fresh local")
        // costs a scan of its bytes, not a pass of every pattern. (A regex literal is parsed each
        // time the function runs, and `Regex` is not `Sendable`, so it cannot be kept in a `static`.)
        // Every pattern needs one of these bytes (`:` for a scheme or a header, `?`/`&`/`=` for a
        // query or a header, `b` for "bearer", `j` for a JWT's "eyJ"): one pass finds most names
        // ("fresh local", "MemoryStore [max age 1d]") have none, and returns them as they are.
        guard text.utf8.contains(where: { byte in
            // `| 0x20` folds `B` and `J` onto `b` and `j` and keeps `:?&=` as they are (a control byte
            // folded onto one of them only takes the full path, which finds nothing).
            switch byte | 0x20 {
            case UInt8(ascii: ":"), UInt8(ascii: "?"), UInt8(ascii: "&"), UInt8(ascii: "="), UInt8(ascii: "b"), UInt8(ascii: "j"): true
            default: false
            }
        }) else { return text }
        var result = text
        if asciiContainsIgnoringCase(text, "://") {
            result = result.replacing(#/([A-Za-z][A-Za-z0-9+.\-]*://)[^\s/@]+@/#) { match in "\(match.output.1)***@" }
            result = result.replacing(#/[A-Za-z][A-Za-z0-9+.\-]*://[^\s/?#]+(/[^\s?#]*)/#) { match in
                let path = String(match.output.1)
                let redacted = redactingPathTokens(inPath: path)
                return redacted == path ? String(match.output.0) : String(match.output.0.dropLast(path.count)) + redacted
            }
        }
        if text.utf8.contains(where: { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "&") }) {
            result = result.replacing(#/([?&][^\s=&#?]+)=[^\s&#]+/#) { match in "\(match.output.1)=***" }
        }
        if text.utf8.contains(where: { $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: "=") }),
           asciiContainsIgnoringCase(text, "authorization") || asciiContainsIgnoringCase(text, "cookie")
            || asciiContainsIgnoringCase(text, "api-key") {
            result = result.replacing(#/(?i)\b(authorization|proxy-authorization|cookie|set-cookie|x-api-key|api-key)(["']?\s*[:=]\s*)[^\n]+/#) { match in "\(match.output.1)\(match.output.2)***" }
        }
        if asciiContainsIgnoringCase(text, "bearer") {
            result = result.replacing(#/(?i)\bbearer\s+[A-Za-z0-9._~+\/=\-]+/#) { _ in "Bearer ***" }
        }
        if asciiContainsIgnoringCase(text, "eyj") {
            result = result.replacing(#/\beyJ[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]*/#) { _ in "***" }
        }
        return result
    }

    /// Whether `text` contains `needle` (lowercase ASCII), ignoring the case of ASCII letters.
    static func asciiContainsIgnoringCase(_ text: String, _ needle: StaticString) -> Bool {
        let pattern = UnsafeBufferPointer(start: needle.utf8Start, count: needle.utf8CodeUnitCount)
        func search(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
            guard bytes.count >= pattern.count else { return false }
            for start in 0...(bytes.count - pattern.count) {
                var offset = 0
                while offset < pattern.count, bytes[start + offset] | 0x20 == pattern[offset] { offset += 1 }
                if offset == pattern.count { return true }
            }
            return false
        }
        // `| 0x20` lowercases ASCII letters and leaves `-`, `:` and `/` as they are; another byte it
        // maps onto a needle's byte only makes a pattern run that finds nothing.
        if let found = text.utf8.withContiguousStorageIfAvailable(search) { return found }
        return Array(text.utf8).withUnsafeBufferPointer(search)
    }

    /// `url` for messages and logs: user and password removed, each query value and each path segment
    /// shaped like a secret (see ``Redaction``) replaced by `***`.
    public static func redactedString(for url: URL) -> String {
        redactedURLStringImplementation(url)
    }

    /// `path` (the part of a URL after the host) with each segment shaped like a secret replaced.
    static func redactingPathTokens(inPath path: String) -> String {
        guard path.count >= 4 else { return path }
        var changed = false
        let segments = path.split(separator: "/", omittingEmptySubsequences: false).map { segment -> Substring in
            guard looksLikeSecret(segment) else { return segment }
            changed = true
            return "***"
        }
        return changed ? segments.joined(separator: "/") : path
    }

    private static let tokenPrefixes = [
        "sk_live_", "sk_test_", "pk_live_", "rk_live_", "ghp_", "gho_", "ghs_", "ghu_", "github_pat_",
        "glpat-", "xoxb-", "xoxp-", "xoxa-", "xoxs-",
    ]

    /// Whether a path segment is shaped like a secret rather than a name or an id.
    static func looksLikeSecret(_ segment: Substring) -> Bool {
        guard segment.count >= 16 else { return false }
        if segment.hasPrefix("eyJ"), segment.split(separator: ".").count == 3 { return true }
        if tokenPrefixes.contains(where: { segment.hasPrefix($0) }) { return true }
        if segment.count == 20, segment.hasPrefix("AKIA"), segment.allSatisfy({ $0.isASCII && ($0.isUppercase || $0.isNumber) }) {
            return true
        }
        guard segment.count >= 24 else { return false }
        if isUUID(segment) { return false }
        var letters = 0, digits = 0, separators = 0
        for character in segment.utf8 {
            switch character {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"): letters += 1
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digits += 1
            case UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "~"): separators += 1
            default: return false
            }
        }
        // A slug (`how-to-cache-feeds-offline-2026`) is words between separators; a numeric id has no
        // letters; a random token mixes letters and digits with few separators.
        return letters > 0 && digits >= 2 && separators * 8 <= segment.count
    }

    private static func isUUID(_ segment: Substring) -> Bool {
        segment.count == 36 && UUID(uuidString: String(segment)) != nil
    }
}
