import Foundation

/// What one node of a fleet tells the others after it changed an entry of the shared store: the
/// key, what happened, when, and which node did it. Never the value: a node that holds the key
/// reads the shared store again when it needs it.
public struct CacheChange: Sendable, Hashable {
    /// What happened to the entry.
    public enum Action: String, Sendable, Hashable, CaseIterable {
        /// A value was stored (inserted, or re-stamped after a revalidation).
        case set
        /// The entry was removed.
        case remove
        /// The entry was marked expired: a stale copy the fallback tiers may still serve. A node
        /// treats it as `remove` in its memory tier. (`PostgresStore` sends `set` and `remove` for
        /// one key; it expires entries by tag, prefix or all at once, announced as
        /// ``BackplaneEvent/invalidated(_:)``.)
        case expire
    }

    /// The entry's key in the shared store.
    public var key: String
    /// What happened to it.
    public var action: Action
    /// For `set`, the store time of the value written; for `remove` and `expire`, when it
    /// happened. A node acts only on a copy older than this.
    public var at: Date
    /// The name of the node that made the change (``Backplane/node``), for logs.
    public var sender: String
    /// The instance that made the change (``Backplane/instance``), random per backplane: a node
    /// ignores the changes of its own instance, so nodes that share a name (every container's
    /// process is PID 1) still hear each other. `nil` from a sender that does not set one; the
    /// name is then compared instead.
    public var instance: String?

    public init(key: String, action: Action, at: Date, sender: String, instance: String? = nil) {
        self.key = key
        self.action = action
        self.at = at
        self.sender = sender
        self.instance = instance
    }
}

/// What a ``Backplane`` delivers.
public enum BackplaneEvent: Sendable, Hashable {
    /// Another node (or this one) changed an entry.
    case changed(CacheChange)
    /// A node changed every entry (it cleared the store), or one whose key the notification could
    /// not carry: every copy older than `at` is suspect. `sender` and `instance` are as in
    /// ``CacheChange``.
    case changedAll(at: Date, sender: String, instance: String?)
    /// Another node (or this one) expired or removed a selection of entries: by tag, by key prefix,
    /// or all of them (``InvalidatingStore``).
    case invalidated(CacheInvalidation)
    /// The backplane (re)started listening. Changes made while it was not listening were missed:
    /// every copy a node held before this may be stale.
    case listening
}

/// How the nodes of a fleet that share one store hear about each other's writes, so that each
/// node's memory tier stops serving a value another node replaced; see ``TieredStore``.
///
/// `PostgresBackplane` (StrataPostgres) is the shipped one: `LISTEN/NOTIFY` on the database that
/// holds the shared store, each notification sent in the same transaction as its write.
public protocol Backplane: Sendable {
    /// This node's name, carried as ``CacheChange/sender`` by the changes its writes announce:
    /// for logs and people. Nodes may share one.
    var node: String { get }
    /// This backplane's own random identity, carried as ``CacheChange/instance``: the one a
    /// node compares to recognise its own changes. The default is ``node``, for a backplane whose
    /// nodes have unique names.
    var instance: String { get }
    /// The events from now on, starting with ``BackplaneEvent/listening`` once the backplane
    /// listens. The sequence ends when the backplane stops or the consuming task is cancelled.
    func events() -> AsyncStream<BackplaneEvent>
}

extension Backplane {
    public var instance: String { node }
}

extension CacheChange {
    /// Whether this change was made by the backplane instance `instance` named `node`: by
    /// instance when the change carries one, else by name.
    public func isOwn(instance own: String, node: String) -> Bool {
        instance.map { $0 == own } ?? (sender == node)
    }
}

extension CacheInvalidation {
    /// Whether this invalidation was made by the backplane instance `instance` named `node`.
    public func isOwn(instance own: String, node: String) -> Bool {
        instance.map { $0 == own } ?? (sender == node)
    }
}
