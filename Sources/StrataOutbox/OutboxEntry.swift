import Foundation
@_spi(StrataInternals) import Strata

/// One write waiting in an ``Outbox``: what to send, in which order, and how its delivery went so far.
///
/// An entry is persisted by the outbox's ``OutboxStorage`` before ``Outbox/enqueue(kind:scope:payload:host:baseVersion:id:invalidates:)``
/// returns, and removed only once its handler reported it delivered. A write that cannot be
/// delivered is never removed: it is *parked* (a dead letter, `State-swift.enum/parked(_:)`) until
/// someone retries or discards it.
public struct OutboxEntry: Sendable, Hashable, Codable, Identifiable {
    /// A UUIDv7 (time-ordered, RFC 9562): unique across processes, and the `Idempotency-Key` every
    /// attempt to deliver this write sends, so a server that remembers keys applies it once.
    public let id: UUID
    /// Order of enqueueing within one outbox: entries of a scope are delivered by increasing sequence.
    /// A parked write that is retried gets a new one: it goes to the back of its scope's queue.
    public var sequence: UInt64
    /// Entries of one scope are delivered one at a time, in order; different scopes in parallel.
    /// By default the resource the write changes (`"posts"`, `"post/42"`).
    public let scope: String
    /// The name its handler was registered under (``Outbox/register(_:conflicts:refreshAuthorization:handler:)``). An entry whose kind
    /// has no handler in this process is parked, never dropped.
    public let kind: String
    /// The write itself, encoded (JSON for typed writes, an ``OutboxRequest`` for HTTP writes).
    public var payload: Data
    /// The host the write goes to, when known: a successful load from that host starts a drain.
    public let host: String?
    /// The server version the write was made against (an `ETag`), sent as `If-Match` by HTTP writes
    /// so the server can refuse it with 412 when the resource changed meanwhile; `nil`: unconditional.
    public var baseVersion: String?
    /// When it was enqueued (the outbox environment's wall clock).
    public let createdAt: Date
    /// When it last entered the queue: enqueued, or retried from the dead letters. The retention's
    /// `maxAge` counts from here.
    public var queuedAt: Date
    /// Delivery attempts so far (counted before each is sent, so a crash mid-send counts it).
    public var attempts: Int
    /// The earliest time the next attempt may be made (after a transient failure: now plus a backoff).
    public var nextAttemptAt: Date
    /// Why the last attempt failed, if it did.
    public var lastFailure: OutboxFailure?
    /// Whether it waits for delivery or is parked.
    public var state: State
    /// How many times the request was changed and sent again after the server refused it for good (a
    /// merge, or "client wins" dropping the precondition): each change gets a new
    /// `idempotencyKey`, derived from the id, because the server remembers the old key with its
    /// refusal. 0 for a write sent as it was queued.
    public var keyRevision: Int
    /// Bare 409s answered to this write while an earlier attempt may still be applied (it got no
    /// answer): each was retried after a backoff instead of going to the conflict policy, up to
    /// ``OutboxRetryPolicy/inFlightConflictRetries``.
    public var inFlightConflicts: Int
    /// What the write changes, named for the reads that show it: live query tags or key prefixes
    /// (`"posts"`, `"posts/42"`, a key's parts joined by `/`). When the write is delivered, a
    /// `QueryClient` following the outbox invalidates every query with one of these tags or a key
    /// under one of these prefixes. Kept with the entry, so a write delivered after a relaunch still
    /// invalidates what it names. Empty: the write names nothing.
    public var invalidates: [String]

    /// Whether an entry waits for delivery or has been set aside.
    public enum State: Sendable, Hashable, Codable {
        /// Waiting for (or being) delivered.
        case pending
        /// A dead letter: not delivered, kept until ``Outbox/retry(_:)`` or ``Outbox/discard(_:)``.
        case parked(DeadLetter)
    }

    /// The dead letter of a parked entry, if it is parked.
    public var deadLetter: DeadLetter? {
        if case .parked(let letter) = state { letter } else { nil }
    }

    /// Whether it waits for delivery.
    public var isPending: Bool { state == .pending }

    /// An entry as the outbox makes one (``Outbox/enqueue(kind:scope:payload:host:baseVersion:id:invalidates:)``),
    /// or as a storage reads one back; `queuedAt` starts as `createdAt`, `nextAttemptAt` defaults to it.
    public init(
        id: UUID, sequence: UInt64, scope: String, kind: String, payload: Data, host: String? = nil,
        baseVersion: String? = nil, createdAt: Date, attempts: Int = 0, nextAttemptAt: Date? = nil, lastFailure: OutboxFailure? = nil, state: State = .pending,
        invalidates: [String] = []
    ) {
        self.id = id
        self.sequence = sequence
        self.scope = scope
        self.kind = kind
        self.payload = payload
        self.host = host
        self.baseVersion = baseVersion
        self.createdAt = createdAt
        self.queuedAt = createdAt
        self.attempts = attempts
        self.nextAttemptAt = nextAttemptAt ?? createdAt
        self.lastFailure = lastFailure
        self.state = state
        self.keyRevision = 0
        self.inFlightConflicts = 0
        self.invalidates = invalidates
    }

    /// Reads an entry; `keyRevision` and `inFlightConflicts` read as 0 when the stored entry has no
    /// such field, and `invalidates` as empty.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(UUID.self, forKey: .id)
        sequence = try container.decode(UInt64.self, forKey: .sequence)
        scope = try container.decode(String.self, forKey: .scope)
        kind = try container.decode(String.self, forKey: .kind)
        payload = try container.decode(Data.self, forKey: .payload)
        host = try container.decodeIfPresent(String.self, forKey: .host)
        baseVersion = try container.decodeIfPresent(String.self, forKey: .baseVersion)
        createdAt = try container.decode(Date.self, forKey: .createdAt)
        queuedAt = try container.decode(Date.self, forKey: .queuedAt)
        attempts = try container.decode(Int.self, forKey: .attempts)
        nextAttemptAt = try container.decode(Date.self, forKey: .nextAttemptAt)
        lastFailure = try container.decodeIfPresent(OutboxFailure.self, forKey: .lastFailure)
        state = try container.decode(State.self, forKey: .state)
        keyRevision = try container.decodeIfPresent(Int.self, forKey: .keyRevision) ?? 0
        inFlightConflicts = try container.decodeIfPresent(Int.self, forKey: .inFlightConflicts) ?? 0
        invalidates = try container.decodeIfPresent([String].self, forKey: .invalidates) ?? []
    }

    /// The `Idempotency-Key` header value: the lowercase UUID string, and after the request was
    /// changed and sent again (`keyRevision` above 0), that string with `-r` and the revision, so
    /// the server sees a new request it has not refused yet, still traceable to the write.
    public var idempotencyKey: String {
        keyRevision == 0 ? id.lowercasedString : "\(id.lowercasedString)-r\(keyRevision)"
    }
}

/// Why an outbox entry was parked, with what the server said.
public struct DeadLetter: Sendable, Hashable, Codable {
    /// Why a write is parked.
    public enum Reason: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
        /// The server refused it (a 4xx other than 401, 408, 409, 412 and 429, or a handler's
        /// non-transient error): sending it again would fail the same way.
        case rejected
        /// Still 401 after the auth-refresh hook ran and the write was sent once more.
        case unauthorized
        /// A 409 or 412 under the ``OutboxConflictPolicy/manual`` policy (or a merge that failed).
        case conflict
        /// No handler is registered for its kind in this process.
        case unknownKind
        /// It reached the outbox's ``OutboxRetention`` limit (attempts or age) while still failing.
        case retentionExceeded
        /// Its stored payload could not be read back (for an HTTP write: not an ``OutboxRequest``).
        case unreadablePayload

        public var description: String {
            switch self {
            case .rejected: "rejected by the server"
            case .unauthorized: "unauthorized after an auth refresh"
            case .conflict: "conflict"
            case .unknownKind: "no handler for its kind"
            case .retentionExceeded: "retention limit reached"
            case .unreadablePayload: "payload unreadable"
            }
        }
    }

    /// Why it was parked.
    public var reason: Reason
    /// In words: the error, the limit reached, the kind that has no handler.
    public var detail: String
    /// The HTTP status of the last answer, if there was one.
    public var status: Int?
    /// The first 64 KiB of the last answer's body, if there was one.
    public var body: Data?
    /// When it was parked.
    public var parkedAt: Date

    /// A dead letter with what is known about why the write was parked.
    public init(reason: Reason, detail: String, status: Int? = nil, body: Data? = nil, parkedAt: Date) {
        self.reason = reason
        self.detail = detail
        self.status = status
        self.body = body
        self.parkedAt = parkedAt
    }
}

/// Why one delivery attempt failed.
public struct OutboxFailure: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The class the outbox put the failure in, which decides what it did next: the one statement of
    /// how the outbox reads a failed attempt (the guides and the `Outbox` docs link here).
    public enum Class: String, Sendable, Hashable, Codable, CaseIterable {
        /// The host could not be reached at all (connection refused, DNS, no route, offline): the
        /// request never left, so it is retried after a backoff, and at once when connectivity comes
        /// back or the host answers another request.
        case unreachable
        /// The request may have reached the server but no answer came (a timeout, a connection lost
        /// mid-exchange, the handler's deadline): retried after the backoff the server earned, which
        /// another request to the host answering does not cut short; a bare 409 to the next attempt
        /// means "still being applied", not a conflict.
        case timedOut
        /// The server answered 408, 429, a 5xx other than 501 and 505, or a 409 with `Retry-After` (the
        /// Idempotency-Key draft's "still processing"), or the handler threw a transient error: retried
        /// after a backoff, or after the `Retry-After` the server asked for.
        case transient
        /// 401: the auth-refresh hook ran and the write was sent once more.
        case unauthorized
        /// 409 or 412: the conflict policy decided.
        case conflict
        /// Anything else: the write was parked.
        case permanent
    }

    /// The class of the failure.
    public var `class`: Class
    /// The error, in words (secrets masked as in `HTTPError`).
    public var message: String
    /// The HTTP status, if the server answered.
    public var status: Int?
    /// When it happened.
    public var at: Date

    /// A failed attempt of class `class`, described by `message`, at `at`.
    public init(class: Class, message: String, status: Int? = nil, at: Date) {
        self.class = `class`
        self.message = message
        self.status = status
        self.at = at
    }

    public var description: String { "\(`class`.rawValue): \(message)" }
}

extension UUID {
    /// A version 7 UUID (RFC 9562 §5.7): 48 bits of Unix milliseconds, then random bits, so ids sort
    /// by creation time across processes. The random bits come from the system's generator
    /// (`getrandom` on Linux): `UUID()` there opens, reads and closes `/dev/urandom` for each one.
    static func version7(at date: Date) -> UUID {
        let milliseconds = UInt64(max(0, date.timeIntervalSince1970 * 1000))
        var generator = SystemRandomNumberGenerator()
        let (a, b) = (generator.next() as UInt64, generator.next() as UInt64)
        func byte(_ value: UInt64, _ shift: UInt64) -> UInt8 { UInt8(truncatingIfNeeded: value >> shift) }
        return UUID(uuid: (
            byte(milliseconds, 40), byte(milliseconds, 32), byte(milliseconds, 24), byte(milliseconds, 16),
            byte(milliseconds, 8), byte(milliseconds, 0),
            0x70 | (byte(a, 0) & 0x0F), byte(a, 8),  // version 7
            0x80 | (byte(a, 16) & 0x3F), byte(a, 24),  // variant 10
            byte(a, 32), byte(a, 40), byte(a, 48), byte(a, 56), byte(b, 0), byte(b, 8)))
    }
}
