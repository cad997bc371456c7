/// A lock per key that every process of a fleet sees: what lets one process load a key from the
/// remote while the others wait for its answer in the shared store; see
/// `coalescedAcrossProcesses(in:key:freshness:lock:timeout:pollInterval:)`.
///
/// `PostgresFleetLock` (StrataPostgres) is the shipped one: PostgreSQL advisory locks, which the
/// server releases when the holder's connection dies. A lock is about efficiency, never
/// correctness: a caller that cannot take it loads anyway.
public protocol FleetLock: Sendable {
    /// What proves a holder holds a key: given back to ``unlock(_:)``.
    associatedtype Hold: Sendable

    /// Tries to take the lock for `key` without waiting: the hold when this caller holds it now
    /// (and must ``unlock(_:)`` it), `nil` when someone else holds it, in this process or another.
    /// - Throws: when the lock cannot be asked (its database is unreachable): the caller loads
    ///   without it.
    nonisolated(nonsending) func tryLock(_ key: String) async throws -> Hold?

    /// Releases a lock `tryLock` gave. Never fails: a lock that cannot be released on purpose is
    /// released when its holder's connection ends, and a hold whose lock was lost meanwhile
    /// releases nothing.
    nonisolated(nonsending) func unlock(_ hold: Hold) async
}
