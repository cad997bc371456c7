import Foundation
@_spi(StrataInternals) import Strata
import StrataOutbox

/// One live query as an inspector shows it: its key and state, where its value came from, who
/// observes it, the chain a load runs, and its value as JSON (``QueryClient/inspect()``).
///
/// Secrets are redacted as in logs (`Redaction`): in the error, the chain and the provenance; in
/// the value, the string of every JSON member whose name says it holds a secret (`password`,
/// `token`, `secret`, `authorization`, `apiKey`, `cookie`, …).
public struct QueryInspection: Sendable, Hashable, Codable {
    /// How an inspector colours a query.
    public enum State: String, Sendable, Hashable, Codable {
        /// A load runs.
        case fetching
        /// A load waits (offline, backing off, disabled).
        case paused
        /// The last load failed and nothing is shown.
        case failed
        /// Nobody observes it (it is dropped after its grace period).
        case inactive
        /// Its value is stale: the next trigger refetches it.
        case stale
        /// Its value is fresh.
        case fresh
    }

    /// The key as text (`posts/42`).
    public var key: String
    public var tags: [String]
    public var state: State
    /// `empty`, `value` or `failed`.
    public var status: String
    /// The phase as a phrase (`fetching (reconnect)`, `paused (offline)`).
    public var phase: String
    /// Why the last load ran.
    public var lastFetchReason: String?
    public var observers: Int
    public var isStale: Bool
    /// Where the value came from: its tier, origin and pending writes (`fresh local`, `memory`).
    public var tier: String?
    public var origin: String?
    /// How old the value is now, in seconds (by its store time).
    public var ageSeconds: Double?
    public var storedAt: Date?
    public var updatedAt: Date?
    public var failureCount: Int
    public var lastError: String?
    public var pendingWrites: Int
    /// The chain a load runs, drawn as `print(chain)` draws it.
    public var chain: String
    /// The load running now, if any.
    public var inFlight: InFlight?
    /// The value as JSON (pretty, keys sorted, secrets redacted), if it is `Encodable`.
    public var valueJSON: String?
    /// The value before the last change, the same way (for a diff).
    public var previousValueJSON: String?

    /// A load that runs now.
    public struct InFlight: Sendable, Hashable, Codable {
        public var reason: String
        public var startedAt: Date
        /// Failed attempts of this load so far (the query's own retries).
        public var attempts: Int
    }
}

/// One load of a live query, for an inspector's timeline (``QueryClient/recentLoads``).
public struct QueryLoadRecord: Sendable, Hashable, Codable {
    public enum Outcome: String, Sendable, Hashable, Codable {
        case running, value, failed, cancelled
    }

    public var key: String
    public var reason: String
    public var startedAt: Date
    public var endedAt: Date?
    public var outcome: Outcome
    /// The tier that served it, when it answered with a value.
    public var tier: String?
    /// What went wrong (redacted), when it failed.
    public var error: String?
}

/// An error an inspector asked for: the next load of a query fails with it
/// (``Query/failNextLoad(_:)``).
public struct InjectedFailure: Error, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { "injected by the inspector: \(message)" }
}

extension QueryInspection {
    /// `value` as pretty JSON with sorted keys and secrets redacted, or `nil` when it is not
    /// `Encodable` (or does not encode).
    static func json(of value: Any?) -> String? {
        guard let value = value as? any Encodable else { return nil }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        guard let data = try? encoder.encode(value),
              let object = try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
        else { return nil }
        let redacted = redact(object)
        guard let clean = try? JSONSerialization.data(
            withJSONObject: redacted, options: [.sortedKeys, .prettyPrinted, .fragmentsAllowed, .withoutEscapingSlashes])
        else { return nil }
        return String(decoding: clean, as: UTF8.self)
    }

    /// `object` with the values of members named like a secret (`Redaction/isSecretName(_:)`:
    /// `password`, `auth_token`, `x-api-key`, `secretKey`, `credentials`…) replaced by `***` — strings,
    /// arrays and objects; a number, a boolean or `null` is kept (`tokenCount: 5`) — and every other
    /// string passed through `Redaction/redactingSecrets(in:)`.
    static func redact(_ object: Any) -> Any {
        switch object {
        case let dictionary as [String: Any]:
            var result: [String: Any] = [:]
            for (name, member) in dictionary {
                let isFlagOrCount = member is NSNull || member is NSNumber || member is Bool
                result[name] = Redaction.isSecretName(name) && !isFlagOrCount ? "***" : redact(member)
            }
            return result
        case let array as [Any]:
            return array.map(redact)
        case let string as String:
            return Redaction.redactingSecrets(in: string)
        default:
            return object
        }
    }
}

/// What a query tells its client, for an inspector.
enum QueryActivity: Sendable {
    /// `query` is the query's serial number (``Query/serial``): a key made again after a drop or a
    /// removal is a new query, whose flights count from 1 again, even at a freed query's address.
    case loadStarted(key: QueryKey, query: UInt64, flight: Int, reason: FetchReason, at: Date)
    case loadEnded(key: QueryKey, query: UInt64, flight: Int, outcome: QueryLoadRecord.Outcome, tier: String?, error: String?, at: Date)
    case published(key: QueryKey)
}

extension Query {
    /// The query as an inspector shows it, at the environment's now.
    public func inspection() -> QueryInspection {
        let now = environment.now()
        let (snapshot, machine, startedAt, previous) = state.withLock { state in
            (state.published.snapshot, state.machine, state.flightStartedAt, state.previousValue)
        }
        let inspectionState: QueryInspection.State
        let isStale = machine.isStale(now: now)
        switch snapshot.phase {
        case .fetching: inspectionState = .fetching
        case .paused: inspectionState = .paused
        case .idle where snapshot.status == .failed: inspectionState = .failed
        case .idle where machine.observers == 0: inspectionState = .inactive
        case .idle: inspectionState = isStale ? .stale : .fresh
        }
        var inFlight: QueryInspection.InFlight?
        if let flight = machine.flight, let startedAt {
            inFlight = .init(reason: flight.reason.description, startedAt: startedAt, attempts: flight.attempts)
        }
        return QueryInspection(
            key: key.description, tags: tags.sorted(), state: inspectionState, status: snapshot.status.rawValue,
            phase: snapshot.phase.description, lastFetchReason: snapshot.lastFetchReason?.description,
            observers: machine.observers, isStale: isStale,
            tier: snapshot.provenance.map { Redaction.redactingSecrets(in: $0.tier) },
            origin: snapshot.provenance.map { "\($0.origin)" },
            ageSeconds: snapshot.storedAt.map { now.timeIntervalSince($0) }, storedAt: snapshot.storedAt,
            updatedAt: snapshot.updatedAt, failureCount: snapshot.failureCount,
            lastError: snapshot.lastError.map { Redaction.redactingSecrets(in: $0.description) },
            pendingWrites: snapshot.pendingWrites,
            chain: Redaction.redactingSecrets(in: chain.chainNode.tree), inFlight: inFlight,
            valueJSON: QueryInspection.json(of: snapshot.value),
            previousValueJSON: QueryInspection.json(of: previous))
    }

    /// Makes the next load fail with `failure` (an inspector's "force an error"): the query shows
    /// how it copes (its value kept, the error recorded, its retries).
    public func failNextLoad(_ failure: InjectedFailure = InjectedFailure("forced failure")) {
        state.withLock { $0.injectedFailure = failure }
    }
}

/// A live query of any value type, as an inspector acts on it (``QueryClient/query(described:)``).
public protocol InspectableQuery: AnyObject, Sendable {
    var key: QueryKey { get }
    func inspection() -> QueryInspection
    func refetch()
    func invalidate()
    func failNextLoad(_ failure: InjectedFailure)
}

extension Query: InspectableQuery {}
