import Foundation
import Strata

/// Header fields from a dictionary (sorted by name, so the order is stable), for tests written
/// with string names.
func fields(_ dictionary: [String: String]) -> HTTPFields {
    var fields = HTTPFields()
    for (name, value) in dictionary.sorted(by: { $0.key < $1.key }) {
        fields.append(HTTPField(name: HTTPField.Name(name)!, value: value))
    }
    return fields
}

extension HTTPFields {
    /// The fields as a dictionary of their names as sent (repeated fields joined with ", ").
    var dictionary: [String: String] {
        var result: [String: String] = [:]
        for field in self {
            result[field.name.rawName] = result[field.name.rawName].map { "\($0), \(field.value)" } ?? field.value
        }
        return result
    }
}

extension HTTPReply {
    /// A reply with a numeric status and string-named header fields.
    init(url: URL, statusCode: Int, headers: [String: String] = [:], body: Data = Data()) {
        self.init(response: HTTPResponse(status: .init(code: statusCode), headerFields: fields(headers)), body: body, url: url)
    }
}

/// One request a stub transport received.
struct SentRequest: Sendable {
    var request: HTTPRequest
    var body: Data?
    var options: HTTPRequestOptions

    var method: String { request.method.rawValue }
    var url: URL { request.url! }
    var headers: [String: String] { request.headerFields.dictionary }
    var timeout: Duration? { options.timeout }
    var maxBodyBytes: Int? { options.maxBodyBytes }
}
