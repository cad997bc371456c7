import Foundation

/// Something whose bytes can be decoded, and that knows how to report a decoding failure.
public protocol DecodableBody: Sendable {
    /// The bytes to decode.
    var bodyData: Data { get }
    /// The error to throw when the bytes do not decode as `type`.
    func decodingFailure(type: Any.Type, error: any Error) -> any Error
}

extension Data: DecodableBody {
    public var bodyData: Data { self }
    public func decodingFailure(type: Any.Type, error: any Error) -> any Error {
        BodyDecodingError(type: String(describing: type), underlying: error)
    }
}

/// Bytes that do not decode as the expected type (for `Data` sources; HTTP sources throw
/// ``HTTPError/decoding(url:type:underlying:)``, which also names the URL).
public struct BodyDecodingError: Error, Sendable, CustomStringConvertible {
    public var type: String
    public var underlying: any Error

    public var description: String { "bytes are not a valid \(type): \(describeDecodingError(underlying))" }
}
