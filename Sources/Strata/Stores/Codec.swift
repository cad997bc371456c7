import Foundation

/// Turns values into bytes and back, for byte-level stores (files, user defaults, databases).
///
/// A codec must be deterministic enough that `decode(encode(v)) == v`, and `decode` must throw (never
/// crash) on bytes it did not write: stores treat a decoding failure as a corrupt entry, a miss.
public protocol Codec<Value>: Sendable {
    associatedtype Value
    /// The bytes for `value`.
    func encode(_ value: Value) throws -> Data
    /// The value encoded in `data`; throws when `data` is not a valid encoding.
    func decode(_ data: Data) throws -> Value
}

/// JSON via Foundation's `JSONEncoder` / `JSONDecoder`: the default codec.
///
/// Keys are sorted, so one value always encodes to the same bytes (Foundation's key order otherwise
/// varies from one encoding to the next): an entry that is stored again unchanged, or re-stamped
/// by ``Store/refresh(_:storedAt:validators:)``'s default implementation, keeps a byte-identical payload.
public struct JSONCodec<Value: Codable>: Codec {
    public init() {}

    public func encode(_ value: Value) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return try encoder.encode(value)
    }

    public func decode(_ data: Data) throws -> Value {
        try JSONDecoder().decode(Value.self, from: data)
    }
}

/// Stores raw bytes unchanged (the offline-first example's `Data` loaders, HTTP bodies).
public struct DataCodec: Codec {
    public init() {}
    public func encode(_ value: Data) throws -> Data { value }
    public func decode(_ data: Data) throws -> Data { data }
}
