import Foundation
@_spi(StrataInternals) import Strata

extension Outbox {
    struct Registration: Sendable {
        var handler: Handler
        var conflicts: OutboxConflictPolicy
        var refreshAuthorization: (@Sendable () async throws -> Void)?
    }

    /// Registers the handler for writes of `kind`. Register every kind before `run()` or
    /// `drain()`: an entry whose kind has no handler is parked (``DeadLetter/Reason/unknownKind``),
    /// and goes back to the queue when its kind is registered later, even when the two happen at
    /// the same moment.
    /// - Parameters:
    ///   - kind: the name writes are queued under; the same in every process that drains the storage.
    ///   - conflicts: what a 409/412 (or an ``OutboxConflictError``) does to a write of this kind.
    ///   - refreshAuthorization: run after a 401, before the write is sent once more.
    ///   - handler: sends one write and returns a `Receipt`, or throws what went wrong.
    public func register(
        _ kind: String,
        conflicts: OutboxConflictPolicy = .manual,
        refreshAuthorization: (@Sendable () async throws -> Void)? = nil,
        handler: @escaping Handler
    ) {
        let revived = state.withLock { state -> [OutboxEntry] in
            state.registrations[kind] = Registration(handler: handler, conflicts: conflicts, refreshAuthorization: refreshAuthorization)
            return state.machine.register(kind)
        }
        guard !revived.isEmpty else { return }
        Task { await self.revive(revived) }
    }

    /// Registers a handler for writes of `kind` whose payload is `Write` as JSON (queued with
    /// `enqueue(_:kind:scope:host:baseVersion:id:invalidates:)`). A payload that does not decode parks the write
    /// (``DeadLetter/Reason/unreadablePayload``).
    public func register<Write: Decodable & Sendable>(
        _ kind: String, as type: Write.Type,
        conflicts: OutboxConflictPolicy = .manual,
        refreshAuthorization: (@Sendable () async throws -> Void)? = nil,
        handler: @escaping @Sendable (Write, Delivery) async throws -> Receipt
    ) {
        register(kind, conflicts: conflicts, refreshAuthorization: refreshAuthorization) { delivery in
            let write: Write
            do {
                write = try JSONDecoder().decode(Write.self, from: delivery.entry.payload)
            } catch {
                throw UnreadablePayload(detail: "not a \(Write.self): \(describeDecodingError(error))")
            }
            return try await handler(write, delivery)
        }
    }

    func registration(for kind: String) -> Registration? {
        state.withLock { $0.registrations[kind] }
    }

    /// Puts writes parked for want of a handler back in the queue; a failure is logged (they stay
    /// parked, and `retry(_:)` can put them back later). A write retried, discarded or revived
    /// meanwhile is left alone.
    func revive(_ entries: [OutboxEntry]) async {
        for entry in entries {
            do {
                guard try await requeue(entry.id, onlyIfUnknownKind: true) else { continue }
                logger.notice("outbox write requeued: its kind has a handler now", metadata: metadata(for: entry))
            } catch {
                logger.error("outbox could not requeue a write whose kind has a handler now", metadata: metadata(for: entry, error: error))
            }
        }
    }
}
