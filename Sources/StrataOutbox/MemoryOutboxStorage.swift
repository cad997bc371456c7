import Foundation
@_spi(StrataInternals) import Strata

/// Entries in memory: gone when the process ends. For previews, tests and writes that may be lost.
public final class MemoryOutboxStorage: OutboxStorage, CustomStringConvertible {
    private let entries = Locked<[UUID: OutboxEntry]>([:])

    /// An empty storage.
    public init() {}

    public func loadAll() async throws -> [OutboxEntry] { entries.withLock { Array($0.values) } }
    public func save(_ entry: OutboxEntry) async throws { entries.withLock { $0[entry.id] = entry } }
    public func remove(_ id: UUID) async throws { _ = entries.withLock { $0.removeValue(forKey: id) } }
    public func entry(_ id: UUID) async throws -> OutboxEntry? { entries.withLock { $0[id] } }

    public var description: String { "MemoryOutboxStorage" }
}
