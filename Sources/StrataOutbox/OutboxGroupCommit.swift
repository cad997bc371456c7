import Foundation
@_spi(StrataInternals) import Strata

/// The decisions of the outbox's group commit, as a value with no tasks in it: which queued writes
/// are saved together.
///
/// A write queued while no save is on its way to disk is saved at once, alone, by its own caller.
/// Writes queued while one is (a burst: a form, a sync after editing offline) wait, and the moment
/// it ends they are saved together, at most `maxBatch` of them in one
/// ``OutboxStorage/save(contentsOf:)``: one transaction or one flush of the directory for them
/// all, the way a database's log commits a group. No write waits for more than the save in flight
/// and its own.
///
/// Invariants (checked by its seeded interleavings after every step): an id is in the batch in
/// flight, in the pending list, or in neither, never in two places at once; the pending list is
/// empty unless a batch is in flight; a batch holds at most `maxBatch` ids; every id submitted is
/// saved in exactly one batch, unless it was withdrawn before its batch started.
struct GroupCommitMachine: Sendable {
    /// The most writes one batch saves.
    let maxBatch: Int
    /// The batch being saved, or `nil` when none is.
    private(set) var inFlight: [UUID]?
    /// The writes waiting for the batch in flight to end, oldest first.
    private(set) var pending: [UUID] = []

    init(maxBatch: Int) {
        precondition(maxBatch > 0, "a batch holds at least one write")
        self.maxBatch = maxBatch
    }

    enum Submission: Sendable, Equatable {
        /// Nothing is being saved: the caller saves its write now, alone.
        case saveAlone
        /// A save is in flight: the write goes into the next batch.
        case wait
    }

    /// A write is ready to be saved.
    mutating func submit(_ id: UUID) -> Submission {
        guard inFlight != nil else {
            inFlight = [id]
            return .saveAlone
        }
        pending.append(id)
        return .wait
    }

    /// Takes the slot for a save of `id` alone, only when nothing is in flight (a write numbered
    /// and saved in one step): `true` when taken, to be ended with `finished()`.
    mutating func beginAlone(_ id: UUID) -> Bool {
        guard inFlight == nil else { return false }
        inFlight = [id]
        return true
    }

    /// The caller of `id` was cancelled. Returns `true` when it leaves (its batch had not started,
    /// so nothing of it was written); `false` when its save is already under way and the caller
    /// must wait for that save's outcome.
    mutating func withdraw(_ id: UUID) -> Bool {
        guard let index = pending.firstIndex(of: id) else { return false }
        pending.remove(at: index)
        return true
    }

    /// The batch in flight ended. Returns the next batch, now in flight, to save: the oldest
    /// pending writes, at most `maxBatch`. `nil` when none is pending.
    mutating func finished() -> [UUID]? {
        precondition(inFlight != nil, "no batch was in flight")
        guard !pending.isEmpty else {
            inFlight = nil
            return nil
        }
        let next = Array(pending.prefix(maxBatch))
        pending.removeFirst(next.count)
        inFlight = next
        return next
    }
}

/// Runs ``GroupCommitMachine`` for one ``Outbox``: the first save of each queued write goes
/// through here, so a burst of concurrent `enqueue` calls costs one storage commit per batch,
/// while each call still returns only when its own write is durable.
///
/// A write saved alone is saved in its caller's task, as a plain `save(_:)` would be (a cancelled
/// caller may cancel that save; the outbox then reads the write back). A batch is saved in a task
/// of its own, so that one cancelled caller cannot fail the writes of the others. A caller
/// cancelled while its write is pending leaves the batch (nothing of it is written) and gets
/// `CancellationError`; one cancelled while its batch is being saved waits for that save, which is
/// one bounded storage operation, so its answer stays exact.
final class OutboxGroupCommit: Sendable {
    private struct State: Sendable {
        var machine: GroupCommitMachine
        var entries: [UUID: OutboxEntry] = [:]
        var waiters: [UUID: CheckedContinuation<Result<Void, any Error>, Never>] = [:]
        /// Outcomes that arrived before their caller began to wait.
        var outcomes: [UUID: Result<Void, any Error>] = [:]
        /// Tests waiting for a number of writes to be pending (``waitUntilPending(_:)``).
        var pendingWatchers = ConditionWaiters<Int>()
    }

    private let state: Locked<State>
    private let storage: any OutboxStorage

    init(storage: any OutboxStorage, maxBatch: Int = 256) {
        self.storage = storage
        self.state = Locked(State(machine: GroupCommitMachine(maxBatch: maxBatch)))
    }

    /// Saves `entry` (a write's first save): alone when nothing else is being saved, otherwise in
    /// the next batch. Returns when it is durable; throws what the storage threw (the write may
    /// then be stored or not: read it back), or `CancellationError` when the caller was cancelled
    /// before its batch started (nothing of it was written).
    func save(_ entry: OutboxEntry) async throws {
        let submission = state.withLock { state in
            let submission = state.machine.submit(entry.id)
            if submission == .wait {
                state.entries[entry.id] = entry
                if !state.pendingWatchers.isEmpty { state.pendingWatchers.resumeSatisfied(by: state.machine.pending.count) }
            }
            return submission
        }
        switch submission {
        case .saveAlone:
            let result: Result<Void, any Error>
            do {
                try await storage.save(entry)
                result = .success(())
            } catch {
                result = .failure(error)
            }
            startNext()
            try result.get()
        case .wait:
            try await outcome(of: entry.id).get()
        }
    }

    /// Runs `save` as the save in flight, when nothing else is being saved (`nil` otherwise, and
    /// `save` does not run): writes queued meanwhile wait for it and go in the next batch.
    func saveAlone<T: Sendable>(_ id: UUID, _ save: () async -> T) async -> T? {
        guard state.withLock({ $0.machine.beginAlone(id) }) else { return nil }
        let result = await save()
        startNext()
        return result
    }

    /// The batch in flight ended: starts the next one, if any writes are pending.
    private func startNext() {
        guard let batch = state.withLock({ state -> [OutboxEntry]? in
            state.machine.finished().map { ids in ids.compactMap { state.entries.removeValue(forKey: $0) } }
        }) else { return }
        let storage = self.storage
        Task {
            let result: Result<Void, any Error>
            do {
                try await storage.save(contentsOf: batch)
                result = .success(())
            } catch {
                result = .failure(error)
            }
            self.state.withLock { state in
                for entry in batch { Self.deliver(result, to: entry.id, in: &state) }
            }
            self.startNext()
        }
    }

    /// The writes waiting for the next batch now.
    var pendingCount: Int { state.withLock { $0.machine.pending.count } }

    /// Waits until at least `count` writes wait for the next batch (for tests: a burst has piled
    /// up behind a save). Honours cancellation.
    func waitUntilPending(_ count: Int) async throws {
        let state = self.state
        let id = state.withLock { $0.pendingWatchers.makeID() }
        try await waitCancellably { continuation in
            state.withLock { state in
                state.pendingWatchers.wait(id, until: { $0 >= count }, current: state.machine.pending.count, continuation: continuation)
            }
        } withdraw: {
            state.withLock { _ = $0.pendingWatchers.withdraw(id, throwing: CancellationError()) }
        }
    }

    private static func deliver(_ result: Result<Void, any Error>, to id: UUID, in state: inout State) {
        if let waiter = state.waiters.removeValue(forKey: id) {
            waiter.resume(returning: result)
        } else {
            state.outcomes[id] = result
        }
    }

    /// Waits for the outcome of `id`'s batch; a cancelled caller leaves while the batch is pending.
    private func outcome(of id: UUID) async -> Result<Void, any Error> {
        let state = self.state
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                state.withLock { state in
                    if let outcome = state.outcomes.removeValue(forKey: id) {
                        continuation.resume(returning: outcome)
                    } else {
                        state.waiters[id] = continuation
                    }
                }
            }
        } onCancel: {
            state.withLock { state in
                guard state.machine.withdraw(id) else { return }  // being saved: its outcome comes
                state.entries[id] = nil
                Self.deliver(.failure(CancellationError()), to: id, in: &state)
            }
        }
    }
}
