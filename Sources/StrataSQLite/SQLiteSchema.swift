#if SQLite
import Foundation
import GRDB

/// The tables `SQLiteStore` keeps in its database file, and the migrations that create them.
///
/// ```
/// strata_cache_entries                      one row per cache key
///   key            TEXT PRIMARY KEY         the cache key
///   value          BLOB                     the codec's bytes
///   stored_at      REAL                     CacheEntry.storedAt, seconds since 2001-01-01 UTC
///                                           (Foundation's reference date: the Date round-trips bit-exactly)
///   etag           TEXT NULL                CacheValidators.etag
///   last_modified  TEXT NULL                CacheValidators.lastModified
///   max_age        REAL NULL                CacheValidators.maxAge in seconds (added by strata.cache.v2;
///                                           rows written before it read as NULL: no max-age)
///   last_access    INTEGER                  recency for LRU eviction: milliseconds since 1970 of the
///                                           last write or recorded read, bumped so it strictly increases
///                                           (past newest_access)
///   size           INTEGER                  byte count of `value`
/// (strata_cache_entries_by_stored_at         index on stored_at, dropped by strata.cache.v4:
///                                           removeEntries(storedBefore:), a rare sweep, scans instead)
/// strata_cache_entries_by_last_access       index on last_access, only while a store with limits uses
///                                           the file (eviction order); see ``ensureEvictionIndex(_:)``
/// strata_cache_totals                       one row (id 0): entry_count, total_bytes, newest_access
///                                           (the largest last_access ever written, added by
///                                           strata.cache.v3), kept exact by triggers on
///                                           strata_cache_entries
/// ```
///
/// Every change to the schema is a new named migration appended to ``migrator``, never an edit of an
/// old one, so a file written by any earlier version is upgraded in place when it is opened.
enum SQLiteSchema {
    static let entries = "strata_cache_entries"
    static let totals = "strata_cache_totals"
    static let entryColumns = ["key", "value", "stored_at", "etag", "last_modified", "max_age", "last_access", "size"]
    /// The entry columns migration v1 created.
    static let version1EntryColumns = ["key", "value", "stored_at", "etag", "last_modified", "last_access", "size"]
    static let totalsColumns = ["id", "entry_count", "total_bytes", "newest_access"]
    /// The index eviction reads entries in recency order by; only stores with limits keep it.
    static let lastAccessIndex = "\(entries)_by_last_access"


    /// The identifiers of the migrations, in order. Namespaced so they cannot collide with the
    /// migrations of another GRDB application sharing the file.
    static let migrationIdentifiers = ["strata.cache.v1", "strata.cache.v2", "strata.cache.v3", "strata.cache.v4"]

    /// Why a database file cannot hold this store's tables.
    struct Conflict: Error, CustomStringConvertible {
        var description: String
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration(migrationIdentifiers[0]) { db in
            for table in [entries, totals] {
                if try db.tableExists(table) {
                    throw Conflict(description: "the database already has a table '\(table)' that this store did not create")
                }
            }
            try db.execute(sql: """
                CREATE TABLE \(entries) (
                    key TEXT NOT NULL PRIMARY KEY,
                    value BLOB NOT NULL,
                    stored_at REAL NOT NULL,
                    etag TEXT,
                    last_modified TEXT,
                    last_access INTEGER NOT NULL,
                    size INTEGER NOT NULL
                );
                CREATE INDEX \(entries)_by_last_access ON \(entries) (last_access);
                CREATE INDEX \(entries)_by_stored_at ON \(entries) (stored_at);
                CREATE TABLE \(totals) (
                    id INTEGER NOT NULL PRIMARY KEY CHECK (id = 0),
                    entry_count INTEGER NOT NULL,
                    total_bytes INTEGER NOT NULL
                );
                INSERT INTO \(totals) (id, entry_count, total_bytes) VALUES (0, 0, 0);
                CREATE TRIGGER \(entries)_count_insert AFTER INSERT ON \(entries) BEGIN
                    UPDATE \(totals) SET entry_count = entry_count + 1, total_bytes = total_bytes + NEW.size WHERE id = 0;
                END;
                CREATE TRIGGER \(entries)_count_delete AFTER DELETE ON \(entries) BEGIN
                    UPDATE \(totals) SET entry_count = entry_count - 1, total_bytes = total_bytes - OLD.size WHERE id = 0;
                END;
                CREATE TRIGGER \(entries)_count_update AFTER UPDATE OF size ON \(entries) BEGIN
                    UPDATE \(totals) SET total_bytes = total_bytes - OLD.size + NEW.size WHERE id = 0;
                END;
                """)
        }
        // v2: the server's freshness lifetime (`CacheValidators.maxAge`). Existing rows get NULL.
        migrator.registerMigration(migrationIdentifiers[1]) { db in
            // A table that only claims our v1 migration is not ours to alter.
            let present = Set(try db.columns(in: entries).map(\.name))
            let missing = version1EntryColumns.filter { !present.contains($0) }
            if !missing.isEmpty {
                throw Conflict(description: "the table '\(entries)' was not created by this store: it lacks the columns \(missing.joined(separator: ", "))")
            }
            try db.execute(sql: "ALTER TABLE \(entries) ADD COLUMN max_age REAL")
        }
        // v3: a write stamps `last_access` past `newest_access`, a column of the totals row that the
        // triggers keep (the row is rewritten by every write anyway), instead of past
        // `MAX(last_access)`, which needed the `last_access` index on every write. That index is then
        // dropped: only eviction needs it, and a store with limits creates it again when it opens the
        // file (`ensureEvictionIndex`), so a store without limits maintains one index fewer per write.
        migrator.registerMigration(migrationIdentifiers[2]) { db in
            try db.execute(sql: """
                ALTER TABLE \(totals) ADD COLUMN newest_access INTEGER NOT NULL DEFAULT 0;
                UPDATE \(totals) SET newest_access = COALESCE((SELECT MAX(last_access) FROM \(entries)), 0) WHERE id = 0;
                DROP TRIGGER IF EXISTS \(entries)_count_insert;
                DROP TRIGGER IF EXISTS \(entries)_count_update;
                CREATE TRIGGER \(entries)_count_insert AFTER INSERT ON \(entries) BEGIN
                    UPDATE \(totals) SET entry_count = entry_count + 1, total_bytes = total_bytes + NEW.size,
                        newest_access = max(newest_access, NEW.last_access) WHERE id = 0;
                END;
                CREATE TRIGGER \(entries)_count_update AFTER UPDATE OF size, last_access ON \(entries) BEGIN
                    UPDATE \(totals) SET total_bytes = total_bytes - OLD.size + NEW.size,
                        newest_access = max(newest_access, NEW.last_access) WHERE id = 0;
                END;
                DROP INDEX IF EXISTS \(lastAccessIndex);
                """)
        }
        // v4: the `stored_at` index is dropped. Only `removeEntries(storedBefore:)`, a maintenance
        // sweep, reads by it (a scan of the table instead), while every write maintained it: one
        // b-tree fewer to change, and one page fewer in the log, per write.
        migrator.registerMigration(migrationIdentifiers[3]) { db in
            try db.execute(sql: "DROP INDEX IF EXISTS \(entries)_by_stored_at")
        }
        return migrator
    }

    /// Creates the `last_access` index unless the file has it: a store with limits calls this when it
    /// opens, after migrating, so eviction (`ORDER BY last_access`) reads the index instead of
    /// scanning the table. Idempotent, and safe when several connections do it at once.
    static func ensureEvictionIndex(_ pool: DatabasePool) throws {
        let present = try pool.read { db in try db.indexes(on: entries).contains { $0.name == lastAccessIndex } }
        guard !present else { return }
        try pool.write { db in
            try db.execute(sql: "CREATE INDEX IF NOT EXISTS \(lastAccessIndex) ON \(entries) (last_access)")
        }
    }

    /// Brings the schema of `pool`'s file up to date.
    ///
    /// Two processes may open a new file at the same moment: both see the migration as pending, one
    /// applies it, and the other's attempt fails (its tables now exist). So a failed migration is
    /// checked again: when the schema is complete, someone else migrated it and all is well.
    @discardableResult
    static func migrate(_ pool: DatabasePool) throws -> MigrationOutcome {
        let migrator = migrator
        var outcome = MigrationOutcome.here
        // Each migration is its own transaction, so a racing opener can find some applied by another
        // connection and the rest still pending: it tries again, and then either applies them or
        // finds them applied. A real conflict fails the same way every time and is thrown.
        var attempt = 1
        while true {
            do {
                try migrator.migrate(pool)
                break
            } catch {
                let migratedElsewhere = (try? pool.read { db in try migrator.hasCompletedMigrations(db) }) ?? false
                if migratedElsewhere {
                    outcome = .byAnotherConnection
                    break
                }
                let progressedElsewhere = (try? pool.read { db in try !migrator.appliedIdentifiers(db).isEmpty }) ?? false
                guard progressedElsewhere, attempt < migrationIdentifiers.count + 2 else { throw error }
                attempt += 1
                outcome = .byAnotherConnection
            }
        }
        try pool.read { db in try verify(db) }
        return outcome
    }

    /// Who brought the schema up to date (or found it so).
    enum MigrationOutcome: Equatable {
        /// This connection: it applied the pending migrations, or there were none.
        case here
        /// Another connection (or process) applied them while this one was trying to.
        case byAnotherConnection
    }

    /// Throws ``Conflict`` unless both tables have (at least) the columns this version reads and writes.
    static func verify(_ db: Database) throws {
        for (table, expected) in [(entries, entryColumns), (totals, totalsColumns)] {
            guard try db.tableExists(table) else {
                throw Conflict(description: "the table '\(table)' is missing although its migration is recorded as applied")
            }
            let present = Set(try db.columns(in: table).map(\.name))
            let missing = expected.filter { !present.contains($0) }
            if !missing.isEmpty {
                throw Conflict(description: "the table '\(table)' was not created by this store: it lacks the columns \(missing.joined(separator: ", "))")
            }
        }
        guard try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(totals) WHERE id = 0") == 1 else {
            throw Conflict(description: "the table '\(totals)' lacks its row")
        }
    }
}
#endif
