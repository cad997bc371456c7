#if Postgres
import Foundation
import Logging
import NIOSSL
import PostgresNIO
@_spi(StrataInternals) import Strata
@testable import StrataPostgres
import StrataTesting
import Testing

/// The TLS mode of the store's own connection attempt (the watchdog's fast-fail probe): the mode the
/// store was given, never a guess; when it is not known, no probe, said once.
@Suite("PostgreSQL watchdog TLS mode", .timeLimit(.minutes(2)))
struct PostgresWatchdogTLSTests {
    /// Every `sslmode` a URL may name (`nil`: none), and the mode the pool and the probe use.
    static let sslmodes: [(String?, PostgresTLSMode.Mode)] = [
        (nil, .prefer), ("disable", .disable), ("allow", .prefer), ("prefer", .prefer),
        ("require", .require), ("verify-ca", .require), ("verify-full", .require),
    ]

    static func url(_ base: String, sslmode: String?) -> String {
        sslmode.map { "\(base)?sslmode=\($0)" } ?? base
    }

    static func expectProbe(_ watchdog: PostgresConnectionWatchdog, uses mode: PostgresTLSMode.Mode) throws {
        #expect(watchdog.canProbe)
        #expect(watchdog.tls?.mode == mode)
        let probe = try watchdog.probeConfiguration()
        #expect(probe.tls.isAllowed == (mode != .disable))
        #expect(probe.tls.isEnforced == (mode == .require))
    }

    @Test("a URL's sslmode is the mode the probe uses, for the store and the outbox storage", arguments: sslmodes)
    func urlSSLMode(_ sslmode: String?, _ mode: PostgresTLSMode.Mode) throws {
        let logs = LogCapture()
        let url = Self.url(unreachableURL, sslmode: sslmode)
        let store = try PostgresStore<Item>(url: url, options: PostgresStoreOptions(logger: logs.logger))
        try Self.expectProbe(store.watchdog, uses: mode)
        #expect(store.watchdog.tls?.source == "sslmode=\(sslmode ?? "prefer (the default)")")
        let storage = try PostgresOutboxStorage(url: url, logger: logs.logger)
        try Self.expectProbe(storage.watchdog, uses: mode)
        #expect(logs.entries.isEmpty, "\(logs.entries.map { $0.line() })")
    }

    @Test("a configuration's TLS mode is the mode the probe uses", arguments: [
        PostgresTLSMode.Mode.disable, .prefer, .require,
    ])
    func configurationMode(_ mode: PostgresTLSMode.Mode) throws {
        let logs = LogCapture()
        var configuration = PostgresClient.Configuration(
            host: "127.0.0.1", port: 1, username: "strata", password: "pw", database: "strata", tls: .disable)
        switch mode {
        case .disable: configuration.tls = .disable
        case .prefer: configuration.tls = .prefer(.makeClientConfiguration())
        case .require: configuration.tls = .require(.makeClientConfiguration())
        }
        let store = try PostgresStore<Item>(configuration: configuration, options: PostgresStoreOptions(logger: logs.logger))
        try Self.expectProbe(store.watchdog, uses: mode)
        #expect(store.watchdog.tls?.source == "the client configuration")
        let client = PostgresClient(configuration: configuration)
        let storage = try PostgresOutboxStorage(client: client, configuration: configuration, logger: logs.logger)
        try Self.expectProbe(storage.watchdog, uses: mode)
        #expect(logs.entries.isEmpty, "\(logs.entries.map { $0.line() })")
    }

    @Test("a TLS value of a shape it does not know is not read as any mode")
    func unknownShape() {
        struct Settings { var base: Int = 1 }
        struct Other { enum Base { case sometimes(TLSConfiguration) }; var base = Base.sometimes(.makeClientConfiguration()) }
        #expect(PostgresTLSMode(reflecting: Settings(), source: "test") == nil)
        #expect(PostgresTLSMode(reflecting: Other(), source: "test") == nil)
        #expect(PostgresTLSMode(reflecting: "prefer", source: "test") == nil)
        #expect(PostgresTLSMode(reading: .require(.makeClientConfiguration()))?.mode == .require)
    }

    @Test("when the TLS mode is not known, there is no probe: one log line says so, and an unreachable database fails after connectTimeout")
    func unknownModeSkipsTheProbe() async throws {
        let logs = LogCapture()
        let configuration = try PostgresURL.configuration(from: unreachableURL)
        let store = try PostgresStore<Item>(
            configuration: configuration, tls: nil, applicationClient: nil, table: "strata_cache", codec: JSONCodec<Item>(), connectTimeout: .seconds(1), queryTimeout: .seconds(30), statementTimeout: nil, maxAge: nil, now: { Date() }, logger: logs.logger)
        #expect(!store.watchdog.canProbe)
        #expect(throws: PostgresConnectionWatchdog.UnknownTLSMode.self) { try store.watchdog.probeConfiguration() }
        let said = logs.entries.filter { $0.level >= .notice }
        #expect(said.count == 1)
        #expect(said.first?.level == .warning)
        #expect(said.first?.message.contains("TLS mode of the client configuration is not known") == true, "\(said.map { $0.line() })")
        #expect(said.first?.metadata["store"] == "\(store)")

        for _ in 0..<2 {
            let error = await #expect(throws: StoreError.self) { try await store.retrieve("feed") }
            // Not `.refused`, which only the probe can tell: the operation waited for the pool until connectTimeout.
            let failure = error?.underlying as? PostgresConnectionError
            #expect(failure?.cause == .unreachable, "\(String(describing: error))")
            #expect(failure?.detail == "no connection within 1 s", "\(String(describing: error))")
        }
        #expect(logs.entries.filter { $0.level >= .notice }.count == 1, "\(logs.entries.map { $0.line() })")
        await store.shutdown()
    }

    @Test("a Unix domain socket needs no TLS mode: the probe runs")
    func unixSocketProbes() throws {
        let logs = LogCapture()
        let configuration = PostgresClient.Configuration(
            unixSocketPath: "/tmp/strata-no-such-socket", username: "strata", password: nil, database: nil)
        let store = try PostgresStore<Item>(
            configuration: configuration, tls: nil, applicationClient: nil, table: "strata_cache", codec: JSONCodec<Item>(), connectTimeout: .seconds(1), queryTimeout: .seconds(30), statementTimeout: nil, maxAge: nil, now: { Date() }, logger: logs.logger)
        #expect(store.watchdog.canProbe)
        #expect(try store.watchdog.probeConfiguration().tls.isAllowed == false)
        #expect(logs.entries.isEmpty)
    }

    @Test("the probe connects with the pool's startup parameters: a parameter the server refuses fails at once, typed",
          .enabled(if: TestServer.isAvailable, TestServer.skipReason))
    func startupParameters() async throws {
        try await TestScope.run {
            var configuration = try TestServer.configuration()
            configuration.options.additionalStartupParameters = [("strata_no_such_setting", "1")]
            let store = try PostgresStore<Item>(
                configuration: configuration,
                options: PostgresStoreOptions(table: TestScope.table(), connectTimeout: TestServer.connectTimeout, logger: quietLogger))
            TestScope.onExit { await store.shutdown() }
            let clock = ContinuousClock()
            let started = clock.now
            let error = await #expect(throws: StoreError.self) { try await store.retrieve("feed") }
            // Before, the probe connected without them, and the operation waited the whole connect
            // timeout, then failed as "no connection within".
            #expect(started.duration(to: clock.now) < TestServer.connectTimeout)
            let failure = error?.underlying as? PostgresConnectionError
            #expect(failure?.sqlState == "42704", "\(String(describing: error))")
            #expect(failure?.detail.contains("strata_no_such_setting") == true, "\(String(describing: error))")
        }
    }

    @Test("against the test server (no TLS): sslmode require, verify-ca and verify-full fail at once as TLS, the others connect",
          .enabled(if: TestServer.isAvailable, TestServer.skipReason), arguments: sslmodes)
    func againstTheServer(_ sslmode: String?, _ mode: PostgresTLSMode.Mode) async throws {
        try await TestScope.run {
            var ssl = ""
            for try await value in try await Admin.require().client.query("SHOW ssl").decode(String.self) { ssl = value }
            try #require(ssl == "off", "the test server offers TLS; this test needs one that does not")
            let base = try TestServer.requireURL()
            let store = try PostgresStore<Item>(
                url: Self.url(base, sslmode: sslmode),
                options: PostgresStoreOptions(table: TestScope.table(), connectTimeout: TestServer.connectTimeout, logger: quietLogger))
            TestScope.onExit { await store.shutdown() }
            if mode == .require {
                let clock = ContinuousClock()
                let started = clock.now
                let error = await #expect(throws: StoreError.self) { try await store.retrieve("feed") }
                // Only a probe that requires TLS finds this; one that preferred it would connect, and the
                // operation would wait the whole connect timeout for the pool.
                #expect(started.duration(to: clock.now) < TestServer.connectTimeout)
                let failure = error?.underlying as? PostgresConnectionError
                #expect(failure?.cause == .tls, "\(String(describing: error))")
            } else {
                #expect(try await store.retrieve("feed") == nil)
            }
        }
    }
}

#endif
