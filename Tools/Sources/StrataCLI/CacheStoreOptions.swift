import ArgumentParser
import Foundation

/// Where `strata fetch` and `strata watch` cache bodies: `--cache-dir`, `--store` and
/// `--postgres-url`, parsed and checked once for both (they share the cache: a body one of them
/// stored is the other's cached copy).
struct CacheStoreOptions: ParsableArguments {
    @Option(help: "Where cached bodies are kept (default: the user's cache directory, then strata/fetch).")
    var cacheDir: String?

    @Option(help: "Where to cache: file (one file per URL), sqlite (one database file) or postgres (a table shared by every process).")
    var store: Fetcher.StoreKind = .file

    @Option(help: "The PostgreSQL database for --store postgres (default: $STRATA_POSTGRES_URL).")
    var postgresURL: String?

    func validate() throws {
        if store == .postgres, resolvedPostgresURL == nil {
            throw ValidationError("--store postgres needs --postgres-url or the STRATA_POSTGRES_URL environment variable")
        }
    }

    /// `--cache-dir`, or ``Fetcher/defaultCacheDirectory``.
    var cacheDirectory: URL {
        cacheDir.map { URL(fileURLWithPath: $0, isDirectory: true) } ?? Fetcher.defaultCacheDirectory
    }

    /// `--postgres-url`, or `$STRATA_POSTGRES_URL`.
    var resolvedPostgresURL: String? { postgresURL ?? ProcessInfo.processInfo.environment["STRATA_POSTGRES_URL"] }
}

/// The URL argument of `strata fetch`, `strata send` and `strata watch`.
enum HTTPURLArgument {
    /// `text` as an http or https URL with a host; a ``ValidationError`` (usage, exit 64) otherwise.
    static func parse(_ text: String) throws -> URL {
        guard let parsed = URL(string: text), let scheme = parsed.scheme?.lowercased(), ["http", "https"].contains(scheme),
              let host = parsed.host, !host.isEmpty
        else { throw ValidationError("'\(text)' is not an http or https URL") }
        return parsed
    }
}
