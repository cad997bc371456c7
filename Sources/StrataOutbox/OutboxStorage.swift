import Foundation
@_spi(StrataInternals) import Strata

/// Where an ``Outbox`` keeps its entries so they survive the process: a directory
/// (``FileOutboxStorage``), a SQLite file (`SQLiteOutboxStorage`, StrataSQLite), PostgreSQL
/// (`PostgresOutboxStorage`, StrataPostgres), or memory (``MemoryOutboxStorage``, for previews and tests).
///
/// ## Contract
/// - `save(_:)` is durable and atomic: when it returns, the entry survives a crash or power loss,
///   and a crash during it leaves either the previous version of the entry or the new one, never a
///   torn mix. A failed save leaves the previous version.
/// - `save(contentsOf:)` saves several entries as `save(_:)` saves one: when it returns, every one of
///   them is durable. It is how the ``Outbox`` group-commits the writes queued while another save is
///   on its way to disk, so a storage should make it one flush or one transaction. When it throws,
///   each entry is either stored or not (the outbox reads each back), each one whole.
/// - `saveAttempt(_:)` and `removeDelivered(_:)` are the drain's two writes per delivery. Each must
///   survive the process being killed (and leave the entry whole), but may be lost to a power
///   failure, so a storage can skip its flush: a lost attempt count makes the write be sent once
///   more, and a lost removal makes it be sent again with its idempotency key, which the server
///   answers from its record. They default to `save(_:)` and `remove(_:)`.
///   `saveAttempt(_:removingDelivered:)` is the two in one step: a drain removes a delivered write
///   together with the next write's attempt, so a storage with transactions should commit both at
///   once (one commit per delivery instead of two). It defaults to the removals, then `saveAttempt(_:)`.
/// - `remove(_:)` of a missing id succeeds.
/// - A save of an entry exactly as already stored (a retried save) leaves one entry, unchanged.
/// - `loadAll()` returns every entry saved and not removed, in any order. An entry it cannot read
///   back is set aside where an operator can find it (and logged), never deleted and never a crash.
/// - `entry(_:)` agrees with `loadAll()` for one id: the latest version saved, or `nil` when the
///   id was never saved, was removed, or its entry cannot be read back (set aside as by `loadAll()`).
/// - Failures throw `StoreError`.
///
/// ## Shared by processes
/// A storage that several processes open at once (an app and its extensions in an App Group, two
/// workers, `strata outbox drain` beside a running app) says so with `isSharedByProcesses` and
/// implements the four calls below, each one short, bounded operation under whatever makes it atomic
/// across processes (a file lock, a transaction), never held while a write is being sent:
/// - `claim(scope:for:until:now:)` / `release(scope:for:)`: a scope is drained by one
///   ``Outbox`` at a time, whatever its process, with ``OutboxClaimRule`` deciding. A claim lapses
///   at its date unless renewed, and sooner when its holder's process is known to be gone.
/// - `entries(inScope:)`: what the storage holds for a scope now, read right after a claim so
///   the drainer sends neither what another process delivered nor older versions of what it changed.
/// - `nextSequence(after:)`: sequences that increase across every process, so writes queued by
///   different processes into one scope are delivered in the order they were acknowledged.
///
/// ``FileOutboxStorage``, `SQLiteOutboxStorage` and `PostgresOutboxStorage` are shared by processes.
/// A storage that is not (``MemoryOutboxStorage``, and the defaults for your own) must have one
/// outbox draining it at a time.
public protocol OutboxStorage: Sendable {
    /// Every entry, in any order.
    func loadAll() async throws -> [OutboxEntry]
    /// Inserts `entry`, or replaces the entry with its id.
    func save(_ entry: OutboxEntry) async throws
    /// Inserts or replaces every entry of `entries` (distinct ids), durably when it returns: one
    /// flush or one transaction for all of them. The default saves them one by one.
    func save(contentsOf entries: [OutboxEntry]) async throws
    /// Saves a write whose attempt count or next attempt changed (before a send, after a failed
    /// one): durable against the process being killed, not necessarily against power loss.
    func saveAttempt(_ entry: OutboxEntry) async throws
    /// Removes a delivered write: durable against the process being killed, not necessarily
    /// against power loss. Succeeds when there is none.
    func removeDelivered(_ id: UUID) async throws
    /// Removes the delivered writes `delivered` and saves `entry`'s attempt, as
    /// `removeDelivered(_:)` for each then `saveAttempt(_:)` would, in one step where the storage can.
    /// When it throws, `entry` is stored in its previous version or its new one, and each of
    /// `delivered` is removed or not.
    func saveAttempt(_ entry: OutboxEntry, removingDelivered delivered: [UUID]) async throws
    /// Removes the entry with `id`; succeeds when there is none.
    func remove(_ id: UUID) async throws
    /// The entry with `id` as stored now, or `nil` when there is none. The ``Outbox`` reads an entry
    /// back after a save whose outcome it cannot know (the save threw, timed out or was cancelled,
    /// and may have committed all the same), so that `enqueue` answers "queued" or "not queued",
    /// never a guess. The default reads every entry; a storage with an index should answer directly.
    func entry(_ id: UUID) async throws -> OutboxEntry?

    /// Whether other processes may use this storage at the same time: the ``Outbox`` then claims each
    /// scope before draining it and reads the scope back after claiming it. `false` by default.
    var isSharedByProcesses: Bool { get }
    /// Claims `scope` for `claimant` until `expiresAt`, or renews its claim, unless another live
    /// claimant holds it (``OutboxClaimRule``). The default (a storage of one process) always claims.
    func claim(scope: String, for claimant: OutboxClaimant, until expiresAt: Date, now: Date) async throws -> OutboxClaimOutcome
    /// Gives up `claimant`'s claim on `scope`, if it still holds it. The default does nothing.
    func release(scope: String, for claimant: OutboxClaimant) async throws
    /// Every entry of `scope`, in any order. The default filters `loadAll()`.
    func entries(inScope scope: String) async throws -> [OutboxEntry]
    /// A sequence for a new write, greater than `after` and than every sequence this storage gave any
    /// process before. The default (one process) is `after + 1`.
    func nextSequence(after: UInt64) async throws -> UInt64
    /// Numbers a new write and saves it in one step, as `nextSequence(after:)` then `save(_:)`
    /// would: `entry` gets the sequence issued and returns the entry to save with it, or `nil` to
    /// save nothing (the sequence is spent all the same). Returns what was saved. A storage that can
    /// do both in one transaction should (one commit per write instead of two); the default calls
    /// the two. When it throws after `entry` returned an entry, that entry may be stored or not.
    func saveNumbered(after: UInt64, _ entry: @escaping @Sendable (UInt64) -> OutboxEntry?) async throws -> OutboxEntry?
    /// The last sequence `nextSequence(after:)` gave any process, or `nil` when unknown (the
    /// default). A drain reads every entry for writes other processes queued only when it is past
    /// this process's own last one.
    func lastSequenceIssued() async throws -> UInt64?
}

extension OutboxStorage {
    public func entry(_ id: UUID) async throws -> OutboxEntry? {
        try await loadAll().first { $0.id == id }
    }

    public func save(contentsOf entries: [OutboxEntry]) async throws {
        for entry in entries { try await save(entry) }
    }

    public func saveAttempt(_ entry: OutboxEntry) async throws { try await save(entry) }

    public func removeDelivered(_ id: UUID) async throws { try await remove(id) }

    public func saveAttempt(_ entry: OutboxEntry, removingDelivered delivered: [UUID]) async throws {
        for id in delivered { try await removeDelivered(id) }
        try await saveAttempt(entry)
    }

    public var isSharedByProcesses: Bool { false }

    public func claim(scope: String, for claimant: OutboxClaimant, until expiresAt: Date, now: Date) async throws -> OutboxClaimOutcome {
        .claimed
    }

    public func release(scope: String, for claimant: OutboxClaimant) async throws {}

    public func entries(inScope scope: String) async throws -> [OutboxEntry] {
        try await loadAll().filter { $0.scope == scope }
    }

    public func nextSequence(after: UInt64) async throws -> UInt64 { after &+ 1 }

    public func saveNumbered(after: UInt64, _ entry: @escaping @Sendable (UInt64) -> OutboxEntry?) async throws -> OutboxEntry? {
        guard let numbered = entry(try await nextSequence(after: after)) else { return nil }
        try await save(numbered)
        return numbered
    }

    public func lastSequenceIssued() async throws -> UInt64? { nil }
}
