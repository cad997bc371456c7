#if Postgres
import Foundation
import Logging
import PostgresNIO
@_spi(StrataInternals) import Strata

/// Announcing writes to the other nodes of a fleet: `NOTIFY` in the statement that writes.
extension PostgresStore {
    /// The `LISTEN/NOTIFY` channel of this store's table: `strata_` and the table name, so caches
    /// in other tables of the same database never hear each other.
    public var changeChannel: String { "strata_\(table)" }

    /// Makes every later write of this store announce itself on ``changeChannel`` as `node`, in the
    /// same statement as the write: a notification is delivered only if its write commits, and a
    /// write never commits without it. A `PostgresBackplane` made for the store calls this; call it
    /// yourself in a process that writes the cache without listening (a worker that fills it).
    ///
    /// The sweeps (``removeExpiredEntries()``, ``removeEntries(storedBefore:)``,
    /// ``removeEntries(lastAccessedBefore:)``) are not announced: a node's memory copy of a swept row
    /// is as old as the row was, and its freshness is judged by that same store time.
    ///
    /// - Parameters:
    ///   - node: the name the notifications carry (``CacheChange/sender``), for logs.
    ///   - instance: the identity they carry (``CacheChange/instance``); the backplane instance
    ///     that listens as `instance` ignores them. By default, `node`: give a random one when
    ///     nodes may share a name (a `PostgresBackplane` does).
    public func announceChanges(as node: String, instance: String? = nil) {
        state.withLock {
            $0.announcingNode = node
            $0.announcingInstance = instance
        }
    }

    /// The sender this store's writes announce themselves as, or `nil` when they are not announced.
    public var announcingNode: String? { state.withLock { $0.announcingNode } }

    /// The identity this store's writes announce themselves with (``announceChanges(as:instance:)``).
    public var announcingInstance: String? { state.withLock { $0.announcingInstance } }

    /// The channel and payload of the notification announcing `action` on `key` at `at`, or
    /// `(nil, nil)` when the store does not announce (the statement's `WHERE` then skips `pg_notify`).
    func announcement(_ action: PostgresChangeNotice.Action, key: String?, at: Date) -> (channel: String?, payload: String?) {
        let (node, instance) = state.withLock { ($0.announcingNode, $0.announcingInstance) }
        guard let node else { return (nil, nil) }
        var notice = PostgresChangeNotice(key: key, action: action, at: at, sender: node)
        notice.instance = instance
        return (changeChannel, notice.payload(logger: logger))
    }
}

/// A notification as it travels on the channel: compact JSON, never the value.
///
/// `{"i":"3f2a…","k":"feed","a":"set","t":786000000.5,"s":"node-1"}`. `i` is the sender's random
/// instance (absent when the sender sets none), `t` the exact `Date` (seconds since
/// 2001, as `stored_at_seconds`). An invalidation of many entries carries no key: a tag (`g`), a key
/// prefix (`p`), or neither for every entry, with `a` `expire` or `remove`. A key, tag or prefix too
/// long for PostgreSQL's 8,000-byte payload limit is left out and the action becomes `all`: every
/// listener then treats all its copies as suspect.
struct PostgresChangeNotice: Codable, Sendable, Hashable {
    enum Action: String, Codable, Sendable {
        case set, remove, expire
        /// Every entry, or one whose key did not fit.
        case all
    }

    var key: String?
    var action: Action
    var at: Date
    var sender: String
    /// The sender's instance (``CacheChange/instance``).
    var instance: String?
    /// The tag of an invalidation by tag.
    var tag: String?
    /// The key prefix of an invalidation by prefix.
    var prefix: String?

    enum CodingKeys: String, CodingKey {
        case key = "k", action = "a", at = "t", sender = "s", tag = "g", prefix = "p", instance = "i"
    }

    init(key: String?, action: Action, at: Date, sender: String) {
        self.key = key
        self.action = action
        self.at = at
        self.sender = sender
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        key = try container.decodeIfPresent(String.self, forKey: .key)
        action = try container.decode(Action.self, forKey: .action)
        at = Date(timeIntervalSinceReferenceDate: try container.decode(Double.self, forKey: .at))
        sender = try container.decode(String.self, forKey: .sender)
        instance = try container.decodeIfPresent(String.self, forKey: .instance)
        tag = try container.decodeIfPresent(String.self, forKey: .tag)
        prefix = try container.decodeIfPresent(String.self, forKey: .prefix)
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(key, forKey: .key)
        try container.encode(action, forKey: .action)
        try container.encode(at.timeIntervalSinceReferenceDate, forKey: .at)
        try container.encode(sender, forKey: .sender)
        try container.encodeIfPresent(instance, forKey: .instance)
        try container.encodeIfPresent(tag, forKey: .tag)
        try container.encodeIfPresent(prefix, forKey: .prefix)
    }

    /// PostgreSQL refuses a payload of 8,000 bytes or more.
    static let payloadLimit = 7_999

    /// The payload; a key that does not fit is replaced by `all` (logged).
    func payload(logger: Logger) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        if let data = try? encoder.encode(self), data.count <= Self.payloadLimit {
            return String(decoding: data, as: UTF8.self)
        }
        logger.warning(
            "a key too long for a notification: the change is announced as a change of every entry",
            metadata: ["key": "\((key ?? tag ?? prefix).map { String($0.prefix(80)) } ?? "")…", "sender": "\(sender)"])
        var all = PostgresChangeNotice(key: nil, action: .all, at: at, sender: String(sender.prefix(200)))
        all.instance = instance.map { String($0.prefix(200)) }
        return String(decoding: (try? encoder.encode(all)) ?? Data(), as: UTF8.self)
    }

    /// The notice in `payload`, or `nil` when it is not one.
    static func parse(_ payload: String) -> PostgresChangeNotice? {
        try? JSONDecoder().decode(PostgresChangeNotice.self, from: Data(payload.utf8))
    }

    /// The event a listener delivers for this notice.
    var event: BackplaneEvent {
        switch (action, key) {
        case (.set, let key?): .changed(CacheChange(key: key, action: .set, at: at, sender: sender, instance: instance))
        case (.remove, let key?): .changed(CacheChange(key: key, action: .remove, at: at, sender: sender, instance: instance))
        case (.expire, let key?): .changed(CacheChange(key: key, action: .expire, at: at, sender: sender, instance: instance))
        case (.expire, nil), (.remove, nil):
            .invalidated(CacheInvalidation(
                selection: tag.map(CacheSelection.tag) ?? prefix.map(CacheSelection.keyPrefix) ?? .all,
                mode: action == .expire ? .expire : .remove, at: at, sender: sender, instance: instance))
        default: .changedAll(at: at, sender: sender, instance: instance)
        }
    }
}
#endif
