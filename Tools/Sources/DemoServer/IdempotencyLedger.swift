import Foundation
import Hummingbird
@_spi(StrataInternals) import Strata

/// The demo server's side of the `Idempotency-Key` header (IETF httpapi draft
/// `draft-ietf-httpapi-idempotency-key-header`): the first request with a key is applied and its
/// answer recorded; a repeat of the same request gets the recorded answer without being applied
/// again; the key used for a different request (another method, path or body) gets 422; a repeat
/// while the first is still being processed gets 409. A request that was not applied (a fault, a
/// 404, a 412) records nothing, so it may be sent again with the same key. Keys are kept for the
/// server's life. Every key seen is counted in a ``DemoServer/IdempotencyKeyRecord``.
struct IdempotencyLedger: Sendable {
    /// A recorded answer, sent again for repeats.
    struct Answer: Sendable, Equatable {
        var status: Int
        var headers: HTTPFields
        var body: Data
    }

    /// What to do with a request that carries a key.
    enum Admission: Equatable {
        /// Apply it (the key is now in flight until ``complete(_:fingerprint:answer:)`` or ``release(_:)``).
        case apply
        /// Send this recorded answer again; do not apply.
        case replay(Answer)
        /// 409: the first request with this key is still being processed.
        case inFlight
        /// 422: the key was used for a different request.
        case reused
    }

    private enum Slot: Sendable {
        case inFlight(fingerprint: String)
        case completed(fingerprint: String, answer: Answer)

        var fingerprint: String {
            switch self {
            case .inFlight(let fingerprint), .completed(let fingerprint, _): fingerprint
            }
        }
    }

    private var slots: [String: Slot] = [:]
    private var records: [String: DemoServer.IdempotencyKeyRecord] = [:]
    private var order: [String] = []

    /// Every key seen, in the order first seen.
    var allRecords: [DemoServer.IdempotencyKeyRecord] { order.compactMap { records[$0] } }

    func record(for key: String) -> DemoServer.IdempotencyKeyRecord? { records[key] }

    /// What identifies "the same request": method, path and a digest of the body.
    static func fingerprint(method: String, path: String, body: Data) -> String {
        "\(method) \(path) " + SHA256.digest(body).map { String(format: "%02x", $0) }.joined()
    }

    /// The key of an `Idempotency-Key` field value: an sf-string (`"abc"`) or, leniently, a bare
    /// token; `nil` when empty or not one of those.
    static func key(fromField value: String) -> String? {
        var text = value.trimmingCharacters(in: .whitespaces)
        if text.count >= 2, text.hasPrefix("\""), text.hasSuffix("\"") {
            text = String(text.dropFirst().dropLast())
            guard !text.contains("\""), !text.contains("\\") else { return nil }
        }
        guard !text.isEmpty, text.count <= 255, text.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
            return nil
        }
        return text
    }

    /// Counts a request carrying `key`.
    mutating func noteRequest(_ key: String, method: String, path: String) {
        if records[key] == nil {
            records[key] = .init(key: key, method: method, path: path, requests: 0, applied: 0, replayed: 0, refused: 0)
            order.append(key)
        }
        records[key]?.requests += 1
    }

    /// Decides what a request with `key` and `fingerprint` gets.
    mutating func admit(_ key: String, fingerprint: String) -> Admission {
        switch slots[key] {
        case nil:
            slots[key] = .inFlight(fingerprint: fingerprint)
            return .apply
        case let slot? where slot.fingerprint != fingerprint:
            records[key]?.refused += 1
            return .reused
        case .inFlight?:
            records[key]?.refused += 1
            return .inFlight
        case .completed(_, let answer)?:
            records[key]?.replayed += 1
            return .replay(answer)
        }
    }

    /// The write was applied under `key`: records its answer (when the key is honoured) and counts it.
    mutating func complete(_ key: String, fingerprint: String, answer: Answer, honoured: Bool) {
        if honoured { slots[key] = .completed(fingerprint: fingerprint, answer: answer) }
        records[key]?.applied += 1
        records[key]?.recordedStatus = answer.status
    }

    /// The request admitted with `key` was not applied: the key is free again.
    mutating func release(_ key: String) {
        if case .inFlight? = slots[key] { slots[key] = nil }
    }
}
