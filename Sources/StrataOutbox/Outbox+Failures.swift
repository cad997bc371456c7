import Foundation
import HTTPTypes
import Metrics
@_spi(StrataInternals) import Strata

extension Outbox {
    /// What a failed attempt means for its write.
    struct Classified {
        enum Disposition {
            /// Try again after a backoff (at least `requested`, a `Retry-After`).
            case retryLater(requested: Duration?)
            /// 401: refresh the authorization, send once more.
            case unauthorized
            /// 409/412: the conflict policy decides.
            case conflict(OutboxConflictError)
            /// Park it.
            case park(DeadLetter.Reason)
        }

        var failure: OutboxFailure
        var body: Data?
        var disposition: Disposition
    }

    /// The class of `error`, by the rule ``OutboxFailure/Class`` states.
    static func classify(_ error: any Error, at now: Date) -> Classified {
        if let conflict = error as? OutboxConflictError {
            return Classified(
                failure: OutboxFailure(class: .conflict, message: conflict.description, status: conflict.status, at: now),
                body: conflict.body, disposition: .conflict(conflict))
        }
        if let unreadable = error as? UnreadablePayload {
            return Classified(
                failure: OutboxFailure(class: .permanent, message: unreadable.description, at: now), body: nil,
                disposition: .park(.unreadablePayload))
        }
        if let http = error as? HTTPError {
            switch http {
            case .transport:
                // Refused before anything was sent: the host was not reached. Anything else (a
                // timeout, a connection lost mid-exchange) may have reached the server.
                let kind: OutboxFailure.Class = http.neverReachedTheServer ? .unreachable : .timedOut
                return Classified(
                    failure: OutboxFailure(class: kind, message: http.description, at: now), body: nil,
                    disposition: .retryLater(requested: nil))
            case .status(let code, _, let fields, let body):
                let failure = { (kind: OutboxFailure.Class) in OutboxFailure(class: kind, message: http.description, status: code, at: now) }
                if code == 401 {
                    return Classified(failure: failure(.unauthorized), body: body, disposition: .unauthorized)
                }
                // A 409 that asks to be retried later is the Idempotency-Key draft's "a request with this
                // key is still being processed" (the first attempt's answer was lost while the server
                // was still applying it): wait and send again, as for a 503.
                if code == 409, let requested = http.retryAfter(now: now) {
                    return Classified(failure: failure(.transient), body: body, disposition: .retryLater(requested: requested))
                }
                if code == 409 || code == 412 {
                    let conflict = OutboxConflictError(status: code, serverVersion: fields[.eTag], body: body)
                    return Classified(failure: failure(.conflict), body: body, disposition: .conflict(conflict))
                }
                // 501 Not Implemented and 505 HTTP Version Not Supported say the server cannot do this
                // at all: sending it again changes nothing.
                if code == 501 || code == 505 {
                    return Classified(failure: failure(.permanent), body: body, disposition: .park(.rejected))
                }
                if http.isTransientFailure {
                    return Classified(
                        failure: failure(.transient), body: body,
                        disposition: .retryLater(requested: http.requestedRetryDelay(now: now)))
                }
                return Classified(failure: failure(.permanent), body: body, disposition: .park(.rejected))
            default:
                break
            }
        }
        // A handler's own `CancellationError` (the drain itself was not cancelled): its request was
        // cancelled under it, for example by a transport's delegate. A timeout, or the handler's
        // deadline. No answer, and the request may have reached the server: retried later.
        if error is TimeoutError || error is CancellationError || error is OutboxHandlerTimeoutError {
            return Classified(
                failure: OutboxFailure(class: .timedOut, message: "\(error)", at: now), body: nil,
                disposition: .retryLater(requested: nil))
        }
        if let classifying = error as? any FailureClassifying, classifying.isTransientFailure {
            return Classified(
                failure: OutboxFailure(class: .transient, message: "\(error)", at: now), body: nil,
                disposition: .retryLater(requested: classifying.requestedRetryDelay(now: now)))
        }
        let status = (error as? HTTPError)?.statusCode
        return Classified(
            failure: OutboxFailure(class: .permanent, message: "\(error)", status: status, at: now), body: nil,
            disposition: .park(.rejected))
    }
}

/// The outbox's counters and gauges (swift-metrics), dimension `outbox`.
struct OutboxMetrics: Sendable {
    enum DiscardReason: String, CaseIterable {
        case discardedByRequest = "discarded"
        case conflictServerWins = "conflict_server_wins"
    }

    let enqueued: Counter
    let delivered: Counter
    let storageFailures: Counter
    /// Scopes a drain left alone because another process sharing the storage drains them.
    let claimsHeldElsewhere: Counter
    let pending: Gauge
    let parkedNow: Gauge
    private let failureCounters: [OutboxFailure.Class: Counter]
    private let parkedCounters: [DeadLetter.Reason: Counter]
    private let discardCounters: [DiscardReason: Counter]

    /// Every counter is made here, once: a failure path builds none.
    init(name: String, factory: any MetricsFactory) {
        let outbox = ("outbox", name)
        enqueued = Counter(label: "strata_outbox_enqueued_total", dimensions: [outbox], factory: factory)
        delivered = Counter(label: "strata_outbox_delivered_total", dimensions: [outbox], factory: factory)
        storageFailures = Counter(label: "strata_outbox_storage_failures_total", dimensions: [outbox], factory: factory)
        claimsHeldElsewhere = Counter(label: "strata_outbox_scopes_held_elsewhere_total", dimensions: [outbox], factory: factory)
        pending = Gauge(label: "strata_outbox_pending", dimensions: [outbox], factory: factory)
        parkedNow = Gauge(label: "strata_outbox_parked", dimensions: [outbox], factory: factory)
        failureCounters = Dictionary(uniqueKeysWithValues: OutboxFailure.Class.allCases.map { kind in
            (kind, Counter(label: "strata_outbox_attempt_failures_total", dimensions: [outbox, ("class", kind.rawValue)], factory: factory))
        })
        parkedCounters = Dictionary(uniqueKeysWithValues: DeadLetter.Reason.allCases.map { reason in
            (reason, Counter(label: "strata_outbox_parked_total", dimensions: [outbox, ("reason", reason.rawValue)], factory: factory))
        })
        discardCounters = Dictionary(uniqueKeysWithValues: DiscardReason.allCases.map { why in
            (why, Counter(label: "strata_outbox_removed_undelivered_total", dimensions: [outbox, ("reason", why.rawValue)], factory: factory))
        })
    }

    /// Failed attempts, by class.
    func failures(_ kind: OutboxFailure.Class) -> Counter { failureCounters[kind]! }

    /// Writes parked, by reason.
    func parked(_ reason: DeadLetter.Reason) -> Counter { parkedCounters[reason]! }

    /// Writes removed undelivered, by why.
    func discarded(_ why: DiscardReason) -> Counter { discardCounters[why]! }
}
