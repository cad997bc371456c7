#if SQLite
import Foundation
import GRDB

/// The tables `SQLiteOutboxStorage` keeps in its database file, and the migration that creates them.
///
/// ```
/// strata_outbox_entries                     one row per queued write
///   id               TEXT PRIMARY KEY       OutboxEntry.id, lowercase (the Idempotency-Key)
///   sequence         INTEGER                OutboxEntry.sequence (clamped to Int64)
///   scope            TEXT                   OutboxEntry.scope
///   kind             TEXT                   OutboxEntry.kind
///   state            TEXT                   'pending' or 'parked'
///   attempts         INTEGER                OutboxEntry.attempts
///   created_at       REAL                   seconds since 1970, for queries and people
///   next_attempt_at  REAL                   seconds since 1970, for queries and people
///   entry            BLOB                   the whole entry as JSON: what loadAll reads
/// strata_outbox_unreadable                  rows whose entry could not be read back, set aside
///   id, entry                               as they were in strata_outbox_entries, unchanged
///   reason           TEXT                   why it could not be read
///   set_aside_at     REAL                   seconds since 1970
/// strata_outbox_claims (v2)                 who drains which scope, when processes share the file
///   scope            TEXT PRIMARY KEY       OutboxEntry.scope
///   claimant_id      TEXT                   OutboxClaimant.id, lowercase
///   claim            BLOB                   the whole OutboxScopeClaim as JSON
///   expires_at       REAL                   seconds since 1970, for queries and people
/// strata_outbox_sequence (v2)               one row: the last sequence given to a new write
///   id               INTEGER PRIMARY KEY    1
///   value            INTEGER
/// ```
///
/// The columns beside `entry` are copies for an operator's queries (`SELECT kind, count(*) ... GROUP
/// BY state`); `entry` alone is read back. Every change to the schema is a new named migration
/// appended to ``migrator``, never an edit of an old one.
enum SQLiteOutboxSchema {
    static let entries = "strata_outbox_entries"
    static let unreadable = "strata_outbox_unreadable"
    static let claims = "strata_outbox_claims"
    static let sequence = "strata_outbox_sequence"
    static let entryColumns = ["id", "sequence", "scope", "kind", "state", "attempts", "created_at", "next_attempt_at", "entry"]
    static let unreadableColumns = ["id", "entry", "reason", "set_aside_at"]

    /// Namespaced so they cannot collide with the migrations of the application sharing the file.
    static let migrationIdentifiers = ["strata.outbox.v1", "strata.outbox.v2", "strata.outbox.v3"]

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration(migrationIdentifiers[0]) { db in
            for table in [entries, unreadable] where try db.tableExists(table) {
                throw SQLiteSchema.Conflict(description: "the database already has a table '\(table)' that this storage did not create")
            }
            // `entry` has no declared type in the quarantine table: whatever was in the row is kept as it was.
            try db.execute(sql: """
                CREATE TABLE \(entries) (
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
                CREATE INDEX \(entries)_by_scope ON \(entries) (scope, sequence);
                CREATE TABLE \(unreadable) (
                    id,
                    entry,
                    reason TEXT NOT NULL,
                    set_aside_at REAL NOT NULL
                );
                """)
        }
        // v2: processes sharing the file claim scopes and number writes here.
        migrator.registerMigration(migrationIdentifiers[1]) { db in
            for table in [claims, sequence] where try db.tableExists(table) {
                throw SQLiteSchema.Conflict(description: "the database already has a table '\(table)' that this storage did not create")
            }
            try db.execute(sql: """
                CREATE TABLE \(claims) (
                    scope TEXT NOT NULL PRIMARY KEY,
                    claimant_id TEXT NOT NULL,
                    claim BLOB NOT NULL,
                    expires_at REAL NOT NULL
                );
                CREATE TABLE \(sequence) (
                    id INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
                    value INTEGER NOT NULL
                );
                INSERT INTO \(sequence) (id, value) SELECT 1, coalesce(max(sequence), 0) FROM \(entries);
                """)
        }
        // v3: a row is keyed by its write's id. It was keyed by the write's idempotency key, which
        // gains "-r<n>" when a conflict makes the write a new one (client wins, a merge): each new
        // key inserted a row beside the old one, and a delivery removed only the bare id's row, so
        // the newer row stayed, to be sent again at every launch. Each write keeps its latest row
        // (the highest rowid: a new key's row is inserted after the old key's), under its id; the
        // rows it supersedes are moved to the unreadable table, never deleted.
        migrator.registerMigration(migrationIdentifiers[2]) { db in
            try db.execute(sql: """
                INSERT INTO \(unreadable) (id, entry, reason, set_aside_at)
                    SELECT id, entry, 'superseded by a later key revision of the same write (migration strata.outbox.v3)',
                           CAST(strftime('%s', 'now') AS REAL)
                    FROM \(entries) WHERE rowid NOT IN (SELECT max(rowid) FROM \(entries) GROUP BY substr(id, 1, 36));
                DELETE FROM \(entries) WHERE rowid NOT IN (SELECT max(rowid) FROM \(entries) GROUP BY substr(id, 1, 36));
                UPDATE \(entries) SET id = substr(id, 1, 36) WHERE length(id) > 36;
                """)
        }
        return migrator
    }

    /// Brings the schema of `writer`'s database up to date.
    ///
    /// Two processes may open a new file at the same moment: both see the migration pending, one
    /// applies it and the other's attempt fails. So a failed migration is checked again: when the
    /// migration is recorded as applied, someone else migrated and all is well.
    static func migrate(_ writer: any DatabaseWriter) throws {
        let migrator = migrator
        // Each migration is its own transaction, so an opener racing another process can find the
        // first migration applied there and the next still pending (its own attempt at the first
        // then fails: the tables exist). It tries again, and then applies the rest or finds them
        // applied. A real conflict fails the same way every time and is thrown. (Seen in CI: ten
        // `strata send` processes opening a new file at once.)
        var attempt = 1
        while true {
            do {
                try migrator.migrate(writer)
                break
            } catch {
                let migratedElsewhere = (try? writer.read { db in try migrator.hasCompletedMigrations(db) }) ?? false
                if migratedElsewhere { break }
                let progressedElsewhere = (try? writer.read { db in try !migrator.appliedIdentifiers(db).isEmpty }) ?? false
                guard progressedElsewhere, attempt < 4 else { throw error }
                attempt += 1
            }
        }
        try writer.read { db in try verify(db) }
    }

    /// Throws a conflict unless both tables have (at least) the columns this version reads and writes.
    static func verify(_ db: Database) throws {
        for (table, expected) in [
            (entries, entryColumns), (unreadable, unreadableColumns),
            (claims, ["scope", "claimant_id", "claim", "expires_at"]), (sequence, ["id", "value"]),
        ] {
            guard try db.tableExists(table) else {
                throw SQLiteSchema.Conflict(description: "the table '\(table)' is missing although its migration is recorded as applied")
            }
            let present = Set(try db.columns(in: table).map(\.name))
            let missing = expected.filter { !present.contains($0) }
            if !missing.isEmpty {
                throw SQLiteSchema.Conflict(
                    description: "the table '\(table)' was not created by this storage: it lacks the columns \(missing.joined(separator: ", "))")
            }
        }
    }
}
#endif
