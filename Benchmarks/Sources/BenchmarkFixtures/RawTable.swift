import Foundation
import GRDB

/// The SQLite scenario's baseline: raw GRDB on a table with an entry's data (key, value, timestamp,
/// validators) and none of SQLiteStore's bookkeeping.
public enum RawTable {
    public static let create = """
        CREATE TABLE entries (
            key TEXT NOT NULL PRIMARY KEY,
            value BLOB NOT NULL,
            stored_at REAL NOT NULL,
            etag TEXT,
            last_modified TEXT,
            max_age REAL
        )
        """

    public static func upsert(_ db: Database, key: String, value: Data, storedAt: Date) throws {
        try db.cachedStatement(sql: """
            INSERT INTO entries (key, value, stored_at, etag, last_modified, max_age) VALUES (?, ?, ?, ?, ?, ?)
            ON CONFLICT(key) DO UPDATE SET
                value = excluded.value, stored_at = excluded.stored_at, etag = excluded.etag,
                last_modified = excluded.last_modified, max_age = excluded.max_age
            """).execute(arguments: [key, value, storedAt.timeIntervalSinceReferenceDate, nil, nil, nil])
    }

    /// The value and its timestamp: what a cache read needs back.
    public static func fetch(_ db: Database, key: String) throws -> (value: Data, storedAt: Date)? {
        let statement = try db.cachedStatement(
            sql: "SELECT value, stored_at, etag, last_modified, max_age FROM entries WHERE key = ?")
        guard let row = try Row.fetchOne(statement, arguments: [key]) else { return nil }
        let storedAt: Double = row[1]
        return (row[0], Date(timeIntervalSinceReferenceDate: storedAt))
    }
}
