import Foundation
import Strata
import StrataOutbox

/// One outbox entry as `strata outbox list` shows it: a line for people, an object for `--json`.
/// URLs and errors have their secrets masked (``Redaction``); bodies are not shown.
struct EntryView {
    let entry: OutboxEntry
    /// The stored request, for HTTP writes whose payload reads back.
    let request: OutboxRequest?

    init(_ entry: OutboxEntry) {
        self.entry = entry
        self.request = entry.kind == Outbox.httpKind ? try? JSONDecoder().decode(OutboxRequest.self, from: entry.payload) : nil
    }

    /// `pending`, or `parked:<reason>` (`parked:rejected`, `parked:conflict`, …).
    var state: String {
        entry.deadLetter.map { "parked:\($0.reason.rawValue)" } ?? "pending"
    }

    /// `POST http://host/posts`, or the kind for a write that is not an HTTP request.
    var methodAndURL: String {
        guard let request else { return "kind \(entry.kind)" }
        return "\(request.method) \(Redaction.redactedString(for: request.url))"
    }

    /// The credential fields the write was queued with and the outbox did not keep.
    var credentialsNotKept: [String] {
        request.map(WithheldCredentials.names(in:)) ?? []
    }

    /// The last error: the dead letter's status and reason for a parked write, the last failure for a
    /// pending one.
    var lastError: String? {
        if let letter = entry.deadLetter {
            let excerpt = letter.body.map(OutboxTool.excerpt).flatMap { $0.isEmpty ? nil : $0 }
            return (letter.status.map { "HTTP \($0): " } ?? "") + Redaction.redactingSecrets(in: excerpt ?? letter.detail)
        }
        return entry.lastFailure.map { Redaction.redactingSecrets(in: $0.description) }
    }

    /// `<id> <state> scope=<scope> <METHOD> <URL> attempts=<n> next=<time|-> [credentials-not-kept=<names>] error=<text|->`
    var line: String {
        var fields = [
            entry.idempotencyKey, state, "scope=\(entry.scope)", methodAndURL, "attempts=\(entry.attempts)",
            "next=" + (entry.isPending ? OutboxTool.timestamp(entry.nextAttemptAt) : "-"),
        ]
        let withheld = credentialsNotKept
        if !withheld.isEmpty { fields.append("credentials-not-kept=" + withheld.joined(separator: ",")) }
        fields.append("error=" + (lastError ?? "-"))
        return fields.joined(separator: " ")
    }

    var jsonObject: [String: Any] {
        var object: [String: Any] = [
            "id": entry.idempotencyKey, "state": entry.isPending ? "pending" : "parked", "scope": entry.scope,
            "kind": entry.kind, "attempts": entry.attempts, "createdAt": OutboxTool.timestamp(entry.createdAt),
            "credentialsNotKept": credentialsNotKept,
        ]
        if let request {
            object["method"] = request.method
            object["url"] = Redaction.redactedString(for: request.url)
        }
        if entry.isPending { object["nextAttemptAt"] = OutboxTool.timestamp(entry.nextAttemptAt) }
        if let letter = entry.deadLetter {
            object["reason"] = letter.reason.rawValue
            object["parkedAt"] = OutboxTool.timestamp(letter.parkedAt)
            if let status = letter.status { object["status"] = status }
        }
        object["lastError"] = lastError ?? NSNull()
        return object
    }
}
