@_spi(StrataInternals) import Strata
import StrataOutbox

/// What a live query is called: a path of parts, from the general to the particular
/// (`["posts"]`, `["posts", 42]`, `["posts", 42, "comments"]`).
///
/// Keys are compared part by part, so invalidating a prefix reaches every key under it:
/// `["posts"]` covers `["posts", 42]` and `["posts", 42, "comments"]`, not `["postsArchive"]` or
/// `["users"]`.
///
/// ```swift
/// let key: QueryKey = ["posts", 42]
/// key.hasPrefix(["posts"])   // true
/// ```
public struct QueryKey: Hashable, Sendable, ExpressibleByArrayLiteral, CustomStringConvertible {
    /// One part of a key: a name or a number.
    public enum Part: Hashable, Sendable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, CustomStringConvertible {
        case name(String)
        case number(Int)

        public init(stringLiteral value: String) { self = .name(value) }
        public init(integerLiteral value: Int) { self = .number(value) }

        public var description: String {
            switch self {
            case .name(let name): name
            case .number(let number): String(number)
            }
        }
    }

    /// The parts, from the general to the particular.
    public var parts: [Part]

    public init(_ parts: [Part]) { self.parts = parts }
    public init(arrayLiteral parts: Part...) { self.parts = parts }

    /// Whether `prefix`'s parts are this key's first parts (every key has the empty prefix).
    public func hasPrefix(_ prefix: QueryKey) -> Bool {
        parts.count >= prefix.parts.count && zip(parts, prefix.parts).allSatisfy { $0 == $1 }
    }

    /// This key with `part` appended.
    public func appending(_ part: Part) -> QueryKey { QueryKey(parts + [part]) }

    /// The key as text, one part after another joined by `/`: `["posts", 42]` reads `posts/42`.
    ///
    /// Two keys read alike only when they are equal (it is what a paged query's store is keyed by,
    /// and how the inspector names a query), so the text marks what would make two keys alike: a
    /// name that reads as a number, is empty or starts with `"` is quoted (`["feed", "1"]` reads
    /// `feed/"1"`, `["feed", 1]` reads `feed/1`); `%`, `/` and `"` in a name are percent-escaped
    /// (`["feed/1"]` reads `feed%2F1`). An ordinary name (`posts`, `user-42`) reads as it is.
    public var description: String { parts.map(\.encoded).joined(separator: "/") }

    /// The key `description` reads as, if it is one a key describes (`QueryKey(described: key.description) == key`).
    public init?(described text: String) {
        guard !text.isEmpty else {
            self.init([])
            return
        }
        var parts: [Part] = []
        // By Unicode scalars, not characters: a `/` followed by a combining mark is one character.
        for segment in text.unicodeScalars.split(separator: "/", omittingEmptySubsequences: false) {
            guard let part = Part(encoded: String(String.UnicodeScalarView(segment))) else { return nil }
            parts.append(part)
        }
        self.init(parts)
        // Only the one text a key reads as: `posts/042` or `a%2fb` name no key.
        guard description.unicodeScalars.elementsEqual(text.unicodeScalars) else { return nil }
    }
}

extension QueryKey.Part {
    /// The part as ``QueryKey/description`` writes it.
    var encoded: String {
        switch self {
        case .number(let number):
            return String(number)
        case .name(let name):
            let escaped = Self.escaping(name)
            return needsQuotes(name) ? "\"\(escaped)\"" : escaped
        }
    }

    /// Whether a name would read as something else written bare: a number, nothing, or a quoted name.
    private func needsQuotes(_ name: String) -> Bool {
        name.isEmpty || Int(name) != nil || name.unicodeScalars.first == "\""
    }

    /// `name` with `%`, `/` and `"` percent-escaped.
    private static func escaping(_ name: String) -> String {
        guard name.utf8.contains(where: { $0 == UInt8(ascii: "%") || $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "\"") }) else { return name }
        var escaped = ""
        for character in name.unicodeScalars {
            switch character {
            case "%": escaped += "%25"
            case "/": escaped += "%2F"
            case "\"": escaped += "%22"
            default: escaped.unicodeScalars.append(character)
            }
        }
        return escaped
    }

    /// The part a segment of ``QueryKey/description`` reads as.
    init?(encoded segment: String) {
        let scalars = Array(segment.unicodeScalars)
        if scalars.count >= 2, scalars.first == "\"", scalars.last == "\"" {
            guard let name = Self.unescaping(scalars.dropFirst().dropLast()) else { return nil }
            self = .name(name)
        } else if let number = Int(segment) {
            self = .number(number)
        } else {
            guard let name = Self.unescaping(scalars[...]) else { return nil }
            self = .name(name)
        }
    }

    /// The name `scalars` spell with their `%25`, `%2F` and `%22` read back; `nil` for another `%`.
    private static func unescaping(_ scalars: ArraySlice<Unicode.Scalar>) -> String? {
        var result = String.UnicodeScalarView()
        var index = scalars.startIndex
        while index < scalars.endIndex {
            let scalar = scalars[index]
            guard scalar == "%" else {
                result.append(scalar)
                index += 1
                continue
            }
            guard index + 2 < scalars.endIndex else { return nil }
            switch (scalars[index + 1], scalars[index + 2]) {
            case ("2", "5"): result.append("%")
            case ("2", "F"), ("2", "f"): result.append("/")
            case ("2", "2"): result.append("\"")
            default: return nil
            }
            index += 3
        }
        return String(result)
    }
}
