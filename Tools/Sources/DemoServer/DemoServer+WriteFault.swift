import Foundation

extension DemoServer {
    /// A fault for writes (`POST`, `PUT`, `PATCH`, `DELETE`) only: reads are never hit by it. Set it
    /// as ``Faults/writeFault``, limited to the next writes with ``Faults/remainingWriteFaults``.
    public enum WriteFault: Sendable, Equatable, CustomStringConvertible {
        /// Answer with this status (a 5xx, say) without applying the write, with `Retry-After` when
        /// given. The key is not recorded as used, so a retry applies the write.
        case status(Int, retryAfterSeconds: Int? = nil)
        /// Apply the write and record its key and answer, then drop the connection without a byte of
        /// answer (a TCP reset): the lost acknowledgement. A repeat with the same key gets the
        /// recorded answer. A repeat answered from the record is dropped too while the fault lasts.
        case dropAfterApply
        /// Answer `409 Conflict` with the resource's current `ETag` and a problem body, without
        /// applying the write.
        case conflict
        /// Answer `422 Unprocessable Content` with a problem body (`application/problem+json`),
        /// without applying the write.
        case unprocessable

        /// The status the fault answers with, `nil` for ``dropAfterApply`` (which answers nothing).
        public var status: Int? {
            switch self {
            case .status(let code, _): code
            case .dropAfterApply: nil
            case .conflict: 409
            case .unprocessable: 422
            }
        }

        /// How `strata serve --write-fault` spells it: `503`, `drop-after-apply`, `409`, `422`.
        public var description: String {
            switch self {
            case .status(let code, _): "\(code)"
            case .dropAfterApply: "drop-after-apply"
            case .conflict: "409"
            case .unprocessable: "422"
            }
        }

        /// Parses what ``description`` prints: `drop-after-apply`, `409`, `422`, or any other status
        /// from 400 to 599 (answered as ``status(_:retryAfterSeconds:)``).
        public init?(_ text: String, retryAfterSeconds: Int? = nil) {
            switch text.lowercased() {
            case "drop-after-apply", "drop": self = .dropAfterApply
            case "409": self = .conflict
            case "422": self = .unprocessable
            default:
                guard let code = Int(text), (400...599).contains(code) else { return nil }
                self = .status(code, retryAfterSeconds: retryAfterSeconds)
            }
        }
    }

    /// One write request that carried an `Idempotency-Key`, or was applied, as the server handled it:
    /// what ``DemoServer/onWrite(_:)`` observers get.
    public struct WriteEvent: Sendable, Equatable, CustomStringConvertible {
        /// What became of the request.
        public enum Outcome: Sendable, Equatable {
            /// Applied, answered with this status (and, with a key, recorded under it).
            case applied(status: Int)
            /// Not applied: the answer recorded for its key was sent again.
            case replayed(status: Int)
            /// Refused with 409: a request with the same key is still being processed.
            case keyInFlight
            /// Refused with 422: the key was used before for a different request.
            case keyReused
            /// Answered by an injected fault with this status; not applied.
            case faulted(status: Int)
            /// Refused by the resource (404, 412, 400, …); not applied, not recorded.
            case rejected(status: Int)
        }

        /// `POST`, `PUT`, `PATCH`, `DELETE`.
        public var method: String
        /// The request's path.
        public var path: String
        /// The `Idempotency-Key` it carried (quotes removed), if any.
        public var idempotencyKey: String?
        /// What the server did.
        public var outcome: Outcome
        /// Whether the connection was dropped instead of answering (``WriteFault/dropAfterApply``).
        public var connectionDropped: Bool

        /// `POST /posts Idempotency-Key 0193…: applied (201), connection dropped without an answer`.
        public var description: String {
            var text = "\(method) \(path)"
            text += idempotencyKey.map { " Idempotency-Key \($0)" } ?? " (no Idempotency-Key)"
            switch outcome {
            case .applied(let status): text += ": applied (\(status))"
            case .replayed(let status): text += ": already applied, recorded answer sent again (\(status))"
            case .keyInFlight: text += ": refused (409), a request with this key is in flight"
            case .keyReused: text += ": refused (422), this key was used for a different request"
            case .faulted(let status): text += ": injected fault (\(status)), not applied"
            case .rejected(let status): text += ": rejected (\(status)), not applied"
            }
            if connectionDropped { text += ", connection dropped without an answer" }
            return text
        }
    }

    /// What the server knows of one `Idempotency-Key`.
    public struct IdempotencyKeyRecord: Sendable, Equatable {
        /// The key (quotes of a structured-field string removed).
        public var key: String
        /// The method of the first request that carried it.
        public var method: String
        /// The path of the first request that carried it.
        public var path: String
        /// Requests that carried it.
        public var requests: Int
        /// How many times a write was applied under it: 1 for a server that honours keys, however
        /// often it was sent; one per request when ``DemoServer/honoursIdempotencyKeys`` is off.
        public var applied: Int
        /// Requests answered with the recorded answer, without applying.
        public var replayed: Int
        /// Requests refused for the key: 409 while in flight, 422 for a different request.
        public var refused: Int
        /// The status of the recorded answer, once a write was applied under the key.
        public var recordedStatus: Int?
    }

    /// A write the server applied.
    public struct AppliedWrite: Sendable, Equatable {
        /// `POST`, `PUT`, `PATCH` or `DELETE`.
        public var method: String
        /// The request's path.
        public var path: String
        /// The key it carried, if any.
        public var idempotencyKey: String?
        /// The status it was answered with (whether or not the answer reached the client).
        public var status: Int
    }
}
