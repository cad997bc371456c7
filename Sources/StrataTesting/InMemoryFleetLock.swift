@_spi(StrataInternals) import Strata

/// A ``FleetLock`` held in memory: the "processes" of a test are loaders sharing one instance.
///
/// ```swift
/// let lock = InMemoryFleetLock()
/// let nodeA = remote.coalescedAcrossProcesses(in: shared, key: "feed", freshness: .maxAge(.seconds(5 * 60)), lock: lock)
/// ```
/// ``isUnavailable`` makes every `tryLock` throw, as an unreachable database does; ``breakHolds()``
/// drops every lock, as a holder's dying connection does.
public final class InMemoryFleetLock: FleetLock, Sendable {
    public struct Hold: Sendable, Hashable {
        public let key: String
        let token: UInt64
    }

    /// `tryLock` threw: the lock is unavailable.
    public struct Unavailable: Error, CustomStringConvertible {
        public var description: String { "the in-memory fleet lock is unavailable" }
    }

    private struct State {
        var holders: [String: UInt64] = [:]
        var lastToken: UInt64 = 0
        var unavailable = false
        var attempts = 0
        var grants = 0
    }

    private let state = Locked(State())

    public init() {}

    /// When `true`, `tryLock` throws ``Unavailable``.
    public var isUnavailable: Bool {
        get { state.withLock { $0.unavailable } }
        set { state.withLock { $0.unavailable = newValue } }
    }

    /// The keys held now.
    public var heldKeys: Set<String> { state.withLock { Set($0.holders.keys) } }
    /// How many times `tryLock` was asked, and how many times it granted the lock.
    public var attempts: Int { state.withLock { $0.attempts } }
    public var grants: Int { state.withLock { $0.grants } }

    /// Drops every lock, as when the holders' connections die: their later `unlock` releases nothing.
    public func breakHolds() {
        state.withLock { $0.holders = [:] }
    }

    public func tryLock(_ key: String) async throws -> Hold? {
        try state.withLock { state in
            state.attempts += 1
            if state.unavailable { throw Unavailable() }
            guard state.holders[key] == nil else { return nil }
            state.lastToken += 1
            state.grants += 1
            state.holders[key] = state.lastToken
            return Hold(key: key, token: state.lastToken)
        }
    }

    public func unlock(_ hold: Hold) async {
        state.withLock { state in
            if state.holders[hold.key] == hold.token { state.holders[hold.key] = nil }
        }
    }
}
