#if Postgres
import Foundation
import Logging
import PostgresNIO
import ServiceLifecycle
@_spi(StrataInternals) import Strata
@testable import StrataPostgres
import StrataTesting
import Testing

@Suite("PostgresStore: the application's client, Service, typed connection failures",
       .enabled(if: TestServer.isAvailable, TestServer.skipReason))
struct PostgresStoreLifecycleTests {
    @Test("on the application's client, the store works and never stops the client")
    func applicationsClient() async throws {
        try await TestScope.run {
            let configuration = try TestServer.configuration()
            let client = PostgresClient(configuration: configuration)
            let runner = Task { await client.run() }
            defer { runner.cancel() }
            let store = try PostgresStore<Item>(
                client: client, configuration: configuration, table: TestScope.table(), codec: JSONCodec(),
                connectTimeout: TestServer.connectTimeout, logger: quietLogger)

            try await store.insert(itemA, for: "feed", storedAt: Date(timeIntervalSince1970: 1_767_225_600))
            #expect(try await store.retrieve("feed")?.value == itemA)
            #expect(store.description == "PostgresStore(\(store.endpoint)/\(store.table))")

            await store.shutdown()
            let error = await #expect(throws: StoreError.self) { try await store.retrieve("feed") }
            #expect(error?.reason == "the store was shut down")
            // The client is the application's: still running, still serving the application.
            let rows = try await client.query("SELECT 41 + 1", logger: quietLogger)
            var answer = 0
            for try await value in rows.decode(Int.self) { answer = value }
            #expect(answer == 42)
        }
    }

    @Test("as a Service in a ServiceGroup, it runs until graceful shutdown and then stops")
    func serviceGroup() async throws {
        try await TestScope.run {
            let configuration = try TestServer.configuration()
            let client = PostgresClient(configuration: configuration)
            let store = try PostgresStore<Item>(
                client: client, configuration: configuration, table: TestScope.table(), codec: JSONCodec(),
                connectTimeout: TestServer.connectTimeout, maxAge: .hours(1), logger: quietLogger)
            let group = ServiceGroup(services: [client, store], logger: quietLogger)
            let running = Task { try await group.run() }

            try await store.insert(itemA, for: "feed", storedAt: Date())
            #expect(try await store.retrieve("feed")?.value == itemA)

            await group.triggerGracefulShutdown()
            try await running.value
            let error = await #expect(throws: StoreError.self) { try await store.retrieve("feed") }
            #expect(error?.reason == "the store was shut down")
        }
    }

    @Test("a store that owns its client stops it when its Service run ends")
    func ownedClientService() async throws {
        try await TestScope.run {
            let store = try TestScope.store(Item.self, table: TestScope.table())
            let running = Task { try await store.run() }
            try await store.insert(itemB, for: "k", storedAt: Date())
            running.cancel()
            try await running.value
            let error = await #expect(throws: StoreError.self) { try await store.retrieve("k") }
            #expect(error?.reason == "the store was shut down")
        }
    }

    @Test("a missing database is a typed error from the server, at once")
    func missingDatabase() async throws {
        var configuration = try TestServer.configuration()
        configuration.database = "strata_no_such_database_7c1"
        let store = try PostgresStore<Item>(
            configuration: configuration, table: "strata_cache", connectTimeout: TestServer.connectTimeout, logger: quietLogger)
        let clock = ContinuousClock()
        let started = clock.now
        let error = await #expect(throws: StoreError.self) { try await store.retrieve("feed") }
        #expect(started.duration(to: clock.now) < TestServer.connectTimeout)
        #expect(error?.reason.hasPrefix("database unreachable at ") == true, "\(String(describing: error))")
        #expect(error?.reason.contains("SQLSTATE 3D000") == true, "\(String(describing: error))")
        await store.shutdown()
    }

    @Test("the probe's verdicts: refused and rejected are conclusive, a timeout is not")
    func probeVerdicts() async throws {
        let refused = ConnectionProbe(
            configuration: PostgresConnection.Configuration(
                host: "127.0.0.1", port: 1, username: "u", password: "p", database: "d", tls: .disable),
            connectTimeout: .seconds(5), logger: quietLogger)
        let before = ContinuousClock.now
        refused.start()
        await refused.waitForOutcome(since: before)
        let reason = try #require(refused.failure(since: before))
        #expect(reason.lowercased().contains("connection refused"), "\(reason)")

        let server = try SilentServer()
        let silent = ConnectionProbe(
            configuration: PostgresConnection.Configuration(
                host: "127.0.0.1", port: server.port, username: "u", password: "p", database: "d", tls: .disable),
            connectTimeout: .milliseconds(300), logger: quietLogger)
        let again = ContinuousClock.now
        silent.start()
        await silent.waitForOutcome(since: again)
        #expect(silent.failure(since: again) == nil)
    }
}
#endif
