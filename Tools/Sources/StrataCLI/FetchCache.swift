import Foundation
import Logging
import Strata
import StrataPostgres
import StrataSQLite

/// The cache `strata fetch` and `strata watch` keep bodies in, opened: one entry per URL (its
/// `absoluteString` is the key), so a body either command stored is the other's cached copy.
struct FetchCache: Sendable {
    /// The store, whatever its kind.
    let store: any Store<String, Data>
    /// Releases what the store holds open (PostgreSQL's connections); nothing for the others.
    let close: @Sendable () async -> Void

    /// The store `kind` names:
    /// - `file`: one file per URL in `directory` (`FileStore`);
    /// - `sqlite`: the database `fetch.sqlite` in `directory` (`SQLiteStore`);
    /// - `postgres`: the table `strata_fetch` of the database at `postgresURL` (`PostgresStore`).
    ///
    /// - Throws: ``MissingPostgresURL`` for `postgres` without a URL (a usage error: the commands'
    ///   `validate()` reports it first); the store's own error when it cannot be opened (the
    ///   commands then go on without a cache).
    static func open(_ kind: Fetcher.StoreKind, directory: URL, postgresURL: String?, logger: Logger) throws -> FetchCache {
        switch kind {
        case .file:
            return FetchCache(store: FileStore<Data>(directory: directory, codec: DataCodec(), logger: logger), close: {})
        case .sqlite:
            let store = try SQLiteStore<Data>(path: directory.appendingPathComponent("fetch.sqlite"), codec: DataCodec(), logger: logger)
            return FetchCache(store: store, close: {})
        case .postgres:
            guard let postgresURL else { throw MissingPostgresURL() }
            let store = try PostgresStore<Data>(url: postgresURL, codec: DataCodec(), options: PostgresStoreOptions(table: "strata_fetch", logger: logger))
            return FetchCache(store: store, close: { await store.shutdown() })
        }
    }

    /// `--store postgres` without `--postgres-url` or `STRATA_POSTGRES_URL`.
    struct MissingPostgresURL: Error, CustomStringConvertible {
        var description: String { "--store postgres needs --postgres-url or STRATA_POSTGRES_URL" }
    }
}

extension Fetcher {
    /// The first tier of `strata fetch` and `strata watch`: the library's revalidating HTTP cache
    /// for `url` in `store`, under the URL's key. A copy younger than `maxAge` (and than the server's
    /// `max-age`, which can only shorten it) is served without a request; otherwise the request
    /// carries the stored `ETag` / `Last-Modified`, a 304 serves the stored body and re-stamps it,
    /// a 2xx replaces it (unless `no-store`), and `onReply` sees that 2xx answer.
    static func revalidatingRemote<S: Store>(
        _ url: URL, in store: S, maxAge: Duration, timeout: Duration?, maxBodyBytes: Int?, transport: any HTTPTransport,
        onReply: @escaping @Sendable (HTTPReply) -> Void = { _ in }
    ) -> RevalidatedLoader<Void, S> where S.Key == String, S.Value == Data {
        HTTPLoader(url: url, timeout: timeout, maxBodyBytes: maxBodyBytes, transport: transport)
            .revalidated(in: store, key: url.absoluteString, freshness: .maxAge(maxAge)) { reply in
                onReply(reply)
                return reply.body
            }
    }
}
