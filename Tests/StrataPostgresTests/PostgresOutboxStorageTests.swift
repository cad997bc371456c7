#if Postgres
import Foundation
import Logging
import PostgresNIO
@_spi(StrataInternals) import Strata
import StrataOutbox
@testable import StrataPostgres
import StrataTesting
import Testing

/// The outbox storage contract against the real server; each case gets tables of its own.
@Suite("PostgresOutboxStorage contract", .enabled(if: TestServer.isAvailable, TestServer.skipReason))
struct PostgresOutboxStorageContractTests {
    static let contract = OutboxStorageContract<PostgresOutboxStorage>(
        // A second storage with its own connection pool on the same table: another process, as far
        // as the database can tell.
        reopen: { storage in try TestScope.outboxStorage(table: storage.table) },
        corruption: .init(
            corrupt: { storage, id in try await writeGarbage(into: id, of: storage) },
            isSetAside: { storage, id in
                try await Admin.require().integer(
                    #"SELECT count(*) FROM "\#(unescaped: storage.unreadableTable)" WHERE id = \#(id) AND entry = \#(outboxGarbage)"#) == 1
            })
    ) {
        try TestScope.outboxStorage(table: TestScope.outboxTable())
    }

    @Test("every case", arguments: contract.applicableCases)
    func contractCase(_ behaviour: OutboxStorageContractCase) async throws {
        try await TestScope.run { try await Self.contract.verify(behaviour) }
    }

    @Test("every case runs")
    func everyCaseRuns() {
        #expect(Self.contract.applicableCases == OutboxStorageContractCase.allCases)
    }
}

/// An outbox over PostgreSQL, with the real parts: the server, a second process's storage, the
/// delivery path.
@Suite("PostgresOutboxStorage", .enabled(if: TestServer.isAvailable, TestServer.skipReason), .timeLimit(.minutes(2)))
struct PostgresOutboxStorageTests {
    @Test("writes queued by one outbox are sent by a new outbox over a new storage on the same table, one key each")
    func relaunchSendsQueuedWrites() async throws {
        try await TestScope.run {
            let table = TestScope.outboxTable()
            let clock = ManualClock()
            let server = PostgresOutboxRecordingServer()
            let queued = try await {
                let outbox = Outbox(storage: try TestScope.outboxStorage(table: table), environment: clock.environment(logger: quietLogger))
                outbox.registerHTTP(transport: server)
                outbox.connectivityChanged(isOnline: false)
                var entries: [OutboxEntry] = []
                for title in ["first", "second", "third"] {
                    let (request, body) = PostgresOutboxRecordingServer.post(title: title)
                    entries.append(try await outbox.enqueue(request, body: body))
                }
                return entries
            }()
            #expect(server.requests.isEmpty)
            #expect(try await Admin.require().integer(#"SELECT count(*) FROM "\#(unescaped: table)""#) == 3)

            // What a restarted server makes: a new storage with its own pool on the same table, a new outbox.
            let storage = try TestScope.outboxStorage(table: table)
            let restarted = Outbox(storage: storage, environment: clock.environment(logger: quietLogger))
            restarted.registerHTTP(transport: server)
            #expect(try await restarted.entries().map(\.id) == queued.map(\.id))
            #expect(try await restarted.drain().delivered == 3)
            #expect(server.requests.map(\.idempotencyKey) == queued.map(\.idempotencyKey))
            #expect(server.requests.map(\.body) == ["first", "second", "third"].map { PostgresOutboxRecordingServer.post(title: $0).1 })
            #expect(try await storage.loadAll().isEmpty)
        }
    }

    @Test("a row whose entry is garbage is left out, moved to the unreadable table as it was, and logged")
    func corruptRowIsSetAside() async throws {
        try await TestScope.run {
            let logs = LogCapture()
            let storage = try TestScope.outboxStorage(table: TestScope.outboxTable(), logger: logs.logger)
            let entries = (0..<3).map { number in
                OutboxEntry(
                    id: UUID(), sequence: UInt64(number), scope: "s", kind: "note", payload: Data("\(number)".utf8),
                    createdAt: Date(timeIntervalSince1970: 1_767_225_600))
            }
            for entry in entries { try await storage.save(entry) }
            try await writeGarbage(into: entries[1].id, of: storage)

            #expect(Set(try await storage.loadAll()) == [entries[0], entries[2]])
            let admin = try Admin.require()
            #expect(try await admin.integer(#"SELECT count(*) FROM "\#(unescaped: storage.table)""#) == 2)
            #expect(try await admin.integer(
                #"SELECT count(*) FROM "\#(unescaped: storage.unreadableTable)" WHERE id = \#(entries[1].id) AND entry = \#(outboxGarbage) AND reason LIKE '%does not decode%'"#) == 1)
            let logged = logs.entries.filter { $0.level == .error }
            #expect(logged.count == 1)
            #expect(logged.first?.message.contains("set aside") == true)
            #expect(logged.first?.metadata["outbox.entry"] == "\(entries[1].idempotencyKey)")

            #expect(Set(try await storage.loadAll()) == [entries[0], entries[2]])
            #expect(logs.entries.filter { $0.level == .error }.count == 1)
        }
    }

    @Test("entry(_:) reads its one row: a damaged row of another entry stays where it is until read itself")
    func entryReadsOneRow() async throws {
        try await TestScope.run {
            let logs = LogCapture(level: .error)
            let storage = try TestScope.outboxStorage(table: TestScope.outboxTable(), logger: logs.logger)
            let (intact, damaged) = (
                OutboxEntry(id: UUID(), sequence: 0, scope: "s", kind: "note", payload: Data("0".utf8), createdAt: Date(timeIntervalSince1970: 1_767_225_600)),
                OutboxEntry(id: UUID(), sequence: 1, scope: "s", kind: "note", payload: Data("1".utf8), createdAt: Date(timeIntervalSince1970: 1_767_225_600)))
            try await storage.save(intact)
            try await storage.save(damaged)
            try await writeGarbage(into: damaged.id, of: storage)
            let admin = try Admin.require()

            #expect(try await storage.entry(intact.id) == intact)
            // Before, entry(_:) read every row (through loadAll) and set this one aside on the way.
            #expect(try await admin.integer(#"SELECT count(*) FROM "\#(unescaped: storage.table)""#) == 2)
            #expect(try await admin.integer(#"SELECT count(*) FROM "\#(unescaped: storage.unreadableTable)""#) == 0)
            #expect(logs.entries.isEmpty)

            #expect(try await storage.entry(damaged.id) == nil)
            #expect(try await admin.integer(
                #"SELECT count(*) FROM "\#(unescaped: storage.unreadableTable)" WHERE id = \#(damaged.id) AND entry = \#(outboxGarbage)"#) == 1)
            #expect(try await admin.integer(#"SELECT count(*) FROM "\#(unescaped: storage.table)""#) == 1)
            #expect(logs.entries.map(\.message) == ["outbox entry unreadable; set aside, not deleted"])
        }
    }

    @Test("storages of several processes starting at once on a new table all create it and save")
    func concurrentFirstUse() async throws {
        try await TestScope.run {
            let table = TestScope.outboxTable()
            let storages = try (0..<4).map { _ in try TestScope.outboxStorage(table: table) }
            let entries = (0..<4).map { number in
                OutboxEntry(
                    id: UUID(), sequence: UInt64(number), scope: "s\(number)", kind: "k", payload: Data("\(number)".utf8),
                    createdAt: Date(timeIntervalSince1970: 1_767_225_600))
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (storage, entry) in zip(storages, entries) {
                    group.addTask { try await storage.save(entry) }
                }
                try await group.waitForAll()
            }
            for storage in storages {
                #expect(Set(try await storage.loadAll()) == Set(entries))
            }
        }
    }

    @Test("on the application's PostgresClient: works while the application runs it, and shutdown leaves it running")
    func applicationClient() async throws {
        try await TestScope.run {
            let configuration = try TestServer.configuration()
            let client = PostgresClient(configuration: configuration)
            let running = Task { await client.run() }
            defer { running.cancel() }
            let table = TestScope.outboxTable()
            let storage = try PostgresOutboxStorage(
                client: client, configuration: configuration, table: table, connectTimeout: TestServer.connectTimeout, logger: quietLogger)
            let entry = OutboxEntry(id: UUID(), sequence: 0, scope: "s", kind: "k", payload: Data("x".utf8), createdAt: Date(timeIntervalSince1970: 1_767_225_600))
            try await storage.save(entry)
            #expect(try await storage.loadAll() == [entry])
            await storage.shutdown()
            // The client is the application's: still serving its own queries.
            var answered = 0
            for try await value in try await client.query(#"SELECT count(*) FROM "\#(unescaped: table)""#).decode(Int64.self) {
                answered = Int(value)
            }
            #expect(answered == 1)
        }
    }

    @Test("a refused connection fails each operation with a typed StoreError naming the storage", arguments: [
        StoreError.Operation.retrieve, .insert, .delete,
    ])
    func unreachableDatabase(_ operation: StoreError.Operation) async throws {
        let storage = try PostgresOutboxStorage(url: unreachableURL, connectTimeout: .seconds(60), logger: quietLogger)
        let entry = OutboxEntry(id: UUID(), sequence: 0, scope: "s", kind: "k", payload: Data(), createdAt: Date())
        await #expect {
            switch operation {
            case .retrieve: _ = try await storage.loadAll()
            case .insert: try await storage.save(entry)
            default: try await storage.remove(entry.id)
            }
        } throws: { error in
            guard let error = error as? StoreError else { return false }
            let failure = error.underlying as? PostgresConnectionError
            return error.operation == operation
                && error.key == (operation == .retrieve ? nil : entry.idempotencyKey)
                && error.store == "PostgresOutboxStorage(127.0.0.1:1/strata/strata_outbox)"
                && failure?.cause == .refused
                && !error.description.contains("pw-7f3a")
        }
        await storage.shutdown()
    }

    @Test("a table name that is not a plain identifier, or a URL it cannot use, fails at init")
    func badTableOrURL() throws {
        #expect {
            try PostgresOutboxStorage(url: unreachableURL, table: "outbox; DROP TABLE x", logger: quietLogger)
        } throws: { error in
            (error as? StoreError)?.operation == .open && (error as? StoreError)?.store.hasPrefix("PostgresOutboxStorage(") == true
        }
        #expect {
            try PostgresOutboxStorage(url: "mysql://user:secret-pw@host/db", logger: quietLogger)
        } throws: { error in
            guard let error = error as? StoreError else { return false }
            return error.operation == .open && error.store.hasPrefix("PostgresOutboxStorage(") && !error.description.contains("secret-pw")
        }
    }
}

/// What the corrupt-row tests write into the `entry` column.
let outboxGarbage = Data("garbage \u{0}\u{1}".utf8)

/// Overwrites the stored entry of `id` with ``outboxGarbage`` from the tests' own connection.
func writeGarbage(into id: UUID, of storage: PostgresOutboxStorage) async throws {
    let admin = try Admin.require()
    try await admin.execute(#"UPDATE "\#(unescaped: storage.table)" SET entry = \#(outboxGarbage) WHERE id = \#(id)"#)
}

extension TestScope {
    /// A fresh outbox table name; it and its unreadable table are dropped at the end of the scope.
    static func outboxTable() -> String {
        let table = table()
        onExit { try? await Admin.shared?.drop(table + "_unreadable") }
        return table
    }

    /// An outbox storage on the test server, shut down at the end of the scope.
    static func outboxStorage(table: String, logger: Logger = quietLogger) throws -> PostgresOutboxStorage {
        let storage = try PostgresOutboxStorage(
            configuration: TestServer.configuration(), table: table, connectTimeout: TestServer.connectTimeout, logger: logger)
        onExit { await storage.shutdown() }
        return storage
    }
}

/// A server in a closure: records every request and answers 201.
final class PostgresOutboxRecordingServer: HTTPTransport {
    struct Received: Sendable {
        var idempotencyKey: String?
        var body: Data?
    }

    private let received = Locked<[Received]>([])

    var requests: [Received] { received.withLock { $0 } }

    func send(_ request: HTTPRequest, body: Data?, options: HTTPRequestOptions) async throws -> HTTPReply {
        received.withLock { $0.append(Received(idempotencyKey: request.headerFields[HTTPField.Name("Idempotency-Key")!], body: body)) }
        return HTTPReply(response: HTTPResponse(status: .created), url: URL(string: "https://api.example.com/posts")!)
    }

    static func post(title: String) -> (HTTPRequest, Data) {
        var request = HTTPRequest(method: .post, scheme: "https", authority: "api.example.com", path: "/posts")
        request.headerFields[.contentType] = "application/json"
        return (request, Data(#"{"title":"\#(title)"}"#.utf8))
    }
}
#endif
