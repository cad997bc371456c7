import Foundation
import Strata

/// The server answered 501 Not Implemented or 505 HTTP Version Not Supported: it cannot handle the
/// request at all, so the write is parked, not retried (see ``AttemptRecorder``).
struct ServerCannotHandle: Error, FailureClassifying, CustomStringConvertible {
    var status: Int
    var method: String
    var url: URL
    var body: Data

    var isTransientFailure: Bool { false }

    var description: String {
        let what = status == 501 ? "the server does not implement \(method)" : "the server does not support this HTTP version"
        let snippet = Redaction.redactingSecrets(in: String(decoding: body, as: UTF8.self).replacingOccurrences(of: "\n", with: " "))
        return "HTTP \(status) from \(Redaction.redactedString(for: url)): \(what), so sending it again cannot succeed"
            + (snippet.isEmpty ? "" : ": \(snippet)")
    }
}
