#if Postgres
import Foundation
import Logging
import PostgresNIO
@_spi(StrataInternals) import Strata

/// Counting, clearing and sweeping the table.
extension PostgresStore {


    /// The number of rows in the table.
    /// - Throws: `StoreError` (operation `retrieve`) when the database is unreachable.
    public var count: Int {
        get async throws {
            try await perform(.retrieve, key: nil) { [table] connection, logger in
                try await Self.singleInteger(connection.queryUnlessClosed(#"SELECT count(*) FROM "\#(unescaped: table)""#, logger: logger))
            }
        }
    }

    /// Removes every row (the table stays); announced as a change of every entry when the store
    /// announces its changes (``announceChanges(as:)``).
    /// - Throws: `StoreError` (operation `delete`) when the database is unreachable.
    public func removeAll() async throws {
        let (channel, notice) = announcement(.all, key: nil, at: now())
        try await perform(.delete, key: nil) { [table] connection, logger in
            try await Self.drain(connection.queryUnlessClosed("""
                WITH removed AS (DELETE FROM "\(unescaped: table)")
                SELECT pg_notify(\(channel), \(notice)) WHERE \(channel)::text IS NOT NULL
                """, logger: logger))
        }
    }

    /// Removes the rows stored strictly before `date` and returns how many there were.
    /// - Throws: `StoreError` (operation `delete`) when the database is unreachable.
    @discardableResult
    public func removeEntries(storedBefore date: Date) async throws -> Int {
        let seconds = date.timeIntervalSinceReferenceDate
        // `stored_at` (microseconds, truncated: monotonic) narrows the rows through its index;
        // `stored_at_seconds` makes the comparison exact.
        return try await perform(.delete, key: nil) { [table] connection, logger in
            try await Self.singleInteger(connection.queryUnlessClosed("""
                WITH removed AS (
                    DELETE FROM "\(unescaped: table)" WHERE stored_at <= \(date) AND stored_at_seconds < \(seconds) RETURNING 1
                )
                SELECT count(*) FROM removed
                """, logger: logger))
        }
    }

    /// Removes the rows nobody has inserted or read since `date` and returns how many there were.
    ///
    /// Reads refresh `last_access` at most once a minute, so this is exact to about a minute.
    /// - Throws: `StoreError` (operation `delete`) when the database is unreachable.
    @discardableResult
    public func removeEntries(lastAccessedBefore date: Date) async throws -> Int {
        try await perform(.delete, key: nil) { [table] connection, logger in
            try await Self.singleInteger(connection.queryUnlessClosed(
                #"WITH removed AS (DELETE FROM "\#(unescaped: table)" WHERE last_access < \#(date) RETURNING 1) SELECT count(*) FROM removed"#,
                logger: logger))
        }
    }

    /// Removes the rows read or written least recently until the values of the rest take at most
    /// `bytes` (their `size` column), and returns how many it removed: a byte budget for the
    /// table, kept by a sweep. Not announced, as the other sweeps are not. PostgreSQL reuses the
    /// space of removed rows for later ones (autovacuum), so the table's files stop growing at
    /// about the budget.
    /// - Throws: `StoreError` (operation `delete`) when the database is unreachable.
    @discardableResult
    public func removeEntries(toFitBytes bytes: Int) async throws -> Int {
        precondition(bytes >= 0, "removeEntries(toFitBytes:): the budget must not be negative")
        let budget = Int64(bytes)
        return try await perform(.delete, key: nil) { [table] connection, logger in
            try await Self.singleInteger(connection.queryUnlessClosed(#"""
                WITH ranked AS (
                    SELECT key, sum(size::int8) OVER (ORDER BY last_access DESC, key) AS kept FROM "\#(unescaped: table)"
                ), removed AS (
                    DELETE FROM "\#(unescaped: table)" WHERE key IN (SELECT key FROM ranked WHERE kept > \#(budget)) RETURNING 1
                )
                SELECT count(*) FROM removed
                """#, logger: logger))
        }
    }

    /// The total size of the values in the table, in bytes (the `size` column).
    /// - Throws: `StoreError` (operation `retrieve`) when the database is unreachable.
    public func storedBytes() async throws -> Int {
        try await perform(.retrieve, key: nil) { [table] connection, logger in
            try await Self.singleInteger(connection.queryUnlessClosed(
                #"SELECT coalesce(sum(size::int8), 0)::int8 FROM "\#(unescaped: table)""#, logger: logger))
        }
    }

    /// Removes the rows whose `expires_at` has passed (rows written by a store with a ``maxAge``)
    /// and returns how many there were. A store with a `maxAge` also does this by itself after
    /// inserts, at most once a minute.
    /// - Throws: `StoreError` (operation `delete`) when the database is unreachable.
    @discardableResult
    public func removeExpiredEntries() async throws -> Int {
        let now = now()
        return try await perform(.delete, key: nil) { [table] connection, logger in
            try await Self.singleInteger(connection.queryUnlessClosed(
                #"WITH removed AS (DELETE FROM "\#(unescaped: table)" WHERE expires_at <= \#(now) RETURNING 1) SELECT count(*) FROM removed"#,
                logger: logger))
        }
    }


    /// Whether this store (with a ``maxAge``) should sweep now; marks the sweep as done if so.
    func sweepIsDue(now: Date) -> Bool {
        guard maxAge != nil else { return false }
        return state.withLock { state in
            if let last = state.lastSweep, now >= last, now.timeIntervalSince(last) < Self.sweepInterval { return false }
            state.lastSweep = now
            return true
        }
    }

    /// The sweep after an insert: its own statement, so the insert stands whatever happens here. A
    /// failure is logged, not thrown (the insert succeeded).
    func sweepExpiredRows() async {
        do {
            let swept = try await removeExpiredEntries()
            if swept > 0 {
                logger.debug("swept expired cache rows", metadata: ["store": "\(description)", "count": "\(swept)"])
            }
        } catch {
            logger.warning("could not sweep expired cache rows", metadata: ["store": "\(description)", "error": "\(error)"])
        }
    }
}
#endif
