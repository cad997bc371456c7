#if DEBUG  // `@testable` needs a build with testing enabled; the fuzz build is a debug build.
import Foundation
@testable import Strata
@testable import StrataCLI
@testable import StrataPostgres

/// The parsers of text a person or a configuration file hands over: the PostgreSQL URL, the CLI's
/// durations and sizes, and the redaction every log line and error goes through.
enum ArgumentTargets {
    static let all: [FuzzTarget] = [
        FuzzTarget(
            name: "postgres-url", seeds: Seeds.postgresURL,
            summary: "PostgresURL: a URL parses or is refused with a typed error, and neither the error nor its description holds the URL's password",
            run: postgresURL),
        FuzzTarget(
            name: "cli-duration", seeds: Seeds.cliDuration,
            summary: "the CLI's durations (500ms, 30s, 7d…): a parsed duration is within 0…100 years, and its milliseconds parse back to it",
            run: cliDuration),
        FuzzTarget(
            name: "cli-byte-count", seeds: Seeds.cliByteCount,
            summary: "the CLI's sizes (8MB, 512KiB, none…): a parsed size is at least one byte, and its number of bytes parses back to it",
            run: cliByteCount),
        FuzzTarget(
            name: "redaction", seeds: Seeds.redaction,
            summary: "Redaction: redacting twice gives what redacting once did, and a secret placed in any of its documented shapes never survives, whatever surrounds it",
            run: redaction),
    ]

    /// A secret of letters and digits, from the input, at least 12 characters (short enough words are
    /// ordinary text the redaction need not know).
    static func secret(_ reader: inout FuzzReader) -> String {
        let alphabet = Array("abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789")
        return "Zq9" + String((0..<reader.int(in: 9...24)).map { _ in alphabet[Int(reader.byte()) % alphabet.count] })
    }

    /// A user name of unreserved characters (RFC 3986 §2.3): with a `/`, `?`, `#` or `@` in it, what
    /// follows would not be the URL's password at all.
    static func userName(_ reader: inout FuzzReader) -> String {
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")
        return String(reader.string(maxCount: 12).filter { allowed.contains($0) })
    }

    static func postgresURL(_ bytes: [UInt8]) throws(PropertyViolation) {
        var reader = FuzzReader(bytes)
        let password = secret(&reader)
        let urls: [(url: String, password: String?)] = [
            (String(decoding: bytes, as: UTF8.self), nil),
            (
                reader.pick(["postgres", "postgresql", "POSTGRES", "http", ""]) + "://" + userName(&reader) + ":" + password
                    + "@" + reader.string(maxCount: 16) + reader.pick(["", ":5432", ":0", ":99999", ":x"]) + "/" + reader.string(maxCount: 12)
                    + reader.pick(["", "?sslmode=disable", "?sslmode=require", "?sslmode=", "?sslmode=nope&x=1"]) + reader.string(maxCount: 12),
                password
            ),
        ]
        for (url, planted) in urls {
            let password = planted ?? URLComponents(string: url)?.password
            let outcome: Result<String, StoreError>
            do {
                outcome = .success(try PostgresURL.parse(url).configuration.username)
            } catch {
                outcome = .failure(error)
            }
            switch outcome {
            case .success(let username):
                try check(!username.isEmpty, "a configuration without a user name from \(url.debugDescription)")
            case .failure(let error):
                guard let password, password.count >= 12 else { continue }
                let text = "\(error) \(String(reflecting: error)) \(error.reason) \(error.store)"
                try check(!text.contains(password), "the error for \(url.debugDescription) holds its password: \(text)")
            }
        }
    }

    static func cliDuration(_ bytes: [UInt8]) throws(PropertyViolation) {
        let text = String(decoding: bytes, as: UTF8.self)
        guard let parsed = try? DurationArgument(parsing: text) else { return }
        try check(parsed.duration >= .zero && parsed.duration <= DurationArgument.maximum, "\(text.debugDescription) parsed to \(parsed.duration)")
        let milliseconds = parsed.duration.components.seconds * 1000 + parsed.duration.components.attoseconds / 1_000_000_000_000_000
        let again = try? DurationArgument(parsing: "\(milliseconds)ms")
        try check(again?.duration == parsed.duration, "\(text.debugDescription) parsed to \(milliseconds)ms, which parses to \(String(describing: again?.duration))")
    }

    static func cliByteCount(_ bytes: [UInt8]) throws(PropertyViolation) {
        let text = String(decoding: bytes, as: UTF8.self)
        guard let parsed = try? ByteCountArgument(parsing: text) else { return }
        guard let count = parsed.bytes else {
            try check(text.trimmingCharacters(in: .whitespaces).lowercased() == "none", "\(text.debugDescription) parsed to no limit")
            return
        }
        try check(count >= 1, "\(text.debugDescription) parsed to \(count) bytes")
        let again = try? ByteCountArgument(parsing: "\(count)")
        try check(again?.bytes == count, "\(text.debugDescription) parsed to \(count) bytes, which parse to \(String(describing: again?.bytes))")
    }

    /// The shapes ``Redaction`` promises to redact, with the secret in the middle.
    static let secretShapes: [@Sendable (String) -> String] = [
        { "https://user:\($0)@example.test/feed" },
        { "https://example.test/feed?token=\($0)&page=2" },
        { "GET /feed?api_key=\($0)" },
        { "Authorization: Bearer \($0)" },
        { "authorization: \($0)" },
        { "\"password\": \"\($0)\"" },
        { "client_secret=\($0)" },
        { "x-api-key: \($0)" },
        { "Set-Cookie: session=\($0); Path=/" },
        { "https://example.test/reset#access_token=\($0)" },
        { "https://example.test/app;jsessionid=\($0)/x" },
        { "{\\\"refresh_token\\\":\\\"\($0)\\\"}" },
    ]

    static func redaction(_ bytes: [UInt8]) throws(PropertyViolation) {
        let text = String(decoding: bytes, as: UTF8.self)
        let once = Redaction.redactingSecrets(in: text)
        try check(Redaction.redactingSecrets(in: once) == once, "redacting \(text.debugDescription) twice differs from once: \(once.debugDescription)")
        let path = Redaction.redactingSecrets(inPath: text)
        try check(Redaction.redactingSecrets(inPath: path) == path, "redacting the path \(text.debugDescription) twice differs from once")

        // A secret in a promised shape, on a line of its own between any two texts.
        var reader = FuzzReader(bytes)
        let secret = secret(&reader)
        let shape = reader.pick(secretShapes)(secret)
        let before = reader.string(maxCount: 64)
        let after = String(decoding: reader.rest(), as: UTF8.self)
        // The secret written in the texts around it is not in a shape the redaction promises.
        guard !before.contains(secret), !after.contains(secret) else { return }
        let planted = before + "\n" + shape + "\n" + after
        let redacted = Redaction.redactingSecrets(in: planted)
        try check(!redacted.contains(secret), "a secret survived redaction in \(planted.debugDescription): \(redacted.debugDescription)")
    }
}
#else
enum ArgumentTargets {
    static let all: [FuzzTarget] = []
}
#endif
