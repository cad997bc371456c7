import Foundation
import Strata
import StrataOutbox

/// How the CLI's outbox sends HTTP writes: the library's HTTP handler (``Outbox/registerHTTP(transport:options:idempotencyKeyHeader:conflicts:authorize:refreshAuthorization:)``,
/// `Idempotency-Key` on every attempt, `If-Match` from the base version) through an
/// ``AttemptRecorder``, with the credentials this process was given added back to the writes that
/// were queued with them (``WithheldCredentials``).
struct OutboxHTTPWrites: Sendable {
    /// The header that carries each write's key.
    static let idempotencyKeyField = HTTPField.Name("Idempotency-Key")!

    let recorder: AttemptRecorder
    let timeout: Duration?
    /// Credential fields to add to the writes queued with a field of the same name.
    let credentials: [HTTPField]

    init(transport: any HTTPTransport, timeout: Duration?, credentials: [HTTPField]) {
        self.recorder = AttemptRecorder(base: transport)
        self.timeout = timeout
        self.credentials = credentials
    }

    /// Registers the `http` kind on `outbox`. Conflicts (409/412) park the write: a person decides.
    func register(on outbox: Outbox) {
        let credentials = credentials
        outbox.registerHTTP(
            transport: recorder, options: HTTPRequestOptions(timeout: timeout),
            idempotencyKeyHeader: Self.idempotencyKeyField, conflicts: .manual,
            authorize: { request in WithheldCredentials.restore(credentials, into: &request) })
    }

    /// What the last attempt of `entry` got in this process, if it was sent.
    func lastAttempt(of entry: OutboxEntry) -> AttemptRecorder.Attempt? {
        recorder.attempts.last(for: entry.idempotencyKey)
    }
}
