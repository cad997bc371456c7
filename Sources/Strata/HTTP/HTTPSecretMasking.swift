import Foundation

/// `body` with the secrets `request` carries replaced by `***`: the URL's password (and the `Basic`
/// encoding of user and password), its query
/// values (8 characters or longer, so short values such as `page=2` do not mangle the body), and the
/// values of `Authorization`, `Proxy-Authorization`, `Cookie`, `X-API-Key` and `API-Key` headers (each
/// piece of 8 characters or longer). Used for the body an ``HTTPError/status(code:url:headerFields:body:)``
/// keeps, so a server that echoes a token in its error page cannot put it in a log.
func maskingSecrets(of request: HTTPRequest, url: URL, in body: Data) -> Data {
    var secrets: Set<String> = []
    if let components = URLComponents(url: url, resolvingAgainstBaseURL: false) {
        for password in [components.password, components.percentEncodedPassword].compactMap({ $0 }) where !password.isEmpty {
            secrets.insert(password)
        }
        if let user = components.user, let password = components.password {
            // The `Authorization: Basic` value the transport derives from them.
            secrets.insert(Data("\(user):\(password)".utf8).base64EncodedString())
        }
        for item in components.queryItems ?? [] {
            if let value = item.value, value.count >= 8 { secrets.insert(value) }
        }
    }
    let sensitive: Set<String> = ["authorization", "proxy-authorization", "cookie", "x-api-key", "api-key"]
    for field in request.headerFields where sensitive.contains(field.name.canonicalName) {
        let value = field.value
        if value.count >= 8 { secrets.insert(value) }
        // `Basic` credentials: the password they encode, as a server may echo it in clear.
        if field.name == .authorization, value.lowercased().hasPrefix("basic "),
           let decoded = Data(base64Encoded: String(value.dropFirst(6)).trimmingCharacters(in: .whitespaces)),
           let credentials = String(data: decoded, encoding: .utf8), let colon = credentials.firstIndex(of: ":") {
            let password = String(credentials[credentials.index(after: colon)...])
            if !password.isEmpty { secrets.insert(password) }
        }
        for piece in value.split(whereSeparator: { " ;,=".contains($0) }) where piece.count >= 8 {
            secrets.insert(String(piece))
        }
    }
    guard !secrets.isEmpty, !body.isEmpty else { return body }
    var masked = body
    // Longest first, so a whole header value is masked before the pieces it contains.
    for secret in secrets.sorted(by: { $0.count > $1.count }) {
        let needle = Data(secret.utf8)
        var searchFrom = masked.startIndex
        while let found = masked.range(of: needle, in: searchFrom..<masked.endIndex) {
            masked.replaceSubrange(found, with: Data("***".utf8))
            searchFrom = found.lowerBound + 3
        }
    }
    return masked
}

/// What a percent-encoded path may hold: a path's characters, `;` (RFC 3986 allows it; Foundation's set
/// does not list it) and `%` (its escapes stay as they are).
private let pathCharacters = CharacterSet.urlPathAllowed.union(CharacterSet(charactersIn: "%;"))

/// `path` with every `%` that does not start an escape (two hex digits) written `%25`.
private func pathEscapesMended(_ path: String) -> String {
    let bytes = Array(path.utf8)
    guard bytes.contains(UInt8(ascii: "%")) else { return path }
    func isHex(_ index: Int) -> Bool {
        index < bytes.count && (bytes[index] >= 0x30 && bytes[index] <= 0x39 || (bytes[index] | 0x20) >= 0x61 && (bytes[index] | 0x20) <= 0x66)
    }
    var mended: [UInt8] = []
    mended.reserveCapacity(bytes.count + 4)
    for (index, byte) in bytes.enumerated() {
        mended.append(byte)
        if byte == UInt8(ascii: "%"), !(isHex(index + 1) && isHex(index + 2)) { mended += [UInt8(ascii: "2"), UInt8(ascii: "5")] }
    }
    return String(decoding: mended, as: UTF8.self)
}

/// `url` for messages and logs: user and password removed, each query value replaced by `***`, so
/// tokens in URLs never reach a log or an error message.
func redactedURLStringImplementation(_ url: URL) -> String {
    guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return "<url>" }
    if components.user != nil || components.password != nil {
        components.user = nil
        components.password = nil
    }
    if let items = components.queryItems, !items.isEmpty {
        components.queryItems = items.map { URLQueryItem(name: $0.name, value: $0.value == nil ? nil : "***") }
    }
    let path = components.percentEncodedPath
    let redactedPath = Redaction.redactingPathTokens(inPath: path)
    if redactedPath != path {
        // The setter traps on a character a path may not hold, or on a `%` that no longer starts an
        // escape (a token redacted out of `%5Btoken`): both are percent-encoded first.
        guard let encoded = pathEscapesMended(redactedPath).addingPercentEncoding(withAllowedCharacters: pathCharacters) else {
            return "<url>"
        }
        components.percentEncodedPath = encoded
    }
    return components.string ?? "<url>"
}

/// A one-line account of a `DecodingError`: what was wrong, and where.
package func describeDecodingError(_ error: any Error) -> String {
    guard let decodingError = error as? DecodingError else { return "\(error)" }
    func path(_ context: DecodingError.Context) -> String {
        let components = context.codingPath.map { key in key.intValue.map { "[\($0)]" } ?? ".\(key.stringValue)" }
        return components.isEmpty ? "at the top level" : "at \(components.joined())"
    }
    switch decodingError {
    case .typeMismatch(let type, let context):
        return "expected \(type) \(path(context))"
    case .valueNotFound(let type, let context):
        return "missing \(type) value \(path(context))"
    case .keyNotFound(let key, let context):
        return "missing key '\(key.stringValue)' \(path(context))"
    case .dataCorrupted(let context):
        return "\(context.debugDescription) \(path(context))"
    @unknown default:
        return "\(decodingError)"
    }
}
