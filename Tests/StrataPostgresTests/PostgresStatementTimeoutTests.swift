#if Postgres
import Foundation
import Logging
import PostgresNIO
@_spi(StrataInternals) import Strata
import StrataOutbox
@testable import StrataPostgres
import StrataTesting
import Testing

/// The server's bound on each statement (`statementTimeout`), below the store's own (`queryTimeout`):
/// a statement that waits too long is aborted and rolled back by the server, and the store reports it
/// before it stops waiting, instead of the statement committing after the caller was told it failed.
@Suite("PostgreSQL statement timeout", .enabled(if: TestServer.isAvailable, TestServer.skipReason), .timeLimit(.minutes(2)))
struct PostgresStatementTimeoutTests {
    static func entry(_ payload: String, attempts: Int = 0) -> OutboxEntry {
        OutboxEntry(
            id: UUID(uuidString: "0194F3A2-7B10-7C3D-8E4F-00000000A001")!, sequence: 1, scope: "s", kind: "k",
            payload: Data(payload.utf8), createdAt: Date(timeIntervalSince1970: 1_767_225_600), attempts: attempts)
    }

    /// Holds the row of `id` locked (`SELECT … FOR UPDATE`) from another session while `body` runs.
    static func whileRowIsLocked(_ id: UUID, in table: String, _ body: () async throws -> Void) async throws {
        try await Admin.require().client.withTransaction(logger: quietLogger) { connection in
            try await PostgresStore<Data>.drain(connection.query(
                #"SELECT 1 FROM "\#(unescaped: table)" WHERE id = \#(id) FOR UPDATE"#, logger: quietLogger))
            try await body()
        }
    }

    /// Waits until no statement that started before holds the table (a statement a client gave up
    /// on may still be running on the server and commit): an exclusive lock is granted only then.
    static func waitForStatementsOn(_ table: String) async throws {
        try await Admin.require().client.withTransaction(logger: quietLogger) { connection in
            try await PostgresStore<Data>.drain(connection.query(
                #"LOCK TABLE "\#(unescaped: table)" IN ACCESS EXCLUSIVE MODE"#, logger: quietLogger))
        }
    }

    @Test("a save that waits on a row another session holds is aborted by the server before queryTimeout, and never lands later")
    func saveWaitingOnALockIsAbortedByTheServer() async throws {
        try await TestScope.run {
            let table = TestScope.outboxTable()
            // A statement bound far below the client's, so the server's abort always comes first however
            // loaded the machine: the typed error (SQLSTATE 57014) says the server ended it, not the client.
            let storage = try PostgresOutboxStorage(
                configuration: TestServer.configuration(), table: table, connectTimeout: TestServer.connectTimeout,
                queryTimeout: .seconds(10), statementTimeout: .seconds(1), logger: quietLogger)
            TestScope.onExit { await storage.shutdown() }
            let saved = Self.entry("first")
            try await storage.save(saved)

            try await Self.whileRowIsLocked(saved.id, in: table) {
                let error = await #expect(throws: StoreError.self) { try await storage.save(Self.entry("second", attempts: 1)) }
                #expect(error?.operation == .insert)
                #expect(error?.key == saved.idempotencyKey)
                let timeout = error?.underlying as? PostgresStatementTimeoutError
                #expect(timeout != nil, "\(String(describing: error))")
                #expect(timeout?.sqlState == "57014")
                #expect(timeout?.timeout == .seconds(1))
                #expect(error?.reason.contains("aborted the statement (statement timeout 1 s)") == true, "\(String(describing: error))")
            }
            // Before the bound, the server went on waiting after the storage gave up and committed
            // the second version once the lock was released.
            try await Self.waitForStatementsOn(table)
            #expect(try await storage.loadAll() == [saved])
        }
    }

    @Test("with a tiny statementTimeout, a save waiting on a lock fails at once, the row stays, and the storage stays usable",
          arguments: [false, true])
    func tinyStatementTimeout(onApplicationClient: Bool) async throws {
        try await TestScope.run {
            let table = TestScope.outboxTable()
            // One connection, so the application's session the storage used is the one checked below.
            let configuration = try TestServer.configuration(maximumConnections: 1)
            let storage: PostgresOutboxStorage
            var client: PostgresClient?
            if onApplicationClient {
                let application = PostgresClient(configuration: configuration)
                let running = Task { await application.run() }
                TestScope.onExit { running.cancel() }
                client = application
                storage = try PostgresOutboxStorage(
                    client: application, configuration: configuration, table: table, connectTimeout: TestServer.connectTimeout,
                    statementTimeout: .milliseconds(200), logger: quietLogger)
            } else {
                storage = try PostgresOutboxStorage(
                    configuration: configuration, table: table, connectTimeout: TestServer.connectTimeout,
                    statementTimeout: .milliseconds(200), logger: quietLogger)
            }
            TestScope.onExit { await storage.shutdown() }
            let saved = Self.entry("first")
            try await storage.save(saved)

            try await Self.whileRowIsLocked(saved.id, in: table) {
                let error = await #expect(throws: StoreError.self) { try await storage.save(Self.entry("second", attempts: 1)) }
                let timeout = error?.underlying as? PostgresStatementTimeoutError
                #expect(timeout?.timeout == .milliseconds(200), "\(String(describing: error))")
                // Reads do not wait on a row lock.
                let read = try await storage.entry(saved.id)
                #expect(read == saved)
            }
            try await Self.waitForStatementsOn(table)
            #expect(try await storage.entry(saved.id) == saved)
            let second = Self.entry("second", attempts: 1)
            try await storage.save(second)
            #expect(try await storage.entry(saved.id) == second)

            if let client {
                // The bound was the storage's transaction's alone: the application's session keeps its own.
                var setting = ""
                for try await value in try await client.query("SHOW statement_timeout").decode(String.self) { setting = value }
                #expect(setting == "0")
            }
        }
    }

    @Test("a cache read that waits on a locked table is aborted by the server, and the store stays usable")
    func cacheReadIsAborted() async throws {
        try await TestScope.run {
            let table = TestScope.table()
            let store = try PostgresStore<Item>(
                configuration: TestServer.configuration(),
                options: PostgresStoreOptions(table: table, connectTimeout: TestServer.connectTimeout, statementTimeout: .milliseconds(300), logger: quietLogger))
            TestScope.onExit { await store.shutdown() }
            try await store.insert(itemA, for: "feed", storedAt: Date())
            try await Admin.require().client.withTransaction(logger: quietLogger) { connection in
                try await connection.query(#"LOCK TABLE "\#(unescaped: table)" IN ACCESS EXCLUSIVE MODE"#, logger: quietLogger)
                let error = await #expect(throws: StoreError.self) { try await store.retrieve("feed") }
                #expect(error?.operation == .retrieve)
                #expect((error?.underlying as? PostgresStatementTimeoutError)?.timeout == .milliseconds(300), "\(String(describing: error))")
            }
            #expect(try await store.retrieve("feed")?.value == itemA)
        }
    }

    @Test("statementTimeout defaults to nine tenths of queryTimeout, in whole milliseconds")
    func defaults() throws {
        let store = try PostgresStore<Item>(url: unreachableURL, options: PostgresStoreOptions(logger: quietLogger))
        #expect(store.statementTimeout == .seconds(27))
        #expect(store.statementTimeoutSetting == "27000")
        let short = try PostgresStore<Item>(url: unreachableURL, options: PostgresStoreOptions(queryTimeout: .milliseconds(1_001), logger: quietLogger))
        #expect(short.statementTimeout == .milliseconds(900))
        let exact = try PostgresStore<Item>(url: unreachableURL, options: PostgresStoreOptions(statementTimeout: .microseconds(2_500_900), logger: quietLogger))
        #expect(exact.statementTimeout == .milliseconds(2_500))
        let storage = try PostgresOutboxStorage(url: unreachableURL, queryTimeout: .seconds(10), logger: quietLogger)
        #expect(storage.statementTimeout == .seconds(9))
    }

    @Test("a statementTimeout not below queryTimeout, or under a millisecond, fails at init", arguments: [
        Duration.seconds(30), .seconds(31), .microseconds(999), .zero,
    ])
    func statementTimeoutMustBeBelowQueryTimeout(_ statementTimeout: Duration) {
        #expect {
            try PostgresStore<Item>(url: unreachableURL, options: PostgresStoreOptions(statementTimeout: statementTimeout, logger: quietLogger))
        } throws: { error in
            guard let error = error as? StoreError else { return false }
            return error.operation == .open && error.reason.contains("below queryTimeout (30 s)")
        }
        #expect {
            try PostgresOutboxStorage(url: unreachableURL, statementTimeout: statementTimeout, logger: quietLogger)
        } throws: { error in
            (error as? StoreError)?.store.hasPrefix("PostgresOutboxStorage(") == true
        }
    }
}
#endif
