#if Postgres
import Foundation
import Logging
import PostgresNIO
@_spi(StrataInternals) import Strata
@testable import StrataPostgres
import StrataTesting
import Testing

/// `PostgresStore` against a real server, beyond the contract: sharing, sweeps, damaged rows,
/// timeouts and credentials. Each test has tables of its own, dropped afterwards.
@Suite("PostgresStore", .enabled(if: TestServer.isAvailable, TestServer.skipReason))
struct PostgresStoreServerTests {
    @Test("the table has the documented columns, and the description names where it is")
    func schemaAndDescription() async throws {
        try await TestScope.run {
            let table = TestScope.table()
            let store = try TestScope.store(Item.self, table: table)
            try await store.insert(itemA, for: "feed", storedAt: Date())
            let columns = try await Self.columns(of: table)
            #expect(columns == [
                "key": "text", "value": "bytea", "stored_at": "timestamp with time zone",
                "stored_at_seconds": "double precision", "etag": "text", "last_modified": "text",
                "last_access": "timestamp with time zone", "size": "integer", "expires_at": "timestamp with time zone",
                "max_age_seconds": "bigint", "max_age_attoseconds": "bigint", "format_version": "integer", "tags": "ARRAY",
            ])
            let configuration = try TestServer.configuration()
            #expect(store.description
                == "PostgresStore(\(configuration.host!):\(configuration.port!)/\(configuration.database!)/\(table))")
        }
    }

    @Test("two stores (two connection pools) upserting the same keys at once leave complete rows")
    func concurrentUpsertsFromTwoStores() async throws {
        try await TestScope.run {
            let table = TestScope.table()
            let first = try TestScope.store(Item.self, table: table)
            let second = try TestScope.store(Item.self, table: table)
            let storedAt = Date(timeIntervalSinceReferenceDate: 800_000_000)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for round in 0..<60 {
                    let store = round.isMultiple(of: 2) ? first : second
                    let item = Item(id: round, name: "round \(round)")
                    group.addTask { try await store.insert(item, for: "shared", storedAt: storedAt) }
                    group.addTask { try await store.insert(item, for: "key-\(round % 10)", storedAt: storedAt) }
                }
                try await group.waitForAll()
            }
            let shared = try #require(try await first.retrieve("shared"))
            #expect(shared.value.name == "round \(shared.value.id)")
            #expect(try await second.retrieve("shared") == shared)
            #expect(try await first.count == 11)
            for key in 0..<10 {
                let value = try #require(try await second.retrieve("key-\(key)")).value
                #expect(value.id % 10 == key && value.name == "round \(value.id)")
            }
        }
    }

    @Test("stores starting together on a new table all create it without error")
    func tableCreationIsSafeWhenManyStart() async throws {
        try await TestScope.run {
            let table = TestScope.table()
            let stores = try (0..<6).map { _ in try TestScope.store(Item.self, table: table) }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (index, store) in stores.enumerated() {
                    group.addTask { try await store.insert(itemA, for: "key-\(index)", storedAt: Date()) }
                }
                try await group.waitForAll()
            }
            #expect(try await stores[0].count == stores.count)
        }
    }

    @Test("removeEntries(storedBefore:) removes exactly the rows stored before the date")
    func sweepByStoredAt() async throws {
        try await TestScope.run {
            let store = try TestScope.store(Item.self, table: TestScope.table())
            let boundary = Date(timeIntervalSinceReferenceDate: 812_345_678.987_654_321)
            try await store.insert(itemA, for: "old", storedAt: boundary.addingTimeInterval(-3600))
            // Less than a microsecond before the boundary: the timestamp column cannot tell them apart.
            try await store.insert(itemA, for: "just-before", storedAt: Date(timeIntervalSinceReferenceDate: boundary.timeIntervalSinceReferenceDate.nextDown))
            try await store.insert(itemUnicode, for: "at", storedAt: boundary)
            try await store.insert(itemUnicode, for: "after", storedAt: boundary.addingTimeInterval(60))

            #expect(try await store.removeEntries(storedBefore: boundary) == 2)
            #expect(try await store.retrieve("old") == nil)
            #expect(try await store.retrieve("just-before") == nil)
            #expect(try await store.retrieve("at")?.value == itemUnicode)
            #expect(try await store.retrieve("after")?.value == itemUnicode)
            #expect(try await store.removeEntries(storedBefore: boundary) == 0)
            #expect(try await store.count == 2)
        }
    }

    @Test("a store with maxAge sweeps rows past it after an insert, and on demand")
    func maxAgeSweeps() async throws {
        try await TestScope.run {
            let table = TestScope.table()
            let clock = ManualClock()
            let store = try TestScope.store(Item.self, table: table, maxAge: .seconds(3600), now: clock.wallClock)
            // Written by a store without maxAge: never expires.
            let keeper = try TestScope.store(Item.self, table: table, now: clock.wallClock)
            try await keeper.insert(itemA, for: "no-expiry", storedAt: clock.date.addingTimeInterval(-86_400))

            // Two hours old when written: expired at once, so the sweep after this very insert removes it.
            try await store.insert(itemA, for: "stale", storedAt: clock.date.addingTimeInterval(-7200))
            #expect(try await store.retrieve("stale") == nil)
            try await store.insert(itemUnicode, for: "fresh", storedAt: clock.date)
            #expect(try await store.retrieve("fresh")?.value == itemUnicode)

            clock.advance(by: .seconds(3599))
            #expect(try await store.removeExpiredEntries() == 0)
            clock.advance(by: .seconds(1))
            #expect(try await store.removeExpiredEntries() == 1)
            #expect(try await store.retrieve("fresh") == nil)
            #expect(try await store.retrieve("no-expiry")?.value == itemA)
        }
    }

    @Test("removeEntries(lastAccessedBefore:) keeps what was read recently")
    func sweepByLastAccess() async throws {
        try await TestScope.run {
            let clock = ManualClock()
            let store = try TestScope.store(Item.self, table: TestScope.table(), now: clock.wallClock)
            try await store.insert(itemA, for: "read", storedAt: clock.date)
            try await store.insert(itemUnicode, for: "unread", storedAt: clock.date)
            clock.advance(by: .seconds(3600))
            #expect(try await store.retrieve("read")?.value == itemA)  // refreshes last_access
            let cutoff = clock.date.addingTimeInterval(-60)
            #expect(try await store.removeEntries(lastAccessedBefore: cutoff) == 1)
            #expect(try await store.retrieve("read")?.value == itemA)
            #expect(try await store.retrieve("unread") == nil)
        }
    }

    /// Ways a row can stop decoding, as SQL against the row of key `feed`.
    enum Damage: String, CaseIterable, Sendable {
        case garbageBytes, truncatedValue, otherJSONType, wrongSize

        var sql: String {
            switch self {
            case .garbageBytes: "value = '\\x00ff10'::bytea, size = 3"
            case .truncatedValue: "value = substring(value from 1 for 5)"
            case .otherJSONType: "value = convert_to('\"text\"', 'UTF8'), size = 6"
            case .wrongSize: "size = -1"
            }
        }
    }

    @Test("a row that no longer decodes is a miss, is deleted, and is logged at warning", arguments: Damage.allCases)
    func undecodableRowIsAMissAndRemoved(_ damage: Damage) async throws {
        try await TestScope.run {
            let table = TestScope.table()
            let logs = LogCapture(level: .warning)
            let store = try TestScope.store(Item.self, table: table, logger: logs.logger)
            try await store.insert(itemA, for: "feed", storedAt: Date())
            try await store.insert(itemUnicode, for: "other", storedAt: Date())
            try await Admin.require().execute(PostgresQuery(unsafeSQL: #"UPDATE "\#(table)" SET \#(damage.sql) WHERE key = 'feed'"#))

            #expect(try await store.retrieve("feed") == nil)
            #expect(try await Admin.require().rowCount(in: table, key: "feed") == 0)
            #expect(try await store.retrieve("other")?.value == itemUnicode)
            // PostgresNIO may warn first that the store's first statement asked for a connection
            // before its client's `run()` had started (it waits, and the statement runs): under
            // load that happens, and it is not this test's subject.
            let warning = try #require(logs.entries.first { $0.message == "removing undecodable cache row" })
            #expect(warning.level == .warning)
            #expect(logs.entries.allSatisfy { $0.message == warning.message || $0.message.hasPrefix("Trying to lease connection") })
            #expect(warning.metadata["key"] == "feed")
            #expect(warning.metadata["store"] == "\(store)")
        }
    }

    @Test("an operation that gets no answer within queryTimeout fails, and the store stays usable")
    func queryTimeout() async throws {
        try await TestScope.run {
            let table = TestScope.table()
            // The row is written through a store with the default bounds: at the start of a full run
            // on two loaded cores, creating the table and the first write can take seconds.
            try await TestScope.store(Item.self, table: table).insert(itemA, for: "feed", storedAt: Date())
            // Without the server's bound (statementTimeout), which would answer first: this is the
            // store's own, for a server that does not answer at all.
            let configuration = try TestServer.configuration()
            let store = try PostgresStore<Item>(
                configuration: configuration, tls: PostgresTLSMode(reading: configuration.tls), applicationClient: nil, table: table, codec: JSONCodec<Item>(), connectTimeout: TestServer.connectTimeout, queryTimeout: .seconds(10), statementTimeout: nil, maxAge: nil, now: { Date() }, logger: quietLogger, boundsStatements: false)
            TestScope.onExit { await store.shutdown() }

            let admin = try Admin.require()
            let clock = ContinuousClock()
            // Another session holds the table locked, so the store's read waits on the server.
            try await admin.client.withTransaction(logger: quietLogger) { connection in
                try await connection.query(#"LOCK TABLE "\#(unescaped: table)" IN ACCESS EXCLUSIVE MODE"#, logger: quietLogger)
                let started = clock.now
                let error = await #expect(throws: StoreError.self) { try await store.retrieve("feed") }
                #expect(error?.reason.hasPrefix("no answer from the database at ") == true, "\(String(describing: error))")
                // ~10 s; forever without the bound. The connect timeout is the margin for a loaded run.
                #expect(started.duration(to: clock.now) < .seconds(10) + TestServer.connectTimeout)
            }
            #expect(try await store.retrieve("feed")?.value == itemA)
        }
    }

    @Test("a wrong password is a typed error naming the cause, and never shows the password")
    func wrongPassword() async throws {
        try await TestScope.run {
            var configuration = try TestServer.configuration()
            configuration.password = "wrong-pw-91c2"
            let logs = LogCapture()
            let store = try PostgresStore<Item>(
                configuration: configuration,
                options: PostgresStoreOptions(table: TestScope.table(), connectTimeout: TestServer.connectTimeout, logger: logs.logger))
            TestScope.onExit { await store.shutdown() }
            let error = await #expect(throws: StoreError.self) { try await store.retrieve("feed") }
            // On the rejected attempt, not after the connect timeout (the reason below would then be
            // "no connection within 60 s", and the cause `.unreachable`).
            #expect(error?.reason.contains("password authentication failed") == true, "\(String(describing: error))")
            #expect(error?.reason.contains("SQLSTATE 28P01") == true, "\(String(describing: error))")
            let failure = error?.underlying as? PostgresConnectionError
            #expect(failure?.cause == .authenticationRejected, "\(String(describing: error?.underlying))")
            #expect(failure?.sqlState == "28P01")
            #expect(failure?.error?.code == .server)
            #expect(error?.description.contains("wrong-pw-91c2") == false)
            #expect(!logs.entries.isEmpty)
            for entry in logs.entries {
                #expect(!entry.line().contains("wrong-pw-91c2"), "\(entry.line())")
            }
        }
    }

    @Test("count and removeAll")
    func countAndRemoveAll() async throws {
        try await TestScope.run {
            let store = try TestScope.store(Item.self, table: TestScope.table())
            #expect(try await store.count == 0)
            for index in 0..<5 { try await store.insert(itemA, for: "key-\(index)", storedAt: Date()) }
            #expect(try await store.count == 5)
            try await store.removeAll()
            #expect(try await store.count == 0)
            #expect(try await store.retrieve("key-0") == nil)
        }
    }

    @Test("a value the codec cannot encode is an insert error and the previous row stays")
    func unencodableValueKeepsPreviousRow() async throws {
        try await TestScope.run {
            let store = try PostgresStore<Double>(
                configuration: TestServer.configuration(),
                options: PostgresStoreOptions(table: TestScope.table(), connectTimeout: TestServer.connectTimeout, logger: quietLogger))
            TestScope.onExit { await store.shutdown() }
            try await store.insert(1.5, for: "ratio", storedAt: Date())
            let error = await #expect(throws: StoreError.self) {
                try await store.insert(.nan, for: "ratio", storedAt: Date())
            }
            #expect(error?.operation == .insert)
            #expect(error?.reason.hasPrefix("value does not encode") == true)
            #expect(try await store.retrieve("ratio")?.value == 1.5)
        }
    }

    private static func columns(of table: String) async throws -> [String: String] {
        let rows = try await Admin.require().client.query(
            "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = \(table)")
        var columns: [String: String] = [:]
        for try await (name, type) in rows.decode((String, String).self) { columns[name] = type }
        return columns
    }
}

@Suite("PostgresStore refresh and server max-age", .enabled(if: TestServer.isAvailable, TestServer.skipReason))
struct PostgresRefreshTests {
    @Test func refreshRestampsOnlyTheTimeAndValidatorColumns() async throws {
        try await TestScope.run {
            let store = try TestScope.store(Item.self, table: TestScope.table())
            let first = Date(timeIntervalSinceReferenceDate: 800_000_000.25)
            try await store.insert(itemA, for: "feed", storedAt: first, validators: CacheValidators(etag: "\"1\""))
            let later = first.addingTimeInterval(60)
            let validators = CacheValidators(etag: "\"2\"", lastModified: "Sun, 06 Nov 1994 08:49:37 GMT", maxAge: .milliseconds(1500))
            #expect(try await store.refresh("feed", storedAt: later, validators: validators))
            let entry = try #require(try await store.retrieve("feed"))
            #expect(entry == CacheEntry(value: itemA, storedAt: later, validators: validators))
            #expect(try await store.refresh("missing", storedAt: later, validators: validators) == false)
            #expect(try await store.retrieve("missing") == nil)
        }
    }

    @Test func aTableFromBeforeMaxAgeGainsItsColumnsInPlace() async throws {
        try await TestScope.run {
            let table = TestScope.table()
            let store = try TestScope.store(Item.self, table: table)
            try await store.insert(itemA, for: "feed", storedAt: Date())
            try await Admin.require().execute(
                #"ALTER TABLE "\#(unescaped: table)" DROP COLUMN max_age_seconds, DROP COLUMN max_age_attoseconds"#)
            let reopened = try TestScope.store(Item.self, table: table)
            #expect(try await reopened.retrieve("feed")?.value == itemA)
            #expect(try await reopened.retrieve("feed")?.validators.maxAge == nil)
        }
    }
}
#endif
