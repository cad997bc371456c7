import Foundation
import Logging
import Strata
import StrataSQLite

/// Where `strata send` and `strata outbox` keep the outbox: beside `strata fetch`'s cache, in the
/// store kind that cache uses.
///
/// - `file`: one file per write in `<cache-dir>/outbox/` (``FileOutboxStorage``).
/// - `sqlite`: a table in `<cache-dir>/fetch.sqlite`, the SQLite cache's file.
/// - `postgres`: a table in the PostgreSQL database of `--postgres-url`.
public struct OutboxLocation: Sendable, CustomStringConvertible {
    /// The cache directory (`--cache-dir`).
    public var cacheDirectory: URL
    /// The store kind (`--store`).
    public var store: Fetcher.StoreKind
    /// The database for ``Fetcher/StoreKind/postgres``.
    public var postgresURL: String?

    public init(cacheDirectory: URL, store: Fetcher.StoreKind = .file, postgresURL: String? = nil) {
        self.cacheDirectory = cacheDirectory
        self.store = store
        self.postgresURL = postgresURL
    }

    /// The folder of the file outbox.
    public var fileDirectory: URL { cacheDirectory.appendingPathComponent("outbox", isDirectory: true) }

    /// The SQLite file the outbox shares with `strata fetch --store sqlite`.
    public var sqliteFile: URL { cacheDirectory.appendingPathComponent("fetch.sqlite") }

    public var description: String {
        switch store {
        case .file: "the file outbox in \(fileDirectory.path)"
        case .sqlite: "the SQLite outbox in \(sqliteFile.path)"
        case .postgres: "the PostgreSQL outbox"
        }
    }

    /// An opened storage, and what closes it (a database connection) when the command is done.
    struct Opened: Sendable {
        var storage: any OutboxStorage
        var close: @Sendable () async -> Void = {}
    }

    /// Opens the storage. Throws ``OutboxLocationError`` when it cannot.
    func open(logger: Logger) async throws -> Opened {
        switch store {
        case .file:
            return Opened(storage: FileOutboxStorage(directory: fileDirectory, logger: logger))
        case .sqlite:
            // A table beside strata fetch's cache table, in the same file.
            return Opened(storage: try SQLiteOutboxStorage(path: sqliteFile, logger: logger))
        case .postgres:
            throw OutboxLocationError.notYetSupported(store)
        }
    }
}

/// Why ``OutboxLocation`` could not open its storage.
enum OutboxLocationError: Error, CustomStringConvertible {
    /// This build of `strata` has no outbox for that store kind yet.
    case notYetSupported(Fetcher.StoreKind)
    /// `--store postgres` without a database URL.
    case missingPostgresURL

    var description: String {
        switch self {
        case .notYetSupported(let store):
            "an outbox in --store \(store.rawValue) is not available in this build yet; use --store file"
        case .missingPostgresURL:
            "--store postgres needs --postgres-url or the STRATA_POSTGRES_URL environment variable"
        }
    }
}
