import Foundation
import Strata

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
}
