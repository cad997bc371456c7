import ArgumentParser
import Foundation

/// The options that say where the outbox is, shared by `strata send` and every `strata outbox`
/// subcommand: the same `--cache-dir`, `--store` and `--postgres-url` as `strata fetch`.
struct OutboxLocationOptions: ParsableArguments {
    @Option(help: "The cache directory the outbox lives in (default: the one strata fetch uses).")
    var cacheDir: String?

    @Option(help: "Where the outbox is kept: file (<cache-dir>/outbox/), sqlite (<cache-dir>/fetch.sqlite) or postgres.")
    var store: Fetcher.StoreKind = .file

    @Option(help: "The PostgreSQL database for --store postgres (default: $STRATA_POSTGRES_URL).")
    var postgresURL: String?

    @Option(help: "The table for --store postgres (default strata_fetch_outbox; an application's PostgresOutboxStorage uses strata_outbox).")
    var postgresTable = "strata_fetch_outbox"

    @Option(help: "How long --store postgres waits to connect (500ms, 10s, …; default 3s).", transform: DurationArgument.init(parsing:))
    var postgresConnectTimeout: DurationArgument?

    func validate() throws {
        if store == .postgres, resolvedPostgresURL == nil {
            throw ValidationError("--store postgres needs --postgres-url or the STRATA_POSTGRES_URL environment variable")
        }
    }

    var resolvedPostgresURL: String? { postgresURL ?? ProcessInfo.processInfo.environment["STRATA_POSTGRES_URL"] }

    var location: OutboxLocation {
        OutboxLocation(
            cacheDirectory: cacheDir.map { URL(fileURLWithPath: $0, isDirectory: true) } ?? Fetcher.defaultCacheDirectory,
            store: store, postgresURL: resolvedPostgresURL, postgresTable: postgresTable,
            postgresConnectTimeout: postgresConnectTimeout?.duration)
    }
}
