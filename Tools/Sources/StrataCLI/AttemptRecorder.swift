import Foundation
@_spi(StrataInternals) import Strata

/// The transport the CLI's outbox sends through: it remembers the last answer (or failure) per
/// `Idempotency-Key`, so `strata send` and `strata outbox drain` can report `sent 201` or why a write
/// stays queued. It changes nothing: the outbox classifies the answers.
struct AttemptRecorder: HTTPTransport {
    /// What the last attempt of one write got.
    enum Attempt: Sendable, Equatable {
        /// The server answered with this status and body (the first 64 KiB).
        case answered(status: Int, body: Data)
        /// No answer: why, in a few words ("could not connect (connection refused)").
        case unanswered(reason: String)
    }

    let base: any HTTPTransport
    let attempts = Attempts()

    func send(_ request: HTTPRequest, body: Data?, options: HTTPRequestOptions) async throws -> HTTPReply {
        let key = request.headerFields[OutboxHTTPWrites.idempotencyKeyField]
        let reply: HTTPReply
        do {
            reply = try await base.send(request, body: body, options: options)
        } catch let error as HTTPError {
            if let key { attempts.record(.unanswered(reason: Self.shortReason(error)), for: key) }
            throw error
        } catch {
            if let key { attempts.record(.unanswered(reason: Redaction.redactingSecrets(in: "\(error)")), for: key) }
            throw error
        }
        if let key { attempts.record(.answered(status: reply.status.code, body: Data(reply.body.prefix(65_536))), for: key) }
        return reply
    }

    /// A failure in a few words.
    static func shortReason(_ error: HTTPError) -> String {
        switch error {
        case .transport(_, let reason, _): reason
        case .status(let code, _, _, _): "HTTP \(code)"
        default: Redaction.redactingSecrets(in: error.description)
        }
    }

    /// The attempts, by idempotency key.
    final class Attempts: Sendable {
        private let byKey = Locked<[String: Attempt]>([:])

        func record(_ attempt: Attempt, for key: String) {
            byKey.withLock { $0[key] = attempt }
        }

        /// The last attempt of the write with `key`, if it was sent in this process.
        func last(for key: String) -> Attempt? { byKey.withLock { $0[key] } }
    }
}
