#if Postgres
import Foundation
import Logging
import PostgresNIO
import ServiceLifecycle
@_spi(StrataInternals) import Strata
import StrataOutbox
@testable import StrataPostgres
import StrataTesting
import Testing

/// Who runs the connection pool (the store, the application, a `ServiceGroup`), and the typed
/// causes of connection failures the server reports.
@Suite("PostgresStore lifecycle and connection failures", .enabled(if: TestServer.isAvailable, TestServer.skipReason))
struct PostgresStoreLifecycleTests {
    @Test("a database that does not exist is a typed error naming it, at once")
    func missingDatabase() async throws {
        try await TestScope.run {
            var configuration = try TestServer.configuration()
            configuration.database = "strata_no_such_database_5e1c"
            let store = try PostgresStore<Item>(
                configuration: configuration,
                options: PostgresStoreOptions(table: TestScope.table(), connectTimeout: TestServer.connectTimeout, logger: quietLogger))
            TestScope.onExit { await store.shutdown() }
            let error = await #expect(throws: StoreError.self) { try await store.retrieve("feed") }
            // At once: a typed cause comes only from the store's own connection attempt, never from
            // waiting out the connect timeout (which would be `.unreachable`).
            let failure = error?.underlying as? PostgresConnectionError
            #expect(failure?.cause == .databaseMissing, "\(String(describing: error))")
            #expect(failure?.sqlState == "3D000")
            #expect(error?.reason.contains("strata_no_such_database_5e1c") == true, "\(String(describing: error))")
        }
    }

    @Test("a store on the application's client works while the application runs it, and leaves it running")
    func applicationOwnedClient() async throws {
        try await TestScope.run {
            let configuration = try TestServer.configuration()
            let client = PostgresClient(configuration: configuration)
            let running = Task { await client.run() }
            defer { running.cancel() }
            let store = try PostgresStore<Item>(
                client: client, configuration: configuration,
                options: PostgresStoreOptions(table: TestScope.table(), connectTimeout: TestServer.connectTimeout, logger: quietLogger))
            try await store.insert(itemA, for: "feed", storedAt: Date())
            #expect(try await store.retrieve("feed")?.value == itemA)
            #expect(store.description.hasSuffix("/strata/\(store.table))"))

            await store.shutdown()
            let error = await #expect(throws: StoreError.self) { try await store.retrieve("feed") }
            #expect(error?.reason == "the store was shut down")
            // The application's client still serves queries: the store did not stop it.
            var answer: Int64?
            for try await value in try await client.query("SELECT 42::bigint", logger: quietLogger).decode(Int64.self) {
                answer = value
            }
            #expect(answer == 42)
        }
    }

    @Test("a store on a client nobody runs fails as unreachable after the connect timeout, without hanging")
    func applicationClientNotRunning() async throws {
        let configuration = try TestServer.configuration()
        let client = PostgresClient(configuration: configuration)
        let store = try PostgresStore<Item>(
            client: client, configuration: configuration,
            options: PostgresStoreOptions(connectTimeout: .seconds(1), logger: quietLogger))
        let error = await #expect(throws: StoreError.self) { try await store.retrieve("feed") }
        // The database itself is fine (the store's own attempt connects): only the pool is not running.
        #expect(error?.reason.hasSuffix("no connection within 1 s") == true, "\(String(describing: error))")
        #expect((error?.underlying as? PostgresConnectionError)?.cause == .unreachable)
    }

    @Test("run() as a task: the store works while it runs, and cancelling it shuts the store down")
    func serviceRunCancelled() async throws {
        try await TestScope.run {
            let store = try TestScope.store(Item.self, table: TestScope.table(), maxAge: .hours(1))
            let service = Task { try await store.run() }
            try await store.insert(itemA, for: "feed", storedAt: Date())
            #expect(try await store.retrieve("feed")?.value == itemA)
            service.cancel()
            try await service.value
            let error = await #expect(throws: StoreError.self) { try await store.retrieve("feed") }
            #expect(error?.reason == "the store was shut down")
        }
    }

    @Test("in a ServiceGroup: graceful shutdown stops the store and the group returns")
    func serviceGroupGracefulShutdown() async throws {
        try await TestScope.run {
            let store = try TestScope.store(Item.self, table: TestScope.table())
            let group = ServiceGroup(services: [store], logger: quietLogger)
            let running = Task { try await group.run() }
            try await store.insert(itemUnicode, for: "k", storedAt: Date())
            #expect(try await store.retrieve("k")?.value == itemUnicode)
            await group.triggerGracefulShutdown()
            try await running.value
            await #expect(throws: StoreError.self) { try await store.retrieve("k") }
        }
    }

    @Test("the maintenance loop sweeps expired rows without any insert, and ends when cancelled")
    func maintenanceSweeps() async throws {
        try await TestScope.run {
            let clock = ManualClock()
            let table = TestScope.table()
            let writer = try TestScope.store(Item.self, table: table, maxAge: .seconds(60), now: clock.wallClock)
            // Expires in 60 s of the manual clock: the writer's own sweep after the insert keeps it.
            try await writer.insert(itemA, for: "old", storedAt: clock.date)
            #expect(try await writer.count == 1)
            // A second store on the table that never inserts: only its maintenance can sweep.
            let sweeper = try TestScope.store(Item.self, table: table, maxAge: .seconds(60), now: clock.wallClock)
            let (passes, pass) = AsyncStream<Void>.makeStream()
            let loop = Task { await sweeper.maintain(every: .seconds(60), clock: clock, afterPass: { pass.yield() }) }
            try await clock.waitForSleepers(count: 1)
            #expect(try await writer.count == 1)  // nothing swept before the interval passed
            clock.advance(by: .seconds(60))
            var iterator = passes.makeAsyncIterator()
            _ = await iterator.next()
            #expect(try await writer.count == 0)
            loop.cancel()
            await loop.value
        }
    }
}

/// The code samples of StrataPostgres' `///` docs, compiled (not run: they name a production host).
enum PostgresDocExamples {
    struct FeedItem: Codable, Sendable {}

    static func storeOverview(remote: some Loader<Void, [FeedItem]>) throws {
        let memory = MemoryStore<String, [FeedItem]>()
        let shared = try PostgresStore<[FeedItem]>(url: "postgres://app:secret@db.internal:5432/cache")
        let feed = memory.loader(key: "feed", freshness: .maxAge(.minutes(1)))
            .fallingBack(to: shared.loader(key: "feed", freshness: .maxAge(.hours(1))))
            .fallingBack(to: remote.writingThrough(in: shared, key: "feed"))
        _ = feed
    }

    static func applicationClient(configuration: PostgresClient.Configuration) async throws {
        let client = PostgresClient(configuration: configuration)
        let store = try PostgresStore<[FeedItem]>(client: client, configuration: configuration)
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask { await client.run() }
            _ = try await store.retrieve("feed")
            group.cancelAll()  // the application stops its client when it is done
        }
    }

    static func service(logger: Logger) async throws {
        let store = try PostgresStore<[FeedItem]>(url: "postgres://app:secret@db.internal:5432/cache", options: PostgresStoreOptions(maxAge: .hours(24)))
        let group = ServiceGroup(services: [store], gracefulShutdownSignals: [.sigterm], logger: logger)
        try await group.run()
    }

    static func failure(store: PostgresStore<[FeedItem]>) async {
        do {
            _ = try await store.retrieve("feed")
        } catch let error as StoreError {
            if let failure = error.underlying as? PostgresConnectionError, failure.cause == .authenticationRejected {
                print("check the credentials: \(failure.detail)")
            }
        } catch {}
    }

    static func statementTimeout(storage: PostgresOutboxStorage, entry: OutboxEntry) async throws {
        do {
            try await storage.save(entry)
        } catch let error as StoreError where error.underlying is PostgresStatementTimeoutError {
            // not saved: the database was too slow (a lock held elsewhere, an overloaded server)
        }
    }
}
#endif
