import Foundation
import Logging
import Strata
import StrataOutbox
import StrataPostgres
import StrataSQLite

/// Where `strata send` and `strata outbox` keep the outbox: beside `strata fetch`'s cache, in the
/// store kind that cache uses.
///
/// - `file`: one file per write in `<cache-dir>/outbox/` (``FileOutboxStorage``).
/// - `sqlite`: a table in `<cache-dir>/fetch.sqlite`, the SQLite cache's file.
/// - `postgres`: the table `strata_fetch_outbox` (beside the cache's `strata_fetch`) in the
///   PostgreSQL database of `--postgres-url`. Its own table, not an application's `strata_outbox`:
///   the CLI sends only HTTP writes, and would park an application's other kinds.
public struct OutboxLocation: Sendable, CustomStringConvertible {
    /// The cache directory (`--cache-dir`).
    public var cacheDirectory: URL
    /// The store kind (`--store`).
    public var store: Fetcher.StoreKind
    /// The database for ``Fetcher/StoreKind/postgres``.
    public var postgresURL: String?
    /// The table for ``Fetcher/StoreKind/postgres``.
    public var postgresTable: String
    /// How long ``Fetcher/StoreKind/postgres`` waits for a connection (`--postgres-connect-timeout`;
    /// `PostgresOutboxStorage`'s default, 3 s, when `nil`).
    public var postgresConnectTimeout: Duration?

    public init(cacheDirectory: URL, store: Fetcher.StoreKind = .file, postgresURL: String? = nil,
                postgresTable: String = "strata_fetch_outbox", postgresConnectTimeout: Duration? = nil) {
        self.cacheDirectory = cacheDirectory
        self.store = store
        self.postgresURL = postgresURL
        self.postgresTable = postgresTable
        self.postgresConnectTimeout = postgresConnectTimeout
    }

    /// The folder of the file outbox.
    public var fileDirectory: URL { cacheDirectory.appendingPathComponent("outbox", isDirectory: true) }

    /// The SQLite file the outbox shares with `strata fetch --store sqlite`.
    public var sqliteFile: URL { cacheDirectory.appendingPathComponent("fetch.sqlite") }

    public var description: String {
        switch store {
        case .file: "the file outbox in \(fileDirectory.path)"
        case .sqlite: "the SQLite outbox in \(sqliteFile.path)"
        case .postgres: "the PostgreSQL outbox (table \(postgresTable))"
        }
    }

    /// An opened storage, and what closes it (a database connection) when the command is done.
    struct Opened: Sendable {
        var storage: any OutboxStorage
        var close: @Sendable () async -> Void = {}
    }

    /// Opens the storage. Throws ``OutboxLocationError`` when the location is incomplete, a
    /// `StoreError` when the SQLite file or the PostgreSQL URL cannot be used.
    func open(logger: Logger) async throws -> Opened {
        switch store {
        case .file:
            return Opened(storage: FileOutboxStorage(directory: fileDirectory, logger: logger))
        case .sqlite:
            // A table beside strata fetch's cache table, in the same file.
            return Opened(storage: try SQLiteOutboxStorage(path: sqliteFile, logger: logger))
        case .postgres:
            guard let postgresURL else { throw OutboxLocationError.missingPostgresURL }
            // Connects on first use: an unreachable database fails the first operation, as a StoreError.
            let storage = try postgresConnectTimeout.map {
                try PostgresOutboxStorage(url: postgresURL, table: postgresTable, connectTimeout: $0, logger: logger)
            } ?? PostgresOutboxStorage(url: postgresURL, table: postgresTable, logger: logger)
            return Opened(storage: storage, close: { await storage.shutdown() })
        }
    }
}
