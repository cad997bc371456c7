import Foundation

/// Which entries of a store an invalidation acts on.
public enum CacheSelection: Sendable, Hashable, CustomStringConvertible {
    /// Every entry of the store (of its table, for a shared store: other caches in the same
    /// database are never touched).
    case all
    /// The entries written with this tag (see `PostgresStore.tagEntries(with:)`).
    case tag(String)
    /// The entries whose key starts with this prefix.
    case keyPrefix(String)

    public var description: String {
        switch self {
        case .all: "every entry"
        case .tag(let tag): "tag \(tag)"
        case .keyPrefix(let prefix): "keys starting with \(prefix)"
        }
    }
}

/// What an invalidation does to the entries it selects.
public enum InvalidationMode: String, Sendable, Hashable, CaseIterable {
    /// The entries stay, marked expired: their lifetime (``CacheValidators/maxAge``) becomes zero, so
    /// every freshness policy but ``FreshnessPolicy/any`` finds them stale, an HTTP chain revalidates
    /// them, and the fallback tiers (``Loader/servingStaleOnError(in:key:maxStale:)``) may still
    /// serve them. Their store time is untouched, so no staleness bound is extended.
    case expire
    /// The entries are removed.
    case remove
}

/// An invalidation one node of a fleet made, as its backplane tells the others: which entries,
/// expire or remove, when, and which node. A node empties its memory tier of the copies it may
/// hold, and reads the shared store again.
public struct CacheInvalidation: Sendable, Hashable {
    /// The entries it acts on.
    public var selection: CacheSelection
    /// Expire or remove.
    public var mode: InvalidationMode
    /// When it happened.
    public var at: Date
    /// The name of the node that made it (``Backplane/node``), for logs.
    public var sender: String
    /// The instance that made it (``Backplane/instance``): a node ignores its own instance's.
    /// `nil` from a sender that does not set one; the name is then compared instead.
    public var instance: String?

    public init(selection: CacheSelection, mode: InvalidationMode, at: Date, sender: String, instance: String? = nil) {
        self.selection = selection
        self.mode = mode
        self.at = at
        self.sender = sender
        self.instance = instance
    }
}

/// A store that can expire or remove a selection of its entries in one operation: by tag, by key
/// prefix, or all of them. `PostgresStore` does it in one statement on the server, announced to the
/// fleet in the same statement; ``TieredStore`` does it on its shared tier, then empties its memory
/// tier.
public protocol InvalidatingStore: Store {
    /// Expires or removes the entries `selection` names.
    /// - Returns: how many entries the store expired or removed.
    /// - Throws: ``StoreError`` when the store cannot do it; no entry is then changed.
    func invalidate(_ selection: CacheSelection, as mode: InvalidationMode) async throws -> Int
}

extension CacheEntry {
    /// Whether an invalidation (``InvalidationMode/expire``), or a server's `max-age=0`, ended this
    /// entry's lifetime: its ``CacheValidators/maxAge`` is zero. Such an entry is stale under every
    /// freshness policy but ``FreshnessPolicy/any``.
    @inlinable
    public var isExpired: Bool { validators.maxAge == .zero }
}
