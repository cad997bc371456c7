import Foundation

/// Strata's redaction of secrets in text for logs, spans and errors.
///
/// What it removes (each replaced by `***`, every other byte kept as it was):
/// - **In a URL** (`scheme://…`, or `scheme:\/\/…` with the slashes escaped as in JSON): the user and
///   password, everything before the last `@` ahead of the path and the query (`https://***@host`);
///   every query value (`?token=***&page=***`), and every fragment
///   value (`#access_token=***`); each value of a path segment's parameters (`/app;jsessionid=***`);
///   and each **path segment shaped like a secret**: a JSON Web Token (`eyJ…` with a `.`), a segment
///   with a well-known token prefix (`sk_live_`, `sk_test_`, `pk_live_`, `rk_live_`, `ghp_`, `gho_`,
///   `ghs_`, `ghu_`, `github_pat_`, `glpat-`, `xox?-`), an AWS key id (`AKIA`/`ASIA` and 16 capitals
///   or digits), or a long random-looking one (24 or more URL-safe characters mixing letters and at
///   least two digits, at most one in eight a separator). A segment is judged without the punctuation
///   around it (`/sk_live_…).` keeps its `).`). UUIDs, numeric ids and word slugs are kept: they are
///   identifiers, and logs need them.
/// - **A query value outside a URL** (`GET /feed?token=***`, `&api_key=***`).
/// - **The value of a member or field named like a secret**, in `name=value`, `name: value`,
///   `"name": "value"`, `'name': 'value'` and `\"name\":\"value\"` shapes — a name that, lowercased
///   and without `_`, `-` and `.`, contains `password`, `passwd`, `passphrase`, `secret`, `token`,
///   `apikey`, `accesskey`, `privatekey`, `authorization`, `cookie`, `credential`, `sessionid`,
///   `sessid` or `signature`, or is `auth` or `pwd`: `auth_token`, `x-api-key`,
///   `clientSecret`, `refresh_token`, `Set-Cookie`. A quoted value is redacted to its closing quote (or
///   the end of the line, unclosed); a `{…}` or `[…]` value to its closing bracket (`{***}`); an
///   unquoted one to the first space, quote, `,`, `;`, `&` or unbalanced closing bracket (a sentence's
///   final `.`, `:`, `!` or `?` kept; a string inside its own brackets, `Optional("…")`, is part of
///   it) — except for
///   `Authorization` and `Cookie` names (header dumps: `Authorization: Bearer …`), whose unquoted value
///   runs to the end of the line (or of the quoted string the line is in). A number, `true`, `false`
///   or `null` is kept (`tokens_used: 5`, `"password_set": true`): counts and flags, not secrets.
/// - **Bearer tokens** (`Bearer ***`) and **JSON Web Tokens** anywhere in the text.
///
/// Where a URL ends, in running text: at a space, a control character, a non-ASCII character, `"`,
/// `'`, `<`, `>`, a backtick, a `\` not escaping a `/`, or a `)`, `]` or `}` it did not open; a trailing
/// `.`, `,`, `;`, `:`, `!` or `?` is the sentence's, not the URL's. A query value ends there too, and
/// at `&` or `#`.
///
/// What it cannot promise: a secret that looks like an ordinary word or id (a short path segment, a
/// UUID used as a password-reset token), a secret-shaped token that is not in a URL, after a name it
/// knows or after `Bearer` (`sk_live_…` alone in a sentence; ``redactingSecrets(inPath:)`` judges every
/// segment of a scope or a key), a bare number after a secret's name (`password: 1234`), a secret
/// under a name it does not know (`session`, `key`), in a header it does not know, or split by a line
/// break. A URL that holds a space or a non-ASCII character is cut there, and what follows is judged
/// as text. The other way, an ordinary word after a name that contains a secret's (`token: expired`,
/// `tokenizer: bpe`) is redacted, and so is the rest of a header-dump line (`Authorization: Bearer x
/// sent` reads `Authorization: ***`). Keep such secrets out of URLs, or redact them yourself before
/// they reach a loader's description.
public enum Redaction {
    /// `text` with the secrets listed on ``Redaction`` replaced by `***`, and every other byte kept.
    /// Strata's logging, tracing, tracking and error descriptions pass every message and metadata
    /// value through it; use it for logs of your own. Redacting twice gives what redacting once did.
    public static func redactingSecrets(in text: String) -> String {
        // Every shape needs one of these bytes (`:` for a scheme, a header or a `name: value`, `?`/`&`
        // for a query, `=` for a `name=value`, `b` for "bearer", `j` for a JWT's "eyJ"): one pass finds
        // most names ("fresh local", "MemoryStore [max age 1d]") have none, and returns them as they
        // are, without a copy.
        guard text.utf8.contains(where: { byte in
            // `| 0x20` folds `B` and `J` onto `b` and `j` and keeps `:?&=` as they are (a control byte
            // folded onto one of them only takes the full path, which finds nothing).
            switch byte | 0x20 {
            case UInt8(ascii: ":"), UInt8(ascii: "?"), UInt8(ascii: "&"), UInt8(ascii: "="), UInt8(ascii: "b"), UInt8(ascii: "j"): true
            default: false
            }
        }) else { return text }
        return rewriting(text) { scanner in scanner.scanText() }
    }

    /// `path` — a URL's path, an outbox scope, a key made of segments — with everything
    /// ``redactingSecrets(in:)`` removes, then each segment shaped like a secret (see ``Redaction``)
    /// replaced by `***`. A segment here is a run of letters, digits, `.`, `_`, `~` and `-` between any
    /// other characters (`/`, `:`, `|`, spaces…), so `user/<token>` and `tenant:<token>` lose the token.
    ///
    /// Both passes are repeated until neither changes anything (at most four rounds), so redacting
    /// twice gives what redacting once did: each pass can reshape what the other sees (a token the text
    /// pass removes from the middle of a segment leaves the rest as segments of their own; a segment
    /// replaced after a `\` takes the escape's letter with it, and the value before it then runs on).
    public static func redactingSecrets(inPath path: String) -> String {
        var current = path
        for _ in 0..<4 {
            let next = rewriting(redactingSecrets(in: current)) { scanner in scanner.scanSegments(separatedBy: { !isTokenByte($0) }) }
            if next == current { return current }
            current = next
        }
        return current
    }

    /// `url` for messages and logs: user and password removed, each query value and each path segment
    /// shaped like a secret (see ``Redaction``) replaced by `***`.
    public static func redactedString(for url: URL) -> String {
        redactedURLStringImplementation(url)
    }

    /// `path` (the part of a URL after the host) with each segment shaped like a secret, and each value
    /// of a segment's `;name=value` parameters, replaced.
    static func redactingPathTokens(inPath path: String) -> String {
        guard path.utf8.count >= 4 else { return path }
        return rewriting(path) { scanner in scanner.scanSegments(separatedBy: { $0 == UInt8(ascii: "/") }) }
    }

    /// `text` as `scan` rewrites it, or `text` itself when it changed nothing.
    private static func rewriting(_ text: String, _ scan: (inout RedactionScanner) -> Void) -> String {
        func run(_ bytes: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
            var scanner = RedactionScanner(bytes)
            scan(&scanner)
            return scanner.finished()
        }
        let rewritten = text.utf8.withContiguousStorageIfAvailable(run) ?? Array(text.utf8).withUnsafeBufferPointer(run)
        // Replacements start and end at ASCII bytes, so the bytes are still UTF-8.
        return rewritten.map { String(decoding: $0, as: UTF8.self) } ?? text
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

    // MARK: - Names

    /// What a secret's name contains, lowercased and without `_`, `-`, `.` or other punctuation.
    private static let secretNameParts: [StaticString] = [
        "password", "passwd", "passphrase", "secret", "token", "apikey", "accesskey", "privatekey",
        "authorization", "cookie", "credential", "sessionid", "sessid", "signature",
    ]

    /// Secrets' names too short to look for inside longer names (`author` and `pwdChanged` are not).
    private static let secretNames: [StaticString] = ["auth", "pwd"]

    /// The names of headers whose value runs to the end of the line (`Bearer x`, `a=1; b=2`).
    private static let headerNameParts: [StaticString] = ["authorization", "cookie"]

    /// Whether a member, field, header or parameter named `name` holds a secret: lowercased and without
    /// `_`, `-`, `.` or other punctuation, it contains `password`, `passwd`, `passphrase`, `secret`,
    /// `token`, `apikey`, `accesskey`, `privatekey`, `authorization`, `cookie`, `credential`,
    /// `sessionid`, `sessid` or `signature`, or it is `auth` or `pwd`. So `auth_token`, `x-api-key`,
    /// `secretKey`, `credentials`, `clientSecret`, `refresh_token`, `Set-Cookie`, `X-Amz-Signature`
    /// are; `name`, `key`, `session`, `author` are not. Matches are by substring, so `tokenCount` and
    /// `tokenizer` are too (their numbers are kept: see ``Redaction``).
    package static func isSecretName(_ name: some StringProtocol) -> Bool {
        var name = String(name)
        return name.withUTF8 { isSecretName($0[...]) }
    }

    fileprivate static func isSecretName(_ name: Slice<UnsafeBufferPointer<UInt8>>) -> Bool {
        withFolded(name) { folded in
            secretNames.contains { folded.elementsEqual(bytes(of: $0)) } || secretNameParts.contains { contains(folded, bytes(of: $0)) }
        }
    }

    /// Whether a secret's value is a header's, which runs to the end of the line.
    fileprivate static func isHeaderName(_ name: Slice<UnsafeBufferPointer<UInt8>>) -> Bool {
        withFolded(name) { folded in headerNameParts.contains { contains(folded, bytes(of: $0)) } }
    }

    /// `body` given `name` with its ASCII letters lowercased, its digits, and nothing else (in a
    /// buffer on the stack: a name is not copied to the heap).
    private static func withFolded<Result>(_ name: Slice<UnsafeBufferPointer<UInt8>>, _ body: (UnsafeBufferPointer<UInt8>) -> Result) -> Result {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: max(name.count, 1)) { buffer in
            var count = 0
            for byte in name {
                switch byte {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"): buffer[count] = byte | 0x20
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"): buffer[count] = byte
                default: continue
                }
                count += 1
            }
            return body(UnsafeBufferPointer(rebasing: buffer[..<count]))
        }
    }

    private static func bytes(of literal: StaticString) -> UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount)
    }

    private static func contains(_ haystack: UnsafeBufferPointer<UInt8>, _ needle: UnsafeBufferPointer<UInt8>) -> Bool {
        guard haystack.count >= needle.count else { return false }
        for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
            var offset = 1
            while offset < needle.count, haystack[start + offset] == needle[offset] { offset += 1 }
            if offset == needle.count { return true }
        }
        return false
    }

    // MARK: - Path segments

    private static let tokenPrefixes: [[UInt8]] = [
        "sk_live_", "sk_test_", "pk_live_", "rk_live_", "ghp_", "gho_", "ghs_", "ghu_", "github_pat_",
        "glpat-", "xoxb-", "xoxp-", "xoxa-", "xoxs-",
    ].map { Array($0.utf8) }

    /// Whether a path segment is shaped like a secret rather than a name or an id.
    static func looksLikeSecret(_ segment: Substring) -> Bool {
        var segment = String(segment)
        return segment.withUTF8 { looksLikeSecret($0[...]) }
    }

    /// Whether a path segment (without the punctuation around it) is shaped like a secret.
    fileprivate static func looksLikeSecret(_ segment: Slice<UnsafeBufferPointer<UInt8>>) -> Bool {
        // Only letters, digits, `-`, `_`, `.` and `~`: what tokens are made of.
        guard segment.count >= 16, segment.allSatisfy(isTokenByte) else { return false }
        if segment.starts(with: "eyJ".utf8), segment.contains(UInt8(ascii: ".")) { return true }
        if tokenPrefixes.contains(where: { segment.starts(with: $0) }) { return true }
        if segment.count == 20, segment.starts(with: "AKIA".utf8) || segment.starts(with: "ASIA".utf8),
           segment.allSatisfy({ (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) {
            return true
        }
        guard segment.count >= 24 else { return false }
        if isUUID(segment) { return false }
        var letters = 0, digits = 0, separators = 0
        for byte in segment {
            switch byte {
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

    private static func isUUID(_ segment: Slice<UnsafeBufferPointer<UInt8>>) -> Bool {
        guard segment.count == 36 else { return false }
        for (offset, byte) in segment.enumerated() {
            if offset == 8 || offset == 13 || offset == 18 || offset == 23 {
                guard byte == UInt8(ascii: "-") else { return false }
            } else {
                guard isHexDigit(byte) else { return false }
            }
        }
        return true
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"), UInt8(ascii: "A")...UInt8(ascii: "F"): true
        default: false
        }
    }

    /// Letters, digits, `_`, `-`, `~` and `.`: what a token is made of.
    fileprivate static func isTokenByte(_ byte: UInt8) -> Bool {
        isWordByte(byte) || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "~") || byte == UInt8(ascii: ".")
    }

    /// Letters, digits and `_`.
    fileprivate static func isWordByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"): true
        default: false
        }
    }
}

/// One left-to-right pass over a text's UTF-8 bytes that finds the shapes ``Redaction`` lists. It
/// copies the text into `output` only from the first replacement on; until then nothing is allocated.
private struct RedactionScanner {
    let bytes: UnsafeBufferPointer<UInt8>
    var output: [UInt8] = []
    /// The bytes before this index are in `output`, or were replaced.
    var copied = 0
    var changed = false
    /// No JSON Web Token starts before this index: a scan that failed ran to the end of its first
    /// part's run, and every later start inside that run would fail the same way (without this, a
    /// long run of `eyJ-eyJ-…` costs a scan to its end at each `e`: quadratic).
    var noTokenBefore = 0

    init(_ bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    var count: Int { bytes.count }

    /// The rewritten bytes, or `nil` when nothing was replaced.
    mutating func finished() -> [UInt8]? {
        guard changed else { return nil }
        output.append(contentsOf: bytes[copied...])
        return output
    }

    func byte(_ index: Int) -> UInt8? { index < count ? bytes[index] : nil }

    func matches(_ index: Int, _ literal: StaticString) -> Bool {
        let needle = UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount)
        guard index + needle.count <= count else { return false }
        return bytes[index..<(index + needle.count)].elementsEqual(needle)
    }

    /// Whether the bytes at `index` are `literal` (lowercase ASCII letters), in any case.
    func matchesIgnoringCase(_ index: Int, _ literal: StaticString) -> Bool {
        let needle = UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount)
        guard index + needle.count <= count else { return false }
        return bytes[index..<(index + needle.count)].elementsEqual(needle) { $0 | 0x20 == $1 }
    }

    /// Replaces `range` (after everything replaced so far) with `replacement`; a range that already
    /// reads `replacement` is left alone, so a redacted text comes back unchanged.
    mutating func replace(_ range: Range<Int>, with replacement: StaticString = "***") {
        // (Every pass replaces left to right; the clamp only keeps a slip from copying bytes twice.)
        let range = max(range.lowerBound, copied)..<max(range.upperBound, copied)
        guard !range.isEmpty else { return }
        let new = UnsafeBufferPointer(start: replacement.utf8Start, count: replacement.utf8CodeUnitCount)
        if bytes[range].elementsEqual(new) { return }
        if !changed {
            changed = true
            output.reserveCapacity(count + 16)
        }
        output.append(contentsOf: bytes[copied..<range.lowerBound])
        output.append(contentsOf: new)
        copied = range.upperBound
    }

    // MARK: Classes of bytes

    static func isLetter(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte | 0x20)
    }

    /// What a member's or a field's name is made of: letters, digits, `_`, `-` and `.`.
    static func isNameByte(_ byte: UInt8) -> Bool {
        Redaction.isWordByte(byte) || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
    }

    static func isSchemeByte(_ byte: UInt8) -> Bool {
        Redaction.isWordByte(byte) && byte != UInt8(ascii: "_") || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "-")
            || byte == UInt8(ascii: ".")
    }

    static func isQueryNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "~"), UInt8(ascii: "%"), UInt8(ascii: "+"),
             UInt8(ascii: "["), UInt8(ascii: "]"):
            true
        default: Redaction.isWordByte(byte)
        }
    }

    static func isSpace(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }

    static func isLineBreak(_ byte: UInt8) -> Bool { byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r") }

    /// A sentence's punctuation after a URL or a value: `.`, `,`, `;`, `:`, `!`, `?`.
    static func isTrailingPunctuation(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "."), UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: ":"), UInt8(ascii: "!"), UInt8(ascii: "?"): true
        default: false
        }
    }

    // MARK: The passes

    /// Finds every shape ``Redaction`` lists in the text.
    mutating func scanText() {
        var index = 0
        while index < count {
            index = step(at: index) ?? index + 1
        }
    }

    /// Judges each run of bytes between separators as a path segment.
    mutating func scanSegments(separatedBy isSeparator: (UInt8) -> Bool) {
        var start = 0
        for index in 0...count where index == count || isSeparator(bytes[index]) {
            redactSegment(start..<index)
            start = index + 1
        }
    }

    /// The shape that starts at `index`, redacted; the index after it, or `nil` when none starts there.
    mutating func step(at index: Int) -> Int? {
        let byte = bytes[index]
        switch byte {
        case UInt8(ascii: "?"), UInt8(ascii: "&"):
            return queryPair(at: index)
        case UInt8(ascii: "\""), UInt8(ascii: "'"):
            return quotedName(at: index, quoteLength: 1)
        case UInt8(ascii: "\\"):
            return self.byte(index + 1) == UInt8(ascii: "\"") ? quotedName(at: index, quoteLength: 2) : nil
        default:
            let previous = index > 0 ? bytes[index - 1] : UInt8(ascii: " ")
            guard Self.isNameByte(byte), !Self.isNameByte(previous) else {
                // A JWT may follow a `-` or a `.` (a name's byte, not a word's).
                if byte == UInt8(ascii: "e"), !Redaction.isWordByte(previous) { return jsonWebToken(at: index) }
                return nil
            }
            if Self.isLetter(byte), let end = url(at: index) { return end }
            if let end = namedValue(at: index) { return end }
            if byte | 0x20 == UInt8(ascii: "b"), let end = bearer(at: index) { return end }
            if byte == UInt8(ascii: "e"), let end = jsonWebToken(at: index) { return end }
            return nil
        }
    }

    /// Where a URL (or a query value, with `pairs`) that starts at `start` ends in running text.
    func urlEnd(from start: Int, pairs: Bool) -> Int {
        var end = start
        var nesting = BracketNesting()
        scan: while end < count {
            switch bytes[end] {
            case 0...0x20, 0x7F...0xFF, UInt8(ascii: "\""), UInt8(ascii: "'"), UInt8(ascii: "<"), UInt8(ascii: ">"), UInt8(ascii: "`"):
                break scan
            case UInt8(ascii: "\\"):
                // `\/` is a JSON string's `/`; any other escape ends the URL (`\"`, `\n`).
                guard byte(end + 1) == UInt8(ascii: "/") else { break scan }
                end += 1
            case UInt8(ascii: "("), UInt8(ascii: "["), UInt8(ascii: "{"), UInt8(ascii: ")"), UInt8(ascii: "]"), UInt8(ascii: "}"):
                guard nesting.admits(bytes[end]) else { break scan }
            case UInt8(ascii: "&"), UInt8(ascii: "#"):
                if pairs { break scan }
            default:
                break
            }
            end += 1
        }
        while end > start, Self.isTrailingPunctuation(bytes[end - 1]) { end -= 1 }
        return end
    }

    /// A URL that starts at `start` (its scheme), redacted: its user and password, its query and
    /// fragment values, its path segments' parameters and the segments shaped like a secret.
    mutating func url(at start: Int) -> Int? {
        var index = start
        // A scheme is short: the scan stops after 32 bytes, so a long run of scheme bytes (`b+b+…`,
        // where a name starts after each `+`) is not scanned to its end at every start (quadratic).
        while index < count, index - start < 32, Self.isSchemeByte(bytes[index]) { index += 1 }
        guard byte(index) == UInt8(ascii: ":") else { return nil }
        let authority: Int
        if matches(index, "://") {
            authority = index + 3
        } else if matches(index, #":\/\/"#) {
            authority = index + 5
        } else {
            return nil
        }
        // User and password: up to the last `@` before the path. (A password may hold `?`, `#`, `)` or
        // `,`, so this looks past where the URL would end; but a `?` or `#` then `=` is a query, whose
        // `@` is a value's: `?email=a@b`.)
        var at: Int?
        var query = false
        index = authority
        scan: while index < count {
            switch bytes[index] {
            case 0...0x20, 0x7F...0xFF, UInt8(ascii: "/"), UInt8(ascii: "\\"), UInt8(ascii: "\""), UInt8(ascii: "'"),
                 UInt8(ascii: "<"), UInt8(ascii: ">"), UInt8(ascii: "`"):
                break scan
            case UInt8(ascii: "?"), UInt8(ascii: "#"): query = true
            case UInt8(ascii: "="):
                if query {
                    at = nil
                    break scan
                }
            case UInt8(ascii: "@"): at = index
            default: break
            }
            index += 1
        }
        var host = authority
        if let at {
            replace(authority..<at)
            host = at + 1
        }
        let end = urlEnd(from: host, pairs: false)
        // The host, then the path's segments.
        index = host
        while index < end, !isPathSeparator(at: index), bytes[index] != UInt8(ascii: "?"), bytes[index] != UInt8(ascii: "#") {
            index += 1
        }
        while index < end, isPathSeparator(at: index) {
            index += bytes[index] == UInt8(ascii: "\\") ? 2 : 1
            let segment = index
            while index < end, !isPathSeparator(at: index), bytes[index] != UInt8(ascii: "?"), bytes[index] != UInt8(ascii: "#") {
                index += 1
            }
            redactSegment(segment..<index)
        }
        if index < end, bytes[index] == UInt8(ascii: "?") {
            let query = index + 1
            index = query
            while index < end, bytes[index] != UInt8(ascii: "#") { index += 1 }
            redactPairs(query..<index, separator: UInt8(ascii: "&"))
        }
        if index < end, bytes[index] == UInt8(ascii: "#") {
            let fragment = (index + 1)..<end
            if bytes[fragment].contains(UInt8(ascii: "=")) {
                redactPairs(fragment, separator: UInt8(ascii: "&"))
            } else {
                redactSegment(fragment)
            }
        }
        return end
    }

    func isPathSeparator(at index: Int) -> Bool {
        bytes[index] == UInt8(ascii: "/") || bytes[index] == UInt8(ascii: "\\") && byte(index + 1) == UInt8(ascii: "/")
    }

    /// Each value of the `name=value` pairs in `range`, separated by `separator`, replaced. A value
    /// ends at a `)`, `]` or `}` it did not open (which the URL around it did).
    mutating func redactPairs(_ range: Range<Int>, separator: UInt8) {
        var index = range.lowerBound
        while index < range.upperBound {
            var pairEnd = index
            while pairEnd < range.upperBound, bytes[pairEnd] != separator { pairEnd += 1 }
            if let equals = bytes[index..<pairEnd].firstIndex(of: UInt8(ascii: "=")) {
                var valueEnd = equals + 1
                var depth = 0
                scan: while valueEnd < pairEnd {
                    switch bytes[valueEnd] {
                    case UInt8(ascii: "("), UInt8(ascii: "["), UInt8(ascii: "{"): depth += 1
                    case UInt8(ascii: ")"), UInt8(ascii: "]"), UInt8(ascii: "}"):
                        if depth == 0 { break scan }
                        depth -= 1
                    default: break
                    }
                    valueEnd += 1
                }
                replace((equals + 1)..<valueEnd)
            }
            index = pairEnd + 1
        }
    }

    /// A path segment: replaced when, without the punctuation around it, it is shaped like a secret;
    /// the values of its `;name=value` parameters replaced.
    mutating func redactSegment(_ range: Range<Int>) {
        guard !range.isEmpty else { return }
        let parameters = bytes[range].firstIndex(of: UInt8(ascii: ";"))
        var lower = range.lowerBound, upper = parameters ?? range.upperBound
        while lower < upper, !Redaction.isTokenByte(bytes[lower]) || bytes[lower] == UInt8(ascii: ".") { lower += 1 }
        while upper > lower, !Redaction.isTokenByte(bytes[upper - 1]) || bytes[upper - 1] == UInt8(ascii: ".") { upper -= 1 }
        if Redaction.looksLikeSecret(bytes[lower..<upper]) { replace(lower..<upper) }
        if let parameters { redactPairs((parameters + 1)..<range.upperBound, separator: UInt8(ascii: ";")) }
    }

    /// `?name=value` or `&name=value` outside a URL: the value replaced.
    mutating func queryPair(at start: Int) -> Int? {
        var index = start + 1
        while index < count, Self.isQueryNameByte(bytes[index]) { index += 1 }
        guard index > start + 1, byte(index) == UInt8(ascii: "=") else { return nil }
        let value = index + 1
        let end = urlEnd(from: value, pairs: true)
        replace(value..<end)
        return end
    }

    /// Where the separator after a name that ends at `nameEnd` is, and where the value after it starts.
    func valueStart(afterName nameEnd: Int) -> Int? {
        var index = nameEnd
        while index < count, Self.isSpace(bytes[index]) { index += 1 }
        guard index < count else { return nil }
        switch bytes[index] {
        case UInt8(ascii: ":"):
            // Not a scheme's `://`, not `::`.
            if matches(index, "://") || matches(index, #":\/"#) || matches(index, "::") { return nil }
        case UInt8(ascii: "="):
            if matches(index, "==") { return nil }
        default:
            return nil
        }
        index += 1
        while index < count, Self.isSpace(bytes[index]) { index += 1 }
        return index
    }

    /// `name: value` or `name=value`, with a name that is not quoted.
    mutating func namedValue(at start: Int) -> Int? {
        var nameEnd = start
        while nameEnd < count, Self.isNameByte(bytes[nameEnd]) { nameEnd += 1 }
        guard let value = valueStart(afterName: nameEnd) else { return nil }
        let name = bytes[start..<nameEnd]
        guard Redaction.isSecretName(name) else { return nil }
        // The quoted string the name starts, if any: a header's line in it ends with it.
        var enclosing: (quote: UInt8, escaped: Bool)?
        if start > 0, bytes[start - 1] == UInt8(ascii: "\"") || bytes[start - 1] == UInt8(ascii: "'") {
            enclosing = (bytes[start - 1], start > 1 && bytes[start - 2] == UInt8(ascii: "\\"))
        }
        return redactValue(at: value, header: Redaction.isHeaderName(name), enclosing: enclosing)
    }

    /// `"name": value`, `'name': value` or `\"name\": value` (a JSON string inside a JSON string).
    mutating func quotedName(at start: Int, quoteLength: Int) -> Int? {
        let quote = bytes[start + quoteLength - 1]
        let name = start + quoteLength
        var nameEnd = name
        while nameEnd < count, Self.isNameByte(bytes[nameEnd]) { nameEnd += 1 }
        guard nameEnd > name, nameEnd + quoteLength <= count,
              quoteLength == 1 ? bytes[nameEnd] == quote : bytes[nameEnd] == UInt8(ascii: "\\") && bytes[nameEnd + 1] == quote,
              let value = valueStart(afterName: nameEnd + quoteLength)
        else { return nil }
        let nameBytes = bytes[name..<nameEnd]
        guard Redaction.isSecretName(nameBytes) else { return nil }
        return redactValue(at: value, header: Redaction.isHeaderName(nameBytes), enclosing: nil)
    }

    /// The value of a secret's name that starts at `start`, redacted; the index after it.
    mutating func redactValue(at start: Int, header: Bool, enclosing: (quote: UInt8, escaped: Bool)?) -> Int {
        guard start < count else { return start }
        let first = bytes[start]
        if first == UInt8(ascii: "\"") || first == UInt8(ascii: "'") { return quotedValue(at: start, quoteLength: 1) }
        if first == UInt8(ascii: "\\"), byte(start + 1) == UInt8(ascii: "\"") { return quotedValue(at: start, quoteLength: 2) }
        if header { return headerValue(at: start, enclosing: enclosing) }
        if first == UInt8(ascii: "{") || first == UInt8(ascii: "[") { return containerValue(at: start) }
        if let end = literalEnd(at: start) { return end }
        var end = start
        var nesting = BracketNesting()
        scan: while end < count {
            switch bytes[end] {
            case UInt8(ascii: "\""), UInt8(ascii: "'"):
                // A string in the value's brackets is part of it (`Optional("abc")`); any other quote
                // ends it.
                guard nesting.isOpen else { break scan }
                let quote = bytes[end]
                var closing = end + 1
                while closing < count, bytes[closing] != quote, !Self.isLineBreak(bytes[closing]) {
                    closing += bytes[closing] == UInt8(ascii: "\\") ? 2 : 1
                }
                guard closing < count, bytes[closing] == quote else { break scan }
                end = closing
            case 0...0x20, 0x7F, UInt8(ascii: "<"), UInt8(ascii: ">"), UInt8(ascii: "`"),
                 UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "&"):
                break scan
            case UInt8(ascii: "\\"):
                guard byte(end + 1) == UInt8(ascii: "/") else { break scan }
                end += 1
            case UInt8(ascii: "("), UInt8(ascii: "["), UInt8(ascii: "{"), UInt8(ascii: ")"), UInt8(ascii: "]"), UInt8(ascii: "}"):
                guard nesting.admits(bytes[end]) else { break scan }
            default:
                break
            }
            end += 1
        }
        while end > start, Self.isTrailingPunctuation(bytes[end - 1]) { end -= 1 }
        replace(start..<end)
        return end
    }

    /// The end of a number, `true`, `false` or `null` at `start`, if one is there (kept: a count or a
    /// flag named like a secret, `tokens_used: 5`).
    func literalEnd(at start: Int) -> Int? {
        var end = start
        for word in ["true", "false", "null"] as [StaticString] where matches(start, word) {
            end = start + word.utf8CodeUnitCount
        }
        if end == start {
            if byte(end) == UInt8(ascii: "-") { end += 1 }
            let digits = end
            while let byte = byte(end), (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) { end += 1 }
            guard end > digits else { return nil }
            if byte(end) == UInt8(ascii: "."), let next = byte(end + 1), (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(next) {
                end += 1
                while let byte = byte(end), (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) { end += 1 }
            }
        }
        // Followed by the end of the word, not by more of it (`123abc`, `1.5x`).
        if let next = byte(end) {
            if Redaction.isWordByte(next) || next == UInt8(ascii: "-") { return nil }
            if next == UInt8(ascii: "."), let after = byte(end + 1), Redaction.isWordByte(after) { return nil }
        }
        return end
    }

    /// A quoted value: its content replaced, up to its closing quote (or the end of the line).
    mutating func quotedValue(at start: Int, quoteLength: Int) -> Int {
        let quote = bytes[start + quoteLength - 1]
        let content = start + quoteLength
        var index = content
        // A backslash never escapes a line break: the value ends at the line's end (skipping the
        // break would carry the value over into the next line's name, whose secret would then
        // survive).
        if quoteLength == 1 {
            while index < count, bytes[index] != quote, !Self.isLineBreak(bytes[index]) {
                let escapes = bytes[index] == UInt8(ascii: "\\") && byte(index + 1).map { !Self.isLineBreak($0) } == true
                index += escapes ? 2 : 1
            }
        } else {
            // Inside a JSON string: `\\` is an escaped backslash, `\"` a quote, a bare `"` the end of
            // the outer string. An inner escaped quote (`\\\"`) is not the end.
            var escaped = false
            while index < count, bytes[index] != UInt8(ascii: "\""), !Self.isLineBreak(bytes[index]) {
                if bytes[index] == UInt8(ascii: "\\"), let next = byte(index + 1), !Self.isLineBreak(next) {
                    if next == quote, !escaped { break }
                    escaped = next == UInt8(ascii: "\\") ? !escaped : false
                    index += 2
                } else {
                    escaped = false
                    index += 1
                }
            }
        }
        index = min(index, count)
        replace(content..<index)
        let closed = quoteLength == 1
            ? index < count && bytes[index] == quote
            : index + 1 < count && bytes[index] == UInt8(ascii: "\\") && bytes[index + 1] == quote
        return closed ? index + quoteLength : index
    }

    /// A header's unquoted value (`Bearer x`, `a=1; b=2`): replaced to the end of the line, or of
    /// the quoted string the header is in.
    mutating func headerValue(at start: Int, enclosing: (quote: UInt8, escaped: Bool)?) -> Int {
        var end = start
        scan: while end < count {
            let byte = bytes[end]
            if Self.isLineBreak(byte) { break }
            if byte == UInt8(ascii: "\\"), let next = self.byte(end + 1) {
                // A JSON string's line break, or the end of the string the header is in.
                if next == UInt8(ascii: "n") || next == UInt8(ascii: "r") { break scan }
                if let enclosing, enclosing.escaped, next == enclosing.quote { break scan }
                end += 2
                continue
            }
            if let enclosing, !enclosing.escaped, byte == enclosing.quote { break }
            end += 1
        }
        end = min(end, count)
        while end > start, Self.isSpace(bytes[end - 1]) { end -= 1 }
        replace(start..<end)
        return end
    }

    /// A `{…}` or `[…]` value: its content replaced, up to its closing bracket (or the end of the line).
    mutating func containerValue(at start: Int) -> Int {
        var depth = 0
        var index = start
        while index < count {
            switch bytes[index] {
            case UInt8(ascii: "\""):
                index += 1
                while index < count, bytes[index] != UInt8(ascii: "\""), !Self.isLineBreak(bytes[index]) {
                    index += bytes[index] == UInt8(ascii: "\\") ? 2 : 1
                }
                // At the closing quote (stepped over below), or at a line break or the end (seen next).
                if index >= count || Self.isLineBreak(bytes[index]) { continue }
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                depth += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                depth -= 1
                if depth == 0 {
                    replace((start + 1)..<index)
                    return index + 1
                }
            case UInt8(ascii: "\n"), UInt8(ascii: "\r"):
                replace((start + 1)..<index)
                return index
            default:
                break
            }
            index += 1
        }
        replace((start + 1)..<count)
        return count
    }

    /// `Bearer <token>`, in any case: `Bearer ***`.
    mutating func bearer(at start: Int) -> Int? {
        guard start + 6 < count, matchesIgnoringCase(start, "bearer"), Self.isSpace(bytes[start + 6])
        else { return nil }
        var index = start + 6
        while index < count, Self.isSpace(bytes[index]) { index += 1 }
        let token = index
        while index < count, Redaction.isTokenByte(bytes[index]) || bytes[index] == UInt8(ascii: "+")
            || bytes[index] == UInt8(ascii: "/") || bytes[index] == UInt8(ascii: "=") {
            index += 1
        }
        while index > token, bytes[index - 1] == UInt8(ascii: ".") { index -= 1 }
        guard index > token else { return nil }
        replace(start..<index, with: "Bearer ***")
        return index
    }

    /// A JSON Web Token (`eyJ…` `.` `…` `.` `…`, the last part possibly empty) anywhere: `***`.
    mutating func jsonWebToken(at start: Int) -> Int? {
        guard start >= noTokenBefore, matches(start, "eyJ") else { return nil }
        func isBase64URL(_ byte: UInt8) -> Bool { Redaction.isWordByte(byte) || byte == UInt8(ascii: "-") }
        var index = start + 3
        var firstRunEnd = index
        for part in 0..<3 {
            let partStart = index
            while index < count, isBase64URL(bytes[index]) { index += 1 }
            if part == 0 { firstRunEnd = index }
            if part == 2 { break }
            guard index > partStart, byte(index) == UInt8(ascii: ".") else {
                noTokenBefore = firstRunEnd
                return nil
            }
            index += 1
        }
        replace(start..<index)
        return index
    }
}

/// The brackets opened inside a URL or a value as it is scanned: a closer it did not open ends it
/// (`(see https://host/a?k=v)` keeps the `)`).
struct BracketNesting {
    private var parentheses = 0, brackets = 0, braces = 0

    /// Whether a bracket is open.
    var isOpen: Bool { parentheses + brackets + braces > 0 }

    /// Takes `byte` (a bracket) into account; `false` for a closer with no opener, which ends the run.
    mutating func admits(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "("): parentheses += 1
        case UInt8(ascii: "["): brackets += 1
        case UInt8(ascii: "{"): braces += 1
        case UInt8(ascii: ")"):
            guard parentheses > 0 else { return false }
            parentheses -= 1
        case UInt8(ascii: "]"):
            guard brackets > 0 else { return false }
            brackets -= 1
        case UInt8(ascii: "}"):
            guard braces > 0 else { return false }
            braces -= 1
        default: break
        }
        return true
    }
}
