import Foundation
import Testing
@testable @_spi(StrataInternals) import Strata
@testable import StrataQueries
import StrataTesting

/// `Redaction.redactingSecrets(in:)` ends a URL, a query value and a named value where they end in
/// running text: each secret below is removed, and every byte around it kept.
@Suite("Redaction: secrets removed, the text around them kept", .timeLimit(.minutes(1)))
struct RedactionPropertyTests {
    // MARK: Secrets

    enum SecretKind: CaseIterable {
        case random, awsKeyID, stripe, github, jsonWebToken
    }

    static let letters = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    static let digits = Array("0123456789")
    static let capitalsAndDigits = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
    static let base64URL = letters + digits + ["-", "_"]

    static func string(_ alphabet: [Character], _ length: Int, _ generator: inout SplitMix64) -> String {
        String((0..<length).map { _ in alphabet.randomElement(using: &generator)! })
    }

    /// A secret of `kind` shaped as ``Redaction`` recognises it in a path: a random token mixes
    /// letters with at least two digits.
    static func secret(_ kind: SecretKind, _ generator: inout SplitMix64) -> String {
        switch kind {
        case .random:
            var token = Array(string(letters + digits, Int.random(in: 22...38, using: &generator), &generator))
            for extra in [letters.randomElement(using: &generator)!, digits.randomElement(using: &generator)!, digits.randomElement(using: &generator)!] {
                token.insert(extra, at: Int.random(in: 0...token.count, using: &generator))
            }
            return String(token)
        case .awsKeyID:
            return "AKIA" + string(capitalsAndDigits, 16, &generator)
        case .stripe:
            return "sk_live_" + string(letters + digits, 24, &generator)
        case .github:
            return "ghp_" + string(letters + digits, 36, &generator)
        case .jsonWebToken:
            return "eyJ" + string(base64URL, Int.random(in: 10...30, using: &generator), &generator)
                + ".eyJ" + string(base64URL, Int.random(in: 10...40, using: &generator), &generator)
                + "." + string(base64URL, Int.random(in: 10...40, using: &generator), &generator)
        }
    }

    // MARK: Shapes

    /// A place for a secret `S` in a text, and what the text reads redacted (`***` for `S`, and any
    /// other value the shape holds).
    struct Shape: Sendable, CustomStringConvertible {
        var description: String
        var template: String
        var redacted: String

        init(_ description: String, _ template: String, _ redacted: String) {
            self.description = description
            self.template = template
            self.redacted = redacted
        }

        func input(_ secret: String) -> String { template.replacingOccurrences(of: "S", with: secret) }
    }

    // `S` is the only capital S in each template.
    static let shapes: [Shape] = [
        Shape("query value", "GET /v1/feed?token=S", "GET /v1/feed?token=***"),
        Shape("second query value", "https://api.example.com/v1/feed?page=2&api_key=S", "https://api.example.com/v1/feed?page=***&api_key=***"),
        Shape("path segment", "https://api.example.com/v1/reset/S/confirm", "https://api.example.com/v1/reset/***/confirm"),
        Shape("last path segment", "https://api.example.com/files/S", "https://api.example.com/files/***"),
        Shape("URL in compact JSON", #"{"url":"https://h.example/x/S","n":1}"#, #"{"url":"https://h.example/x/***","n":1}"#),
        Shape("URL in parentheses", "(see https://h.example/a?k=S)", "(see https://h.example/a?k=***)"),
        Shape("path segment before ).", "(https://h.example/p/S).", "(https://h.example/p/***)."),
        Shape("header dump", "Authorization: Bearer S\nX-Other: keep", "Authorization: ***\nX-Other: keep"),
        Shape("API key header in JSON", #"{"x-api-key":"S","n":1}"#, #"{"x-api-key":"***","n":1}"#),
        Shape("name=value", "auth_token=S", "auth_token=***"),
        Shape("quoted name and value", #""secretKey": "S""#, #""secretKey": "***""#),
        Shape("escaped slashes", #"{"url":"https:\/\/h.example\/x\/S","n":1}"#, #"{"url":"https:\/\/h.example\/x\/***","n":1}"#),
        Shape("JSON error body", #"{"error":"bad","auth_token":"S"}"#, #"{"error":"bad","auth_token":"***"}"#),
        Shape("query value in JSON", #"{"next":"/feed?token=S","n":1}"#, #"{"next":"/feed?token=***","n":1}"#),
        Shape("password in a URL", "https://ada:S@h.example/x", "https://***@h.example/x"),
        Shape("bearer token", "sent Bearer S to host", "sent Bearer *** to host"),
        Shape("cookie header", "Cookie: session=S; theme=dark\nVary: x", "Cookie: ***\nVary: x"),
        Shape("fragment", "https://h.example/cb#access_token=S&state=xyz", "https://h.example/cb#access_token=***&state=***"),
        Shape("JSON in a JSON string", #""{\"auth_token\":\"S\",\"n\":1}""#, #""{\"auth_token\":\"***\",\"n\":1}""#),
        Shape("path parameter", "https://h.example/app;jsessionid=S?x=1", "https://h.example/app;jsessionid=***?x=***"),
        Shape("Swift dictionary", #"["Authorization": "Bearer S", "Accept": "json"]"#, #"["Authorization": "***", "Accept": "json"]"#),
        Shape("name: value", "password: S", "password: ***"),
    ]

    /// Ordinary words around a secret (none a secret's name, none followed by `:` or `=`).
    static let words = [
        "fresh", "local", "MemoryStore", "[max", "age", "1d]", "loaded", "feed", "42", "page", "retry", "ok",
        "cache", "user-7", "550e8400-e29b-41d4-a716-446655440000", "how-to-cache-feeds-offline", "über", "naïve", "—",
    ]
    /// What may come right before a shape.
    static let openings = [" ", "\n", " (", " \"", ": ", "\t"]
    /// What may come right after one (then a space, when words follow): where a URL or a value ends
    /// in running text.
    static let endings = [" ", "\n", ". ", ", ", "; ", "! ", "? ", ")", "] ", "\"", "'", ".", ",", ";", ":", "!", "?", ").", "\t", "<br>"]

    static func words(_ generator: inout SplitMix64) -> String {
        (0..<Int.random(in: 0...4, using: &generator)).map { _ in words.randomElement(using: &generator)! }.joined(separator: " ")
    }

    @Test("a secret in any shape is removed, and every byte around it kept (seeded)")
    func everySecretInEveryShape_isRemoved_andTheRestKept() {
        let seed: UInt64 = 0x5EC2_E75A_FE37
        var generator = SplitMix64(seed: seed)
        var failures = 0
        for round in 0..<6_000 {
            let kind = round < SecretKind.allCases.count * Self.shapes.count
                ? SecretKind.allCases[round % SecretKind.allCases.count]
                : SecretKind.allCases.randomElement(using: &generator)!
            let shape = round < SecretKind.allCases.count * Self.shapes.count
                ? Self.shapes[round / SecretKind.allCases.count]
                : Self.shapes.randomElement(using: &generator)!
            let secret = Self.secret(kind, &generator)
            let before = Self.words(&generator)
            let prefix = before + (before.isEmpty ? "" : Self.openings.randomElement(using: &generator)!)
            let after = Self.words(&generator)
            let ending = Bool.random(using: &generator) && after.isEmpty ? "" : Self.endings.randomElement(using: &generator)!
            let suffix = ending + (after.isEmpty ? "" : " " + after)
            let input = prefix + shape.input(secret) + suffix
            let output = Redaction.redactingSecrets(in: input)
            let expected = prefix + shape.redacted + suffix
            if output != expected || output.contains(secret) || Redaction.redactingSecrets(in: output) != output {
                failures += 1
                if failures <= 5 {
                    Issue.record("seed \(seed), round \(round), \(kind) in \(shape):\n  input    \(input.debugDescription)\n  output   \(output.debugDescription)\n  expected \(expected.debugDescription)")
                }
            }
        }
        #expect(failures == 0)
    }

    @Test("each shape alone, each kind of secret", arguments: shapes)
    func eachShape(_ shape: Shape) {
        var generator = SplitMix64(seed: 37)
        for kind in SecretKind.allCases {
            let secret = Self.secret(kind, &generator)
            #expect(Redaction.redactingSecrets(in: shape.input(secret)) == shape.redacted, "\(kind)")
            for ending in Self.endings {
                #expect(Redaction.redactingSecrets(in: "x " + shape.input(secret) + ending + " y") == "x " + shape.redacted + ending + " y",
                        "\(kind), ending \(ending.debugDescription)")
            }
        }
    }

    // MARK: Regressions: each of these read past the end of its URL or value, or left the secret

    @Test(arguments: [
        // A query value stops at a quote, and the JSON after it stays.
        (#"{"next":"/feed?token=abc123","n":1}"#, #"{"next":"/feed?token=***","n":1}"#),
        (#"GET /feed?token=abc123" failed"#, #"GET /feed?token=***" failed"#),
        // A URL in parentheses, or before a sentence's punctuation.
        ("(see https://h.example/a?k=abc123)", "(see https://h.example/a?k=***)"),
        ("failed: https://h.example/a?k=abc123, retrying", "failed: https://h.example/a?k=***, retrying"),
        // A secret-shaped segment followed by punctuation is still judged, and the punctuation kept.
        ("(https://api.example.com/v1/reset/sk_live_4eC39HqLyjWDarjtT1zdp7dc).", "(https://api.example.com/v1/reset/***)."),
        ("see https://s3.example/AKIAIOSFODNN7EXAMPLE.", "see https://s3.example/***."),
        ("from https://h.example/files/a8Fk29dLq0ZrT7xW3mNb5vYc1Qs, then", "from https://h.example/files/***, then"),
        ("at https://h.example/k/a8Fk29dLq0ZrT7xW3mNb5vYc1Qs; done", "at https://h.example/k/***; done"),
        // A URL in compact JSON, with plain or escaped slashes.
        (#"{"url":"https://h.example/x/a8Fk29dLq0ZrT7xW3mNb5vYc1Qs","n":1}"#, #"{"url":"https://h.example/x/***","n":1}"#),
        (#"{"url":"https:\/\/h.example\/x\/a8Fk29dLq0ZrT7xW3mNb5vYc1Qs","n":1}"#, #"{"url":"https:\/\/h.example\/x\/***","n":1}"#),
        (#"{"url":"https:\/\/h.example\/x?token=abc123","n":1}"#, #"{"url":"https:\/\/h.example\/x?token=***","n":1}"#),
        // A header's value in JSON ends at its closing quote.
        (#"{"x-api-key":"k-123456","n":1}"#, #"{"x-api-key":"***","n":1}"#),
        (#"headers ["Cookie": "session=1"]"#, #"headers ["Cookie": "***"]"#),
        // Names like a secret, outside a URL.
        ("auth_token=abc123 sent", "auth_token=*** sent"),
        (#"{"error":"bad","auth_token":"abc"}"#, #"{"error":"bad","auth_token":"***"}"#),
        (#""secretKey": "abc", "region": "eu""#, #""secretKey": "***", "region": "eu""#),
        ("client_secret: s3cr3t", "client_secret: ***"),
        // Swift's descriptions of dictionaries, structures and optionals.
        (#"["token": Optional("abc"), "page": Optional(2)]"#, #"["token": ***, "page": Optional(2)]"#),
        (#"Credentials(apiKey: "abc", user: "ada")"#, #"Credentials(apiKey: "***", user: "ada")"#),
        (#"{"refresh_token":"r-1","credentials":{"user":"ada","pass":"x"},"n":1}"#, #"{"refresh_token":"***","credentials":{***},"n":1}"#),
        ("https://h.example/cb#access_token=abc123&state=xyz", "https://h.example/cb#access_token=***&state=***"),
        ("https://h.example/app;jsessionid=ABC123DEF", "https://h.example/app;jsessionid=***"),
        // A `@` in a query value is not the end of a password; one in a password is.
        ("https://h.example?email=ada@x.example", "https://h.example?email=***"),
        ("postgres://ada:p?ss#1@db.example/app", "postgres://***@db.example/app"),
    ])
    func endsWhereTheSecretEnds(input: String, expected: String) {
        #expect(Redaction.redactingSecrets(in: input) == expected)
    }

    @Test(arguments: [
        // Header dumps: a value without quotes runs to the end of its line.
        ("Authorization: Bearer abc.def\nX-Other: keep", "Authorization: ***\nX-Other: keep"),
        ("X-Api-Key: k-123456\r\nAccept: json", "X-Api-Key: ***\r\nAccept: json"),
        ("Set-Cookie: sid=abc; Path=/; HttpOnly\nVary: Accept", "Set-Cookie: ***\nVary: Accept"),
        // ... or of the JSON string the line is in.
        (#"{"h":"Authorization: Bearer abc","n":1}"#, #"{"h":"Authorization: ***","n":1}"#),
        (#"{"h":"Authorization: Bearer abc\nAccept: json"}"#, #"{"h":"Authorization: ***\nAccept: json"}"#),
    ])
    func headerDumps(input: String, expected: String) {
        #expect(Redaction.redactingSecrets(in: input) == expected)
    }

    /// Text made of the bytes the shapes are made of, in any order: redaction never traps, and
    /// redacting twice equals redacting once.
    @Test("redacting any text never traps, and is idempotent (seeded)")
    func anyText_isRedactedOnceAndForAll() {
        let pieces = [
            "\"", "'", "\\", "/", ":", "=", "?", "&", "#", "@", "(", ")", "{", "}", "[", "]", "<", ">", ",", ".", ";", "!",
            "-", " ", "\n", "\r\n", "a", "Z", "0", "eyJ", "Bearer ", "https://", #":\/\/"#, "token", "Authorization",
            "cookie", #"\""#, "ü", "“", "***", "a8Fk29dLq0ZrT7xW3mNb5vYc1Qs", "12", "true",
        ]
        let seed: UInt64 = 0x1D3E_A705
        var generator = SplitMix64(seed: seed)
        var failures = 0
        for _ in 0..<20_000 {
            let text = (0..<Int.random(in: 0...30, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined()
            let once = Redaction.redactingSecrets(in: text)
            _ = Redaction.redactingSecrets(inPath: text)
            if Redaction.redactingSecrets(in: once) != once {
                failures += 1
                if failures <= 5 { Issue.record("seed \(seed): \(text.debugDescription) → \(once.debugDescription)") }
            }
        }
        #expect(failures == 0)
    }

    // MARK: What stays

    @Test(arguments: [
        "fresh local", "MemoryStore [max age 1d]", "nothing secret here",
        "https://api.example.com/users/550e8400-e29b-41d4-a716-446655440000/posts/123456789012345678901234",
        "https://blog.example/how-to-cache-feeds-offline-in-2026",
        "https://en.wikipedia.org/wiki/Cache_(computing)", "(https://h.example/a/b).", "see https://h.example/a, then",
        "user 550e8400-e29b-41d4-a716-446655440000: 42 items", "tokens_used: 5", #"{"tokenCount":12,"password_set":true,"secret":null}"#,
        "page: 2, key: feed/7", "circuit api: closed → open", "tier fresh local: miss", "retry 3 of 5: HTTP 503",
        "file:///tmp/strata/cache", "the token was refused", "key=feed", "name: ada",
    ])
    func identifiersAndWordsStay(text: String) {
        #expect(Redaction.redactingSecrets(in: text) == text)
    }

    @Test(arguments: [
        "GET https://user:pass@host.example/a?token=abc&page=2 then Authorization: Bearer x\nok",
        #"{"url":"https://h.example/x/a8Fk29dLq0ZrT7xW3mNb5vYc1Qs","auth_token":"abc","n":1}"#,
        "sent bearer xyz123 (see https://h.example/a?k=S).", #""{\"auth_token\":\"abc\"}""#, "password: hunter2, again",
        "https://h.example/s/eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl.", "x-api-key=k123",
        #"{"credentials":{"user":"ada"}}"#, "Cookie: a=1; b=2", "https://h.example/cb#eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln",
    ])
    func redactingTwice_isRedactingOnce(text: String) {
        let once = Redaction.redactingSecrets(in: text)
        #expect(once != text)
        #expect(Redaction.redactingSecrets(in: once) == once)
    }

    // MARK: Names

    @Test(arguments: [
        "password", "passwd", "auth_token", "authToken", "x-api-key", "xApiKey", "api_key", "APIKEY", "secretKey",
        "SECRETKEY", "credentials", "clientSecret", "client_secret", "refresh_token", "accessToken", "id_token",
        "Set-Cookie", "Proxy-Authorization", "aws_access_key_id", "private_key", "JSESSIONID", "X-Amz-Signature",
        "auth", "pwd", "passphrase", "db.password",
    ])
    func secretNames(name: String) {
        #expect(Redaction.isSecretName(name))
    }

    @Test(arguments: ["name", "key", "session", "author", "oauth_provider", "user", "id", "page", "url", "email"])
    func ordinaryNames(name: String) {
        #expect(!Redaction.isSecretName(name))
    }

    struct Account: Encodable {
        var name = "ada"
        var auth_token = "t-1"
        var secretKey = "s-2"
        var credentials = ["user": "ada", "pin": "0000"]
        var xApiKey = "k-3"
        var tokenCount = 12
        var passwordSet = true
        var homepage = "https://ada.example/u/a8Fk29dLq0ZrT7xW3mNb5vYc1Qs"
    }

    @Test func queryInspection_redactsMembersNamedLikeASecret() throws {
        let json = try #require(QueryInspection.json(of: Account()))
        for member in ["auth_token", "secretKey", "credentials", "xApiKey"] {
            #expect(json.contains("\"\(member)\" : \"***\""), "\(member) in \(json)")
        }
        #expect(json.contains("\"name\" : \"ada\""))
        #expect(json.contains("\"tokenCount\" : 12"), "a count named like a secret is kept")
        #expect(json.contains("\"passwordSet\" : true"), "a flag named like a secret is kept")
        #expect(json.contains("\"homepage\" : \"https://ada.example/u/***\""))
        for secret in ["t-1", "s-2", "0000", "k-3", "a8Fk29dLq0ZrT7xW3mNb5vYc1Qs"] {
            #expect(!json.contains(secret), "\(secret) in \(json)")
        }
    }

    // MARK: Paths and scopes

    @Test(arguments: [
        ("user/a8Fk29dLq0ZrT7xW3mNb5vYc1Qs", "user/***"),
        ("/v1/magic/sk_live_4eC39HqLyjWDarjtT1zdp7dc/login", "/v1/magic/***/login"),
        ("tenant:AKIAIOSFODNN7EXAMPLE", "tenant:***"),
        ("https://h.example/a?token=abc", "https://h.example/a?token=***"),
        ("/posts", "/posts"),
        ("user/550e8400-e29b-41d4-a716-446655440000/posts", "user/550e8400-e29b-41d4-a716-446655440000/posts"),
    ])
    func scopesAndPaths(path: String, expected: String) {
        #expect(Redaction.redactingSecrets(inPath: path) == expected)
    }

    @Test func urlPaths_redactSegmentParameters() {
        #expect(Redaction.redactedString(for: URL(string: "https://h.example/app;jsessionid=ABC123/x?k=v")!)
            == "https://h.example/app;jsessionid=***/x?k=***")
    }

    @Test("long runs that once made the scanner quadratic stay linear and keep their text", arguments: [
        String(repeating: "b+", count: 200_000) + ":", String(repeating: "eyJ-", count: 100_000),
    ])
    func longRuns_areScannedOnce(text: String) {
        // Quadratic, each of these took minutes; linear, well under a second (the suite's time
        // limit fails a regression).
        #expect(Redaction.redactingSecrets(in: text) == text)
    }
}
