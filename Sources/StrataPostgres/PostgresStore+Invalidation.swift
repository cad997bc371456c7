#if Postgres
import Foundation
import PostgresNIO
@_spi(StrataInternals) import Strata

/// Tags, and invalidating many entries at once across the fleet.
extension PostgresStore: InvalidatingStore {
    /// Makes every later write tag its row with `tagger(key, value)`, so that
    /// ``invalidate(_:as:)`` can select it with ``CacheSelection/tag(_:)``.
    ///
    /// ```swift
    /// store.tagEntries { key, post in ["author:\(post.authorID)", "posts"] }
    /// try await store.invalidate(.tag("author:42"), as: .expire)
    /// ```
    ///
    /// A write replaces the row's tags with the new value's. Rows written before, or by a store
    /// without a tagger, carry none.
    public func tagEntries(with tagger: @escaping @Sendable (_ key: String, _ value: Value) -> [String]) {
        state.withLock { $0.tagger = tagger }
    }

    /// Expires or removes every row `selection` names, in one statement on the server, and
    /// announces it to the fleet (``announceChanges(as:)``) in that same statement: the other nodes'
    /// ``TieredStore``s hear it only if it committed, and empty their memory tiers.
    ///
    /// - ``InvalidationMode/expire`` sets each row's lifetime (``CacheValidators/maxAge``) to zero and
    ///   leaves its value and store time: reads find it stale (``CacheEntry/isExpired``), an HTTP chain
    ///   revalidates it, and a stale fallback may still serve it, within a bound counted from the
    ///   original store time.
    /// - ``InvalidationMode/remove`` deletes the rows.
    ///
    /// Only this store's table is touched: caches in other tables of the same database (other
    /// namespaces) are neither changed nor told. Rows of every ``formatVersion`` are invalidated.
    /// A key prefix is matched with `starts_with`, which reads the whole table; a tag uses the
    /// `tags` index.
    ///
    /// - Returns: how many rows were expired or removed.
    /// - Throws: `StoreError` (operation `refresh` to expire, `delete` to remove) when the database is
    ///   unreachable or the statement fails; nothing changed, and nothing was announced.
    @concurrent
    @discardableResult
    public func invalidate(_ selection: CacheSelection, as mode: InvalidationMode) async throws -> Int {
        let (channel, notice) = announcement(invalidating: selection, mode: mode, at: now())
        let operation: StoreError.Operation = mode == .expire ? .refresh : .delete
        let (tag, prefix): (String?, String?) = switch selection {
        case .all: (nil, nil)
        case .tag(let tag): (tag, nil)
        case .keyPrefix(let prefix): (nil, prefix)
        }
        // Expire ends the rows' lifetime and keeps them; remove deletes them. Same rows, same notice.
        let change = switch mode {
        case .expire: #"UPDATE "\#(table)" SET max_age_seconds = 0, max_age_attoseconds = 0"#
        case .remove: #"DELETE FROM "\#(table)""#
        }
        return try await perform(operation, key: nil) { connection, logger in
            // One statement: the rows change and the fleet is told, or neither.
            try await Self.singleInteger(connection.queryUnlessClosed("""
                WITH hit AS (
                    \(unescaped: change)
                    WHERE (\(tag)::text IS NULL OR tags @> ARRAY[\(tag)::text])
                      AND (\(prefix)::text IS NULL OR starts_with(key, \(prefix)::text))
                    RETURNING 1
                ), announced AS (
                    SELECT pg_notify(\(channel), \(notice)) WHERE \(channel)::text IS NOT NULL
                )
                SELECT (SELECT count(*) FROM hit) + 0 * (SELECT count(*) FROM announced)
                """, logger: logger))
        }
    }

    /// The channel and payload announcing an invalidation, or `(nil, nil)` when the store does not
    /// announce.
    func announcement(invalidating selection: CacheSelection, mode: InvalidationMode, at: Date)
        -> (channel: String?, payload: String?) {
        let (node, instance) = state.withLock { ($0.announcingNode, $0.announcingInstance) }
        guard let node else { return (nil, nil) }
        var notice = PostgresChangeNotice(key: nil, action: mode == .expire ? .expire : .remove, at: at, sender: node)
        notice.instance = instance
        switch selection {
        case .all: break
        case .tag(let tag): notice.tag = tag
        case .keyPrefix(let prefix): notice.prefix = prefix
        }
        return (changeChannel, notice.payload(logger: logger))
    }
}
#endif
