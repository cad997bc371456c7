import Foundation
import GRDB
import Strata
import StrataOutbox

/// The baseline of the SQLite outbox enqueue scenario: raw GRDB inserting the row `SQLiteOutboxStorage`
/// writes for one queued HTTP write — the same nine columns, the same index, and the entry's JSON
/// encoded beforehand, so the bytes written are the same size — one transaction per insert, on a file
/// opened as the storage opens its own (WAL, `synchronous = FULL`). What the outbox adds on top (the
/// request and entry encoding, the UUIDv7, its in-memory queue and status) is the ratio.
public enum RawOutboxTable {
    public static let create = """
        CREATE TABLE outbox (
            id TEXT NOT NULL PRIMARY KEY,
            sequence INTEGER NOT NULL,
            scope TEXT NOT NULL,
            kind TEXT NOT NULL,
            state TEXT NOT NULL,
            attempts INTEGER NOT NULL,
            created_at REAL NOT NULL,
            next_attempt_at REAL NOT NULL,
            entry BLOB NOT NULL
        );
        CREATE INDEX outbox_by_scope ON outbox (scope, sequence)
        """

    /// A pool on `path` configured as `SQLiteOutboxStorage(path:)` configures its own, with the table.
    public static func open(path: String) throws -> DatabasePool {
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        let pool = try DatabasePool(path: path, configuration: configuration)
        // After opening, as the storage does: GRDB turns WAL on with `synchronous = NORMAL` after
        // `prepareDatabase` runs, which would make the baseline skip the flush of each commit.
        try pool.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
        try pool.write { db in try db.execute(sql: create) }
        return pool
    }

    /// The arguments of `count` rows, one per queued `POST` of `body` to `url`: what the storage's
    /// save binds for a new entry. The entry JSON (sorted keys, as `SQLiteOutboxStorage` encodes it)
    /// is encoded once and bound to every row; each row's id is its index, zero-padded to a UUID
    /// string's 36 characters, so making the rows costs next to nothing beside the inserts.
    public static func rows(count: Int, url: URL, body: Data) throws -> [StatementArguments] {
        var request = HTTPRequest(method: .post, url: url)
        request.headerFields[.contentType] = "application/json"
        let payload = try JSONEncoder().encode(try OutboxRequest(request, body: body))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let now = Date()
        let entry = try encoder.encode(OutboxEntry(
            id: UUID(), sequence: 1, scope: url.path, kind: Outbox.httpKind, payload: payload, host: url.host,
            createdAt: now))
        return (0..<count).map { index in
            let digits = String(index)
            let id = String(repeating: "0", count: 36 - digits.count) + digits
            return [
                id, Int64(index + 1), url.path, Outbox.httpKind, "pending", 0,
                now.timeIntervalSince1970, now.timeIntervalSince1970, entry,
            ]
        }
    }

    /// Inserts one row (a cached statement), in the caller's transaction.
    public static func insert(_ db: Database, _ arguments: StatementArguments) throws {
        try db.cachedStatement(sql: """
            INSERT INTO outbox (id, sequence, scope, kind, state, attempts, created_at, next_attempt_at, entry)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
            """).execute(arguments: arguments)
    }
}
