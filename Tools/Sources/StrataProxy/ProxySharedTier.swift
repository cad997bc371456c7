import Foundation
@_spi(StrataInternals) import Strata
import StrataPostgres

/// The shared tier of a proxy node: PostgreSQL (a fleet of nodes), a directory of files (one node
/// that keeps its cache across restarts), or nothing (one node on memory). One store type, so the
/// node's ``TieredStore`` is the same whichever it is.
struct ProxySharedTier: InvalidatingStore, NewestStoreTimeWins, CustomStringConvertible {
    typealias Key = String
    typealias Value = StoredResponse

    enum Backing: Sendable {
        case postgres(PostgresStore<StoredResponse>)
        case files(FileStore<StoredResponse>)
        case none
    }

    let backing: Backing

    var postgres: PostgresStore<StoredResponse>? {
        if case .postgres(let store) = backing { store } else { nil }
    }

    var description: String {
        switch backing {
        case .postgres(let store): "\(store)"
        case .files(let store): "\(store)"
        case .none: "no shared tier (memory only)"
        }
    }

    var origin: Origin {
        switch backing {
        case .postgres(let store): store.origin
        case .files(let store): store.origin
        case .none: .memory
        }
    }

    func retrieve(_ key: String) async throws -> CacheEntry<StoredResponse>? {
        switch backing {
        case .postgres(let store): try await store.retrieve(key)
        case .files(let store): try await store.retrieve(key)
        case .none: nil
        }
    }

    func insert(_ entry: CacheEntry<StoredResponse>, for key: String) async throws {
        _ = try await insertUnlessNewer(entry, for: key)
    }

    func insertUnlessNewer(_ entry: CacheEntry<StoredResponse>, for key: String) async throws -> Bool {
        switch backing {
        case .postgres(let store): return try await store.insertUnlessNewer(entry, for: key)
        case .files(let store):
            // One node writes its files: nothing newer can be there that its memory tier did not see.
            try await store.insert(entry, for: key)
            return true
        case .none: return true
        }
    }

    func delete(_ key: String) async throws {
        switch backing {
        case .postgres(let store): try await store.delete(key)
        case .files(let store): try await store.delete(key)
        case .none: break
        }
    }

    func delete(_ key: String, storedAtOrBefore time: Date) async throws {
        switch backing {
        case .postgres(let store): try await store.delete(key, storedAtOrBefore: time)
        case .files(let store): try await store.delete(key)
        case .none: break
        }
    }

    func refresh(_ key: String, storedAt: Date, validators: CacheValidators) async throws -> Bool {
        switch backing {
        case .postgres(let store): try await store.refresh(key, storedAt: storedAt, validators: validators)
        case .files(let store): try await store.refresh(key, storedAt: storedAt, validators: validators)
        case .none: false
        }
    }

    func removeAll() async throws {
        switch backing {
        case .postgres(let store): try await store.removeAll()
        case .files(let store): try await store.removeAll()
        case .none: break
        }
    }

    /// PostgreSQL invalidates on the server, for the whole fleet. A file tier does not index tags
    /// or keys: any invalidation removes all its files (a remove, whatever the mode), and the
    /// memory tier is emptied by the ``TieredStore``. Without a shared tier, only the memory tier
    /// is emptied.
    func invalidate(_ selection: CacheSelection, as mode: InvalidationMode) async throws -> Int {
        switch backing {
        case .postgres(let store): return try await store.invalidate(selection, as: mode)
        case .files(let store):
            try await store.removeAll()
            return 0
        case .none: return 0
        }
    }
}
