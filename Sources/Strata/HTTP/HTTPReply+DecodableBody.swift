import Foundation

/// A reply decodes from its body; a failure names the URL (``HTTPError/decoding(url:type:underlying:)``).
extension HTTPReply: DecodableBody {
    public var bodyData: Data { body }
    public func decodingFailure(type: Any.Type, error: any Error) -> any Error {
        HTTPError.decoding(url: url, type: String(describing: type), underlying: error)
    }
}
