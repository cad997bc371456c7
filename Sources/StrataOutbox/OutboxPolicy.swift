import Foundation
@_spi(StrataInternals) import Strata

/// When an ``Outbox`` tries a write again after a transient failure, and when it gives up on one.
///
/// Waits grow exponentially from `initialDelay` to `maxDelay`, each randomised by `jitter` so
/// many clients coming back online together do not retry in lockstep; a `Retry-After` (429, 503) is
/// honoured when it asks for longer. The attempt count is kept across relaunches.
public struct OutboxRetryPolicy: Sendable, BackingOff {
    /// The wait after the first failed attempt.
    public var initialDelay: Duration
    /// Each further wait is the previous one times this.
    public var multiplier: Double
    /// No computed wait is longer than this (a `Retry-After` may be, up to `maxRetryAfter`).
    public var maxDelay: Duration
    /// How much of each wait is randomised, 0 to 1: a wait `d` becomes a value in `d * (1 - jitter) ... d`.
    public var jitter: Double
    /// The longest `Retry-After` honoured; a longer one is cut to this.
    public var maxRetryAfter: Duration
    /// A number in `0..<1` for the jitter; replace it to make waits repeatable in tests.
    public var random: @Sendable () -> Double
    /// How many bare 409s (no `Retry-After`) after an attempt that got no answer are taken for "the
    /// server is still applying the earlier attempt" and retried after a backoff, before the 409 goes
    /// to the kind's ``OutboxConflictPolicy``.
    public var inFlightConflictRetries: Int

    /// A policy; the defaults wait 1 s, then 2 s, 4 s … up to 5 min, each up to half shorter.
    public init(
        initialDelay: Duration = .seconds(1), multiplier: Double = 2, maxDelay: Duration = .seconds(300),
        jitter: Double = 0.5, maxRetryAfter: Duration = .seconds(3600), inFlightConflictRetries: Int = 5,
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) }
    ) {
        precondition(inFlightConflictRetries >= 0, "inFlightConflictRetries must not be negative")
        precondition((0...1).contains(jitter), "jitter is a fraction from 0 to 1")
        precondition(multiplier >= 1, "multiplier must be at least 1")
        self.initialDelay = initialDelay
        self.multiplier = multiplier
        self.maxDelay = maxDelay
        self.jitter = jitter
        self.maxRetryAfter = maxRetryAfter
        self.random = random
        self.inFlightConflictRetries = inFlightConflictRetries
    }

    /// The wait after the `attempts`-th failed attempt (1 for the first), given what the server asked.
    public func delay(afterAttempt attempts: Int, requested: Duration?) -> Duration {
        let computed = backoff.delay(beforeRetry: attempts, random: random())
        guard let requested else { return computed }
        return max(computed, min(requested, maxRetryAfter))
    }
}

/// How long a failing write is kept trying before it is parked. Nothing is deleted when a limit is
/// reached: the entry becomes a dead letter with reason ``DeadLetter/Reason/retentionExceeded``.
public struct OutboxRetention: Sendable, Hashable {
    /// Attempts after which a write still failing is parked; `nil`: no limit.
    public var maxAttempts: Int?
    /// Age (since it was enqueued) after which a write still pending is parked; `nil`: no limit.
    public var maxAge: Duration?

    /// Limits; the defaults park a write still failing after 50 attempts or 7 days.
    public init(maxAttempts: Int? = 50, maxAge: Duration? = .seconds(7 * 86_400)) {
        self.maxAttempts = maxAttempts
        self.maxAge = maxAge
    }

    /// Never parks a write for retention.
    public static let unlimited = OutboxRetention(maxAttempts: nil, maxAge: nil)
}

/// What happens when the server says a write conflicts with its state (HTTP 409 or 412, or a
/// handler's ``OutboxConflictError``).
public enum OutboxConflictPolicy: Sendable {
    /// The server's version stands: the write is removed (logged and reported, with its payload in
    /// the log's metadata) and `refetch` runs so the app can reload the resource.
    case serverWins(refetch: @Sendable (OutboxEntry) async -> Void)
    /// The client's version stands: the write is sent again without its precondition (`If-Match`).
    case clientWins
    /// The write becomes `merge(entry, conflict)`: a new payload (and the base version it now
    /// applies to), sent again. A merge that throws parks the write.
    case merge(@Sendable (OutboxEntry, OutboxConflictError) async throws -> OutboxMerge)
    /// The write is parked with reason ``DeadLetter/Reason/conflict`` for the app (or a person) to decide.
    case manual
}

/// A merged write: its new payload and the server version it was merged onto.
public struct OutboxMerge: Sendable {
    /// The payload to send next.
    public var payload: Data
    /// The server version (`ETag`) the merged write applies to; sent as `If-Match` by HTTP writes.
    public var baseVersion: String?

    /// A merged write: `payload`, to apply to the server version `baseVersion`.
    public init(payload: Data, baseVersion: String?) {
        self.payload = payload
        self.baseVersion = baseVersion
    }
}

/// A conflict reported by the server: its status, and what it sent back (often its current version).
public struct OutboxConflictError: Error, Sendable, CustomStringConvertible {
    /// 409 or 412 for HTTP; whatever a custom handler says otherwise.
    public var status: Int?
    /// The server's current version (its `ETag`), if it said.
    public var serverVersion: String?
    /// The body it answered with (the first 64 KiB).
    public var body: Data

    /// A conflict a handler reports: the status, the server's version and its answer's body.
    public init(status: Int?, serverVersion: String?, body: Data) {
        self.status = status
        self.serverVersion = serverVersion
        self.body = body
    }

    public var description: String {
        "conflict" + (status.map { " (HTTP \($0))" } ?? "") + (serverVersion.map { ", server version \($0)" } ?? "")
    }
}
