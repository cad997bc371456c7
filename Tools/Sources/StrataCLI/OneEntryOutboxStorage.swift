import Foundation
import Strata
import StrataOutbox

/// A view of an outbox storage that shows one entry: what `strata send` hands a second ``Outbox`` so
/// that its immediate attempt delivers the write it just queued and nothing else (not the writes
/// earlier commands queued, which may need credentials this command was not given).
///
/// Saves and removals go to the base storage; `loadAll` returns only the entry with ``id``.
struct OneEntryOutboxStorage: OutboxStorage, CustomStringConvertible {
    let base: any OutboxStorage
    let id: UUID

    func loadAll() async throws -> [OutboxEntry] {
        try await base.loadAll().filter { $0.id == id }
    }

    func save(_ entry: OutboxEntry) async throws {
        try await base.save(entry)
    }

    func remove(_ id: UUID) async throws {
        try await base.remove(id)
    }

    var description: String { "\(base), entry \(id.uuidString.lowercased())" }

    // Shared by processes: the attempt claims the entry's scope in the base storage like any drain,
    // and is not made while another process drains the scope or an earlier write waits in it.

    var isSharedByProcesses: Bool { base.isSharedByProcesses }

    func claim(scope: String, for claimant: OutboxClaimant, until expiresAt: Date, now: Date) async throws -> OutboxClaimOutcome {
        try await base.claim(scope: scope, for: claimant, until: expiresAt, now: now)
    }

    func release(scope: String, for claimant: OutboxClaimant) async throws {
        try await base.release(scope: scope, for: claimant)
    }

    /// The entry, when it is still stored and no other write of its scope is ahead of it (queued by
    /// another process since this command looked); nothing otherwise, so the attempt is not made.
    func entries(inScope scope: String) async throws -> [OutboxEntry] {
        let stored = try await base.entries(inScope: scope)
        guard let entry = stored.first(where: { $0.id == id }) else { return [] }
        let ahead = stored.contains { other in
            other.id != id && other.isPending
                && (other.sequence, other.id.uuidString) < (entry.sequence, entry.id.uuidString)
        }
        return ahead ? [] : [entry]
    }

    /// The view queues nothing: no other process's write is to be found through it.
    func lastSequenceIssued() async throws -> UInt64? { 0 }
}
