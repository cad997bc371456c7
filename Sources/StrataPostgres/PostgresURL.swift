#if Postgres
import Foundation
import PostgresNIO
import Strata

/// Parses `postgres://user:password@host:port/database?sslmode=…` into a client configuration.
enum PostgresURL {
    /// The configuration `url` describes.
    /// - Throws: `StoreError` (operation `open`) naming what is wrong, with the URL's credentials removed.
    static func configuration(from url: String) throws(StoreError) -> PostgresClient.Configuration {
        try parse(url).configuration
    }

    /// The configuration `url` describes, and the TLS mode its `sslmode` chose (the configuration
    /// holds it too, where it cannot be read back).
    /// - Throws: `StoreError` (operation `open`) naming what is wrong, with the URL's credentials removed.
    static func parse(_ url: String) throws(StoreError) -> (configuration: PostgresClient.Configuration, tls: PostgresTLSMode) {
        let shown = shown(url)
        let password = URLComponents(string: url)?.password
        func failure(_ reason: String) -> StoreError {
            // A reason that quotes part of the URL never quotes the password with it.
            var reason = reason
            if let password, !password.isEmpty { reason = reason.replacingOccurrences(of: password, with: "***") }
            return StoreError(store: "PostgresStore(\(shown))", operation: .open, key: nil, reason: reason)
        }
        guard let components = URLComponents(string: url) else {
            throw failure("not a URL; expected postgres://user:password@host:port/database")
        }
        guard let scheme = components.scheme?.lowercased(), scheme == "postgres" || scheme == "postgresql" else {
            throw failure("the scheme must be postgres:// or postgresql://")
        }
        guard let host = components.host, !host.isEmpty else {
            throw failure("the URL has no host")
        }
        guard let username = components.user, !username.isEmpty else {
            throw failure("the URL has no user name")
        }
        let port = components.port ?? 5432
        guard (1...65_535).contains(port) else {
            throw failure("port \(port) is out of range")
        }
        var database = components.path
        if database.hasPrefix("/") { database.removeFirst() }
        guard !database.contains("/") else {
            throw failure("the path must be a single database name")
        }
        let sslmode = components.queryItems?.first(where: { $0.name == "sslmode" })?.value
        let mode: PostgresTLSMode.Mode
        switch sslmode {
        case nil, "prefer", "allow":
            mode = .prefer
        case "disable":
            mode = .disable
        case "require", "verify-ca", "verify-full":
            mode = .require
        case let other?:
            throw failure("sslmode '\(other)' is not one of disable, allow, prefer, require, verify-ca, verify-full")
        }
        let tls = PostgresTLSMode(
            mode: mode, settings: mode == .disable ? nil : .makeClientConfiguration(),
            source: "sslmode=\(sslmode ?? "prefer (the default)")")
        // Brackets of an IPv6 literal are URL syntax, not part of the address.
        let bareHost = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        let configuration = PostgresClient.Configuration(
            host: bareHost, port: port, username: username, password: components.password,
            database: database.isEmpty ? nil : database, tls: tls.clientTLS)
        return (configuration, tls)
    }

    /// `url` as an error shows it, without its credentials: redacted as a URL when it is one with a
    /// scheme and a host; otherwise (`://user:password@host`, `user:password@host/db`: a relative
    /// reference to Foundation, which Redaction does not take for a URL) with everything before its
    /// last `@` replaced, so a URL missing its scheme never puts its password in the error, and so in
    /// logs.
    static func shown(_ url: String) -> String {
        if let parsed = URL(string: url), parsed.scheme?.isEmpty == false, parsed.host?.isEmpty == false {
            var shown = Redaction.redactedString(for: parsed)
            // The path or query may hold the credentials again (`…@host//user:password@…`): what
            // looks like user information goes, and so does the password wherever else it appears.
            if Array(shown.utf8).contains(UInt8(ascii: "@")) { shown = atRemoved(shown) }
            for secret in [parsed.password(percentEncoded: false), parsed.password(percentEncoded: true)] {
                if let secret, !secret.isEmpty { shown = shown.replacingOccurrences(of: secret, with: "***") }
            }
            return shown
        }
        guard Array(url.utf8).contains(UInt8(ascii: "@")) else {
            return url.isEmpty ? "<empty URL>" : Redaction.redactingSecrets(in: url)
        }
        return atRemoved(url)
    }

    /// `text` without what comes before its last `@`. The `@` is found among the bytes: as a
    /// Character it may be `@` with a combining mark after it, which
    /// `lastIndex(of: "@")` does not match.
    private static func atRemoved(_ text: String) -> String {
        let bytes = Array(text.utf8)
        guard let at = bytes.lastIndex(of: UInt8(ascii: "@")) else { return text }
        return "***" + String(decoding: bytes[at...], as: UTF8.self)
    }
}
#endif
