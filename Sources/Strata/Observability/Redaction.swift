import Foundation

/// Strata's redaction of secrets in text for logs and errors: URL credentials, query values,
/// credential-bearing header values and bearer tokens. The logging operators pass every message and
/// metadata value through it; use it for logs of your own.
public enum Redaction {
    /// `text` with secrets replaced by `***`: credentials in URLs (`https://user:pass@host`), query values
    /// (`?token=…`), `Authorization` / `Proxy-Authorization` / `Cookie` / `Set-Cookie` / API-key header values
    /// (to the end of the line), and bearer tokens. Strata's logging operators pass every message and
    /// metadata value through it; use it for logs of your own.
    public static func redactingSecrets(in text: String) -> String {
        guard text.contains(where: { $0 == "@" || $0 == "?" || $0 == "&" || $0 == ":" || $0 == "=" || $0 == " " }) else {
            return text
        }
        var result = text
        result = result.replacing(#/([A-Za-z][A-Za-z0-9+.\-]*://)[^\s/@]+@/#) { match in "\(match.output.1)***@" }
        result = result.replacing(#/([?&][^\s=&#?]+)=[^\s&#]+/#) { match in "\(match.output.1)=***" }
        result = result.replacing(
            #/(?i)\b(authorization|proxy-authorization|cookie|set-cookie|x-api-key|api-key)(["']?\s*[:=]\s*)[^\n]+/#
        ) { match in "\(match.output.1)\(match.output.2)***" }
        result = result.replacing(#/(?i)\bbearer\s+[A-Za-z0-9._~+\/=\-]+/#) { _ in "Bearer ***" }
        return result
    }

    /// `url` for messages and logs: user and password removed, each query value replaced by `***`.
    public static func redactedString(for url: URL) -> String {
        redactedURLStringImplementation(url)
    }
}
