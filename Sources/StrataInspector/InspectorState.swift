#if Inspector
import Foundation
import Strata
import StrataOutbox
import StrataQueries

/// Everything the inspector shows at one moment, as its JSON API sends it (`GET …/api/state`, and
/// the export).
public struct InspectorState: Sendable, Codable {
    public var generatedAt: Date
    /// Whether the app's query client believes the network reachable.
    public var online: Bool
    public var queries: [QueryInspection]
    /// The recent loads, oldest first (the timeline).
    public var loads: [QueryLoadRecord]
    public var outboxes: [OutboxView]
    public var circuits: [CircuitView]

    /// One outbox: its status and entries, pending and parked (payloads are not shown: an HTTP
    /// write shows its method and redacted URL).
    public struct OutboxView: Sendable, Codable {
        public var name: String
        public var pending: Int
        public var parked: Int
        public var isDraining: Bool
        public var isOnline: Bool
        public var entries: [Entry]
        /// An error reading the outbox, if it could not be read.
        public var error: String?

        public struct Entry: Sendable, Codable {
            public var id: String
            public var scope: String
            public var kind: String
            /// `pending`, or `parked: <reason>`.
            public var state: String
            public var attempts: Int
            public var queuedAt: Date
            public var lastFailure: String?
            /// `POST https://api.example.com/posts` for an HTTP write (secrets redacted).
            public var request: String?
            public var invalidates: [String]
        }
    }

    /// One circuit breaker and its state.
    public struct CircuitView: Sendable, Codable {
        public var name: String
        public var state: String
    }
}

/// A circuit breaker the inspector shows: any ``CircuitBreaker``.
public protocol InspectedCircuit: Sendable {
    var name: String { get }
    var state: CircuitState { get }
}

extension CircuitBreaker: InspectedCircuit {}

extension InspectorState.OutboxView {
    /// `outbox` as the inspector shows it.
    static func of(_ outbox: Outbox) async -> Self {
        let status = outbox.status
        var view = Self(
            name: outbox.name, pending: status.pending, parked: status.parked, isDraining: status.isDraining,
            isOnline: status.isOnline, entries: [])
        do {
            view.entries = try await outbox.entries().map { entry in
                Entry(
                    id: entry.idempotencyKey, scope: Redaction.redactingSecrets(inPath: entry.scope), kind: entry.kind,
                    state: entry.deadLetter.map { "parked: \(Redaction.redactingSecrets(in: "\($0.reason)"))" } ?? "pending", attempts: entry.attempts,
                    queuedAt: entry.queuedAt, lastFailure: entry.lastFailure.map { Redaction.redactingSecrets(in: $0.description) },
                    request: entry.request.map { "\($0.method) \(Redaction.redactedString(for: $0.url))" },
                    invalidates: entry.invalidates)
            }
        } catch {
            view.error = Redaction.redactingSecrets(in: "\(error)")
        }
        return view
    }
}
#endif
