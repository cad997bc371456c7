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
public struct JSONCodec<Value: Codable>: Codec {
    public init() {}

    public func encode(_ value: Value) throws -> Data {
        try JSONEncoder().encode(value)
    }

    public func decode(_ data: Data) throws -> Value {
        try JSONDecoder().decode(Value.self, from: data)
    }
}

/// Stores raw bytes unchanged (S4's `Data` loaders, HTTP bodies).
public struct DataCodec: Codec {
    public init() {}
    public func encode(_ value: Data) throws -> Data { value }
    public func decode(_ data: Data) throws -> Data { data }
}
