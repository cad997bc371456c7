import Foundation
@_spi(StrataInternals) import Strata

extension Outbox {
    /// Puts a parked write back in the queue, at the end of its scope's queue, due now, its attempt
    /// count reset (the retention's age counts from now).
    /// - Throws: ``OutboxError/notFound(_:)``, ``OutboxError/notParked(_:)``, ``OutboxError/busy(_:)``
    ///   (a discard or another retry of it is under way), ``OutboxError/storage(_:)``.
    public func retry(_ id: UUID) async throws {
        try await ensureLoaded()
        _ = try await requeue(id, onlyIfUnknownKind: false)
        if let entry = state.withLock({ $0.machine.records[id]?.entry }) {
            logger.notice("outbox write retried from the dead letters", metadata: metadata(for: entry))
        }
    }

    /// Removes a parked write for good: the only way a write leaves the outbox undelivered. Logged
    /// (with its kind and scope) and counted. Once it returns, nothing brings the write back: a
    /// retry or a revival racing it fails or is skipped.
    /// - Throws: ``OutboxError/notFound(_:)``, ``OutboxError/notParked(_:)`` (a pending write is not
    ///   discarded while it may be in flight), ``OutboxError/busy(_:)``, ``OutboxError/storage(_:)``.
    public func discard(_ id: UUID) async throws {
        try await ensureLoaded()
        let entry: OutboxEntry
        switch state.withLock({ $0.machine.beginDiscard(id) }) {
        case .success(let parked): entry = parked
        case .failure(let error): throw error.outboxError(id)
        }
        do {
            try await storage.remove(id)
        } catch {
            state.withLock { $0.machine.discardFinished(id, removed: false) }
            metrics.storageFailures.increment()
            throw OutboxError.storage(error)
        }
        state.withLock { state in
            state.machine.discardFinished(id, removed: true)
            state.writeEvents.append(.discarded(entry))
        }
        await reportWriteEvents()
        metrics.discarded(.discardedByRequest).increment()
        logger.notice("outbox dead letter discarded", metadata: metadata(for: entry))
        changed()
    }

    /// Saves a parked write as pending again; `false` when `onlyIfUnknownKind` and it is no longer a
    /// write parked for want of a handler (or no longer there).
    func requeue(_ id: UUID, onlyIfUnknownKind: Bool) async throws -> Bool {
        let now = environment.now()
        // Shared by processes: the storage numbers the write's new place at the end of the queue, as
        // it numbers every write queued (`enqueue`).
        let sequence = try await sequenceIssuedByStorage()
        let begun = state.withLock {
            $0.machine.beginRequeue(id, now: now, onlyIfUnknownKind: onlyIfUnknownKind, sequence: sequence)
        }
        let entry: OutboxEntry
        switch begun {
        case .success(let requeued): entry = requeued
        case .failure where onlyIfUnknownKind: return false
        case .failure(let error): throw error.outboxError(id)
        }
        do {
            try await storage.save(entry)
        } catch {
            state.withLock { $0.machine.requeueFinished(id, saved: false) }
            metrics.storageFailures.increment()
            throw OutboxError.storage(error)
        }
        state.withLock { state in
            state.machine.requeueFinished(id, saved: true)
            state.writeEvents.append(.queued(entry))
        }
        await reportWriteEvents()
        changed()
        wake()
        return true
    }
}

extension OutboxStateMachine.OperatorError {
    func outboxError(_ id: UUID) -> OutboxError {
        switch self {
        case .notFound: .notFound(id)
        case .notParked: .notParked(id)
        case .busy: .busy(id)
        }
    }
}
