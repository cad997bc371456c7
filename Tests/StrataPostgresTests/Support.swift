#if Postgres
import Foundation
import Logging
import PostgresNIO
@_spi(StrataInternals) import Strata
@testable import StrataPostgres
// Every file of this target uses `Item`: imported once, for the whole target.
@_exported import StrataFixtures
import StrataTesting
import Testing

/// The PostgreSQL server the tests use: `STRATA_POSTGRES_URL`, set by `scripts/postgres.sh start`.
enum TestServer {
    static let skipReason: Comment = "STRATA_POSTGRES_URL is not set; run eval \"$(scripts/postgres.sh start)\""

    static let url: String? = ProcessInfo.processInfo.environment["STRATA_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }

    /// Suites that need the server run when it is configured, and always in CI, where a missing URL
    /// fails them instead of skipping them.
    static let isAvailable = url != nil || ProcessInfo.processInfo.environment["CI"] == "true"

    struct NotConfigured: Error, CustomStringConvertible {
        var description: String {
            "STRATA_POSTGRES_URL is not set, but CI=true: .ci/run must start PostgreSQL with scripts/postgres.sh start"
        }
    }

    static func requireURL() throws -> String {
        guard let url else { throw NotConfigured() }
        return url
    }

    /// The server's client configuration, with a small pool so parallel tests stay well under the
    /// server's connection limit.
    static func configuration(maximumConnections: Int = 4) throws -> PostgresClient.Configuration {
        var configuration = try PostgresURL.configuration(from: requireURL())
        configuration.options.maximumConnections = maximumConnections
        return configuration
    }

    /// Generous: these tests are not about connect timing (the tests of unreachable databases use
    /// short timeouts of their own). They share two cores and one disk with everything else
    /// `swift test` runs (the crash loop's writers flush hundreds of files a second), every store
    /// opens its own connections (with SCRAM authentication) at once, and test fixtures do their
    /// file I/O on the cooperative pool; in one CI run that left the first connections waiting
    /// over 20 s.
    static let connectTimeout: Duration = .seconds(60)

    /// A table name no other test uses.
    static func uniqueTable() -> String {
        "strata_test_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(16).lowercased()
    }
}

/// A connection of the tests' own, for the SQL a store does not offer: corrupting rows, renaming
/// tables, dropping them.
final class Admin: Sendable {
    let client: PostgresClient
    private let runner: Task<Void, Never>

    static let shared: Admin? = TestServer.url.flatMap { _ in try? Admin(configuration: TestServer.configuration()) }

    static func require() throws -> Admin {
        guard let shared else { throw TestServer.NotConfigured() }
        return shared
    }

    init(configuration: PostgresClient.Configuration) {
        // A statement that waits for a lock (a DROP TABLE behind a session that holds the table)
        // fails after 20 s with an error naming the lock, instead of waiting for ever: PostgresNIO's
        // query does not end on cancellation, so a test's time limit could not end that wait.
        var configuration = configuration
        configuration.options.additionalStartupParameters.append(("lock_timeout", "20s"))
        let client = PostgresClient(configuration: configuration)
        self.client = client
        runner = Task { await client.run() }
    }

    /// Runs `query` and discards its rows.
    func execute(_ query: PostgresQuery) async throws {
        for try await _ in try await client.query(query) {}
    }

    /// The single integer `query` returns.
    func integer(_ query: PostgresQuery) async throws -> Int {
        for try await value in try await client.query(query).decode(Int64.self) { return Int(value) }
        throw QueryReturnedNothing()
    }

    struct QueryReturnedNothing: Error {}

    func rowCount(in table: String, key: String) async throws -> Int {
        try await integer(#"SELECT count(*) FROM "\#(unescaped: table)" WHERE key = \#(key)"#)
    }

    func drop(_ table: String) async throws {
        try await execute(#"DROP TABLE IF EXISTS "\#(unescaped: table)""#)
    }
}

/// Tables and stores made during one test, dropped and shut down when it ends (also when it fails).
enum TestScope {
    @TaskLocal static var current: Locked<[@Sendable () async -> Void]>?

    /// Runs `body`; every store and table registered inside it is cleaned up afterwards.
    static func run(_ body: () async throws -> Void) async throws {
        let cleanups = Locked<[@Sendable () async -> Void]>([])
        let outcome: Result<Void, any Error>
        do {
            try await $current.withValue(cleanups) { try await body() }
            outcome = .success(())
        } catch {
            outcome = .failure(error)
        }
        for cleanup in cleanups.withLock({ $0 }).reversed() { await cleanup() }
        try outcome.get()
    }

    static func onExit(_ cleanup: @escaping @Sendable () async -> Void) {
        current?.withLock { $0.append(cleanup) }
    }

    /// A fresh table name, dropped at the end of the scope.
    static func table() -> String {
        let table = TestServer.uniqueTable()
        onExit {
            try? await Admin.shared?.drop(table)
            try? await Admin.shared?.drop(table + "_away")  // left by a fault that could not be lifted
        }
        return table
    }

    /// A store on the test server, shut down at the end of the scope.
    static func store<Value: Codable & Sendable>(
        _: Value.Type = Value.self,
        table: String,
        maxAge: Duration? = nil,
        now: @escaping @Sendable () -> Date = { Date() },
        logger: Logger = quietLogger
    ) throws -> PostgresStore<Value> {
        let store = try PostgresStore<Value>(
            configuration: TestServer.configuration(),
            options: PostgresStoreOptions(table: table, connectTimeout: TestServer.connectTimeout, maxAge: maxAge, now: now, logger: logger))
        onExit { await store.shutdown() }
        return store
    }
}
#endif
