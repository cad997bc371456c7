import Foundation

/// How the resilience operators read an ``HTTPError``: the one statement of which HTTP failures are
/// transient (``isTransientFailure``) and which count as an outage (``countsAsOutage``). Retrying,
/// the circuit breaker and their guides link here. (The outbox classifies writes by its own rule:
/// `OutboxFailure/Class`.)
extension HTTPError: FailureClassifying {
    /// No response, and HTTP 408, 429 and 5xx, are transient; other statuses, decoding failures, an
    /// invalid request and a body over the size limit are not.
    public var isTransientFailure: Bool {
        switch self {
        case .transport: true
        case .status(let code, _, _, _): code == 408 || code == 429 || (500...599).contains(code)
        case .decoding, .invalidRequest, .bodyTooLarge: false
        }
    }

    /// Everything but a 4xx other than 408 and 429 (the server answered; the request was wrong).
    public var countsAsOutage: Bool {
        switch self {
        case .status(let code, _, _, _): !(400...499).contains(code) || code == 408 || code == 429
        default: true
        }
    }

    /// The `Retry-After` of a 429 or 503 response: delay-seconds or an HTTP-date (RFC 9110 §10.2.3).
    public func requestedRetryDelay(now: Date) -> Duration? {
        guard case .status(let code, _, _, _) = self, code == 429 || code == 503 else { return nil }
        return retryAfter(now: now)
    }

    /// The response's `Retry-After`, whatever its status: delay-seconds or an HTTP-date.
    package func retryAfter(now: Date) -> Duration? {
        guard case .status(_, _, let fields, _) = self,
              let value = fields[.retryAfter]?.trimmingCharacters(in: .whitespaces)
        else { return nil }
        if let seconds = Int(value), seconds >= 0 { return .seconds(seconds) }
        guard let date = HTTPDate.date(from: value, now: now) else { return nil }
        return .seconds(max(0, date.timeIntervalSince(now)))
    }
}
