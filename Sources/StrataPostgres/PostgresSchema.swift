#if Postgres
import Foundation
import Logging
import PostgresNIO
@_spi(StrataInternals) import Strata

extension PostgresStore {
    /// Creates the table and its indexes, once per store, safely while other processes do the same.
    func prepareTable(on connection: PostgresConnection) async throws {
        guard !state.withLock({ $0.tableReady }) else { return }
        let table = table
        let lockKey = "strata.table.\(table)"
        try await connection.withTransaction(logger: logger) { connection in
            // Concurrent CREATE TABLE IF NOT EXISTS can still collide in the catalog; the lock serialises them.
            try await connection.query("SELECT pg_advisory_xact_lock(hashtext(\(lockKey)))", logger: logger)
            try await connection.query("""
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
                    max_age_attoseconds BIGINT
                )
                """, logger: logger)
            // Tables made before the server's max-age was kept gain its columns in place.
            try await connection.query(#"""
                ALTER TABLE "\#(unescaped: table)"
                    ADD COLUMN IF NOT EXISTS max_age_seconds BIGINT,
                    ADD COLUMN IF NOT EXISTS max_age_attoseconds BIGINT
                """#, logger: logger)
            try await connection.query(
                #"CREATE INDEX IF NOT EXISTS "\#(unescaped: table)_stored_at" ON "\#(unescaped: table)" (stored_at)"#,
                logger: logger)
            try await connection.query(
                #"CREATE INDEX IF NOT EXISTS "\#(unescaped: table)_expires_at" ON "\#(unescaped: table)" (expires_at) WHERE expires_at IS NOT NULL"#,
                logger: logger)
        }
        state.withLock { $0.tableReady = true }
    }

    /// Throws the `open` failure for a table name that is not a plain identifier.
    static func checkTableName(_ table: String, endpoint: String) throws(StoreError) {
        guard isValidTableName(table) else {
            throw StoreError(
                store: "PostgresStore(\(endpoint))", operation: .open, key: nil,
                reason: "table name \(String(reflecting: table)) is not a plain identifier "
                    + "(letters, digits and _, not starting with a digit, at most 48 characters)")
        }
    }

    /// Whether `name` can be used as a table name: a plain identifier that fits PostgreSQL's limit with
    /// the store's index suffixes.
    static func isValidTableName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, name.unicodeScalars.count <= 48 else { return false }
        func isLetter(_ scalar: Unicode.Scalar) -> Bool {
            ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || scalar == "_"
        }
        return isLetter(first) && name.unicodeScalars.allSatisfy { isLetter($0) || ("0"..."9").contains($0) }
    }

    /// `host:port` (or the socket path), and that followed by `/database`.
    static func endpoint(of configuration: PostgresClient.Configuration) -> (address: String, endpoint: String) {
        let database = configuration.database.flatMap { $0.isEmpty ? nil : $0 } ?? configuration.username
        let address: String
        if let host = configuration.host {
            address = (host.contains(":") ? "[\(host)]" : host) + ":\(configuration.port ?? 5432)"
        } else {
            address = configuration.unixSocketPath ?? "?"
        }
        return (address, "\(address)/\(database)")
    }
}
#endif
