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

    /// `["posts", 42]` reads `posts/42`.
    public var description: String { parts.map(\.description).joined(separator: "/") }
}
