#if Postgres
import Foundation
import PostgresNIO
@_spi(StrataInternals) import Strata

/// The store's table: its name's rules, and creating it (safely while other processes do the same).
extension PostgresStore {
    /// Creates the table and its indexes, safely while other processes do the same. Runs inside the
    /// transaction ``prepare(on:)`` opens, once per store.
    func createTable(on connection: PostgresConnection) async throws {
        let table = table
        let lockKey = "strata.table.\(table)"
        // Concurrent CREATE TABLE IF NOT EXISTS can still collide in the catalog; the lock serialises them.
        try await connection.queryUnlessClosed("SELECT pg_advisory_xact_lock(hashtext(\(lockKey)))", logger: logger)
        try await connection.queryUnlessClosed("""
            CREATE TABLE IF NOT EXISTS "\(unescaped: table)" (
                key TEXT PRIMARY KEY,
                value BYTEA NOT NULL,
                stored_at TIMESTAMPTZ NOT NULL,
                stored_at_seconds DOUBLE PRECISION NOT NULL,
                etag TEXT,
                last_modified TEXT,
                last_access TIMESTAMPTZ NOT NULL,
                size INTEGER NOT NULL,
                expires_at TIMESTAMPTZ,
                max_age_seconds BIGINT,
                max_age_attoseconds BIGINT,
                format_version INTEGER NOT NULL DEFAULT 0,
                tags TEXT[] NOT NULL DEFAULT '{}'
            )
            """, logger: logger)
        // A table without the columns of the server's max-age, the format version or the tags
        // gains them in place.
        try await connection.queryUnlessClosed(#"""
            ALTER TABLE "\#(unescaped: table)"
                ADD COLUMN IF NOT EXISTS max_age_seconds BIGINT,
                ADD COLUMN IF NOT EXISTS max_age_attoseconds BIGINT,
                ADD COLUMN IF NOT EXISTS format_version INTEGER NOT NULL DEFAULT 0,
                ADD COLUMN IF NOT EXISTS tags TEXT[] NOT NULL DEFAULT '{}'
            """#, logger: logger)
        try await connection.queryUnlessClosed(
            #"CREATE INDEX IF NOT EXISTS "\#(unescaped: table)_stored_at" ON "\#(unescaped: table)" (stored_at)"#,
            logger: logger)
        try await connection.queryUnlessClosed(
            #"CREATE INDEX IF NOT EXISTS "\#(unescaped: table)_expires_at" ON "\#(unescaped: table)" (expires_at) WHERE expires_at IS NOT NULL"#,
            logger: logger)
        // Invalidation by tag (`tags @> ARRAY[tag]`) finds its rows through this index.
        try await connection.queryUnlessClosed(
            #"CREATE INDEX IF NOT EXISTS "\#(unescaped: table)_tags" ON "\#(unescaped: table)" USING gin (tags)"#,
            logger: logger)
    }

    // MARK: Names

    /// Whether `name` can be used as a table name: a plain identifier that fits PostgreSQL's limit with
    /// the store's index suffixes.
    static func isValidTableName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, name.unicodeScalars.count <= 48 else { return false }
        func isLetter(_ scalar: Unicode.Scalar) -> Bool {
            ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || scalar == "_"
        }
        return isLetter(first) && name.unicodeScalars.allSatisfy { isLetter($0) || ("0"..."9").contains($0) }
    }
}
#endif
