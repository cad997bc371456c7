#if Postgres
/// What a ``PostgresFleetLock`` decides about its keys: which this process holds, which it is
/// asking the database for, on which connection, and for whom.
///
/// PostgreSQL's session advisory locks are re-entrant: a second `pg_try_advisory_lock` on the
/// connection that holds a key succeeds again. So the book answers a second local request for a
/// key that is held, or being asked for, with "busy" without asking the database, and counts every
/// lock against the connection that took it: when that connection is lost, so are its locks, and a
/// late release by their holder never releases a lock someone took since.
///
/// Pure: no tasks, no connection. Tests drive it alone through seeded random interleavings.
struct FleetLockBook: Sendable {
    /// Who asked: each request gets a number of its own.
    typealias Token = UInt64

    struct Claim: Equatable, Sendable {
        var token: Token
        var connection: UInt64
    }

    /// The number of the current connection; a lost connection ends its number.
    private(set) var connection: UInt64 = 0
    /// The keys this process holds.
    private(set) var held: [String: Claim] = [:]
    /// The keys being asked for.
    private(set) var asking: [String: Claim] = [:]
    private var lastToken: Token = 0

    enum TryDecision: Equatable, Sendable {
        /// Someone in this process holds or asks for it: not held, and the database is not asked.
        case busy
        /// Ask the database on connection `connection`; the answer and the release quote `token`.
        case ask(token: Token, connection: UInt64)
    }

    mutating func tryRequested(_ key: String) -> TryDecision {
        guard held[key] == nil, asking[key] == nil else { return .busy }
        lastToken += 1
        asking[key] = Claim(token: lastToken, connection: connection)
        return .ask(token: lastToken, connection: connection)
    }

    /// The database answered request `token` (or the question failed: `granted` false). Whether
    /// the key is held now: a grant on a connection lost since is no lock.
    mutating func answered(_ key: String, token: Token, granted: Bool) -> Bool {
        guard let claim = asking[key], claim.token == token else { return false }
        asking[key] = nil
        guard granted, claim.connection == connection else { return false }
        held[key] = claim
        return true
    }

    enum ReleaseDecision: Equatable, Sendable {
        /// Nothing to release (the connection that held it was lost, or `token` does not hold it).
        case nothing
        /// Unlock it on the database, on connection `connection`.
        case unlock(connection: UInt64)
    }

    mutating func released(_ key: String, token: Token) -> ReleaseDecision {
        guard let claim = held[key], claim.token == token else { return .nothing }
        held[key] = nil
        return claim.connection == connection ? .unlock(connection: claim.connection) : .nothing
    }

    /// Connection `lost` is gone, and its locks with it; the next question goes to a new one.
    mutating func connectionLost(_ lost: UInt64) {
        guard lost == connection else { return }
        connection += 1
        held = held.filter { $0.value.connection != lost }
    }
}
#endif
