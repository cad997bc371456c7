import Foundation

/// A key-value cache of timestamped entries: memory, files, user defaults, or a database.
///
/// ## Contract
/// Every conforming store passes `StoreContract` in `StrataTesting`:
/// - `retrieve` of a missing key returns `nil`; retrieving has no side effects on valid entries.
/// - `insert` replaces any previous entry for the key; `delete` of a missing key succeeds.
/// - `refresh` replaces an entry's `storedAt` and validators and keeps its value; for a missing key
///   it returns `false` and stores nothing.
/// - An entry that cannot be read back (corrupt, truncated, written by an incompatible version) is a
///   miss: `retrieve` returns `nil` and removes it. It is never a crash.
/// - A failed `insert` leaves the previous entry for that key intact.
/// - `removeAll` leaves nothing retrievable; the store stays usable, and a store with limits counts
///   them from zero again.
/// - `refresh` is atomic with respect to `insert` and `delete` on the same store: an insert that lands
///   while a refresh runs is never overwritten with the value the refresh read.
/// - Failures the store cannot hide (I/O errors, permissions) throw ``StoreError``.
/// - All methods may be called concurrently from any task.
/// - The requirements are `nonisolated(nonsending)` (SE-0461): they run on the caller's executor, so
///   a hit asked for on the main actor is answered there, without a hop to the global executor and
///   back. A store whose work blocks (file or database I/O) or costs real CPU time (decoding a large
///   value) moves that work off the caller's executor itself: mark the method `@concurrent`, or hand
///   the work to a thread of its own, as ``FileStore`` does. A conformance written with plain `async`
///   methods in a module that does not adopt SE-0461's default still satisfies the requirements;
///   it is then called with a hop.
public protocol Store<Key, Value>: Sendable {
    associatedtype Key: Hashable & Sendable
    associatedtype Value: Sendable

    /// The entry stored for `key`, or `nil` when there is none (or it was unreadable).
    nonisolated(nonsending) func retrieve(_ key: Key) async throws -> CacheEntry<Value>?
    /// The entry for `key` when the store can read it without suspending or blocking (it is held in
    /// memory); `nil` when there is none or reading it would take I/O.
    ///
    /// The hit path of a chain (``Loader/loadImmediately(_:in:)``) reads a store through this. The
    /// default answers `nil`: only a store that holds its entries in memory, such as ``MemoryStore``,
    /// implements it. It must agree with ``retrieve(_:)``: an entry it returns is the one `retrieve`
    /// would return at that moment.
    func immediateEntry(for key: Key) -> CacheEntry<Value>?
    /// Stores `entry` under `key`, replacing any previous entry.
    nonisolated(nonsending) func insert(_ entry: CacheEntry<Value>, for key: Key) async throws
    /// Removes the entry for `key`; succeeds when there is none.
    nonisolated(nonsending) func delete(_ key: Key) async throws
    /// Re-stamps the entry for `key` with `storedAt` and `validators` without rewriting its value
    /// (after the server confirmed it with HTTP 304); returns `false` when there is no entry.
    ///
    /// Implement it atomically: re-stamp under the same lock (or in the same transaction, or with one
    /// `UPDATE … WHERE key = ?`) that `insert` and `delete` take, so an `insert` that runs at the same
    /// time is never overwritten with the value this method read. The default implementation is not
    /// atomic (a read, then an insert: see its documentation in the `Store` extension).
    nonisolated(nonsending) func refresh(_ key: Key, storedAt: Date, validators: CacheValidators) async throws -> Bool

    /// Removes every entry (a "log out, clear caches" flow is one call per store). Afterwards nothing
    /// is retrievable, the store stays usable, and a store with limits counts them from zero again.
    /// - Throws: ``StoreError`` (`.delete`, no key) when entries could not be removed.
    nonisolated(nonsending) func removeAll() async throws

    /// The entries stored for `keys`, by key; a key with no (readable) entry is absent.
    ///
    /// The default reads the keys one by one. A store that can read many in one round trip
    /// (`PostgresStore`: one `SELECT … WHERE key = ANY(…)`; ``TieredStore``: the memory tier, then
    /// the shared tier once for the rest) implements it; see `loadingMany(in:freshness:)`.
    nonisolated(nonsending) func retrieveMany(_ keys: [Key]) async throws -> [Key: CacheEntry<Value>]

    /// The kind of source this store is, reported as the ``Provenance/origin`` of values it serves.
    ///
    /// Defaults to ``Origin/disk``; an in-memory or remote store of your own should say
    /// ``Origin/memory`` or ``Origin/sharedCache``.
    var origin: Origin { get }
}

extension Store {
    /// Reading takes I/O: the hit path asks ``retrieve(_:)``.
    @inlinable
    public func immediateEntry(for key: Key) -> CacheEntry<Value>? {
        nil
    }

    /// Stores `value` under `key`, stamped with `storedAt`.
    public func insert(_ value: Value, for key: Key, storedAt: Date, validators: CacheValidators = .none) async throws {
        try await insert(CacheEntry(value: value, storedAt: storedAt, validators: validators), for: key)
    }

    /// Reads the entry for `key` and inserts it again with `storedAt` and `validators`; `false` when
    /// there is no (readable) entry. Errors are the store's own, from the read or the write.
    ///
    /// - Important: This default is a read followed by a write, not one atomic step. An `insert` of
    ///   the same key that completes between the two is overwritten with the value read before it
    ///   (and a `delete` between the two is undone). Every store Strata ships implements `refresh`
    ///   atomically; a store of your own that may be written concurrently (a cache shared by several
    ///   tasks always is) should implement it too, under the lock or transaction its `insert` uses.
    public func refresh(_ key: Key, storedAt: Date, validators: CacheValidators) async throws -> Bool {
        guard var entry = try await retrieve(key) else { return false }
        entry.storedAt = storedAt
        entry.validators = validators
        try await insert(entry, for: key)
        return true
    }

    public var origin: Origin { .disk }

    /// Reads the keys one by one (each once).
    public func retrieveMany(_ keys: [Key]) async throws -> [Key: CacheEntry<Value>] {
        var entries: [Key: CacheEntry<Value>] = [:]
        for key in Set(keys) {
            if let entry = try await retrieve(key) { entries[key] = entry }
        }
        return entries
    }
}
