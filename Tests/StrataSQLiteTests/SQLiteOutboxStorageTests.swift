#if SQLite
import Foundation
import GRDB
import Logging
@_spi(StrataInternals) import Strata
import StrataOutbox
import StrataSQLite
import StrataTesting
import Testing

/// The outbox storage contract on a real SQLite file.
@Suite("SQLiteOutboxStorage contract")
struct SQLiteOutboxStorageContractTests {
    static let corruption = OutboxStorageContract<SQLiteOutboxStorage>.Corruption(
        corrupt: { storage, id in try writeGarbage(into: id, at: storage.path) },
        isSetAside: { storage, id in try setAsideRows(for: id, at: storage.path).contains { $0.entry == garbage } })

    /// A file of its own, opened by path.
    static let file = OutboxStorageContract<SQLiteOutboxStorage>(
        reopen: { storage in try SQLiteOutboxStorage(path: storage.path, logger: quietLogger) },
        corruption: corruption
    ) {
        try SQLiteOutboxStorage(path: DatabaseFiles.scopedPath(), logger: quietLogger)
    }

    @Test("on a file of its own", arguments: file.applicableCases)
    func ownFile(_ behaviour: OutboxStorageContractCase) async throws {
        try await DatabaseFiles.withScope { try await Self.file.verify(behaviour) }
    }

    /// The application's own `DatabaseQueue` (rollback journal), and a second queue as the other instance.
    static let applicationQueue = OutboxStorageContract<SQLiteOutboxStorage>(
        reopen: { storage in try SQLiteOutboxStorage(database: rawConnection(storage.path), logger: quietLogger) },
        corruption: corruption
    ) {
        try SQLiteOutboxStorage(database: rawConnection(DatabaseFiles.scopedPath()), logger: quietLogger)
    }

    @Test("on an application's DatabaseQueue", arguments: applicationQueue.applicableCases)
    func applicationDatabase(_ behaviour: OutboxStorageContractCase) async throws {
        try await DatabaseFiles.withScope { try await Self.applicationQueue.verify(behaviour) }
    }

    @Test("every case runs")
    func everyCaseRuns() {
        #expect(Self.file.applicableCases == OutboxStorageContractCase.allCases)
    }
}

/// An outbox over SQLite, with the real parts: a file, a relaunch, the delivery path.
@Suite("SQLiteOutboxStorage", .timeLimit(.minutes(1)))
struct SQLiteOutboxStorageTests {
    @Test("writes queued by one outbox are sent by a new outbox over a new storage on the same file, one key each")
    func relaunchSendsQueuedWrites() async throws {
        let directory = try TemporaryDirectory(prefix: "strata-sqlite-outbox")
        let path = directory.appending("app.sqlite").path
        let clock = ManualClock()
        let server = OutboxRecordingServer()
        let queued = try await {
            let outbox = Outbox(storage: try SQLiteOutboxStorage(path: path, logger: quietLogger), environment: clock.environment(logger: quietLogger))
            outbox.registerHTTP(transport: server)
            outbox.connectivityChanged(isOnline: false)
            var entries: [OutboxEntry] = []
            for title in ["first", "second", "third"] {
                let (request, body) = OutboxRecordingServer.post(title: title)
                entries.append(try await outbox.enqueue(request, body: body))
            }
            return entries
        }()
        #expect(server.requests.isEmpty)

        // What a relaunched app makes: a new storage object on the same file, a new outbox.
        let storage = try SQLiteOutboxStorage(path: path, logger: quietLogger)
        let relaunched = Outbox(storage: storage, environment: clock.environment(logger: quietLogger))
        relaunched.registerHTTP(transport: server)
        #expect(try await relaunched.entries().map(\.id) == queued.map(\.id))
        #expect(try await relaunched.drain().delivered == 3)
        #expect(server.requests.map(\.idempotencyKey) == queued.map(\.idempotencyKey))
        #expect(server.requests.map(\.body) == ["first", "second", "third"].map { OutboxRecordingServer.post(title: $0).1 })
        #expect(try await storage.loadAll().isEmpty)
        #expect(try rowCount(SQLiteOutboxStorage.tableName, at: path) == 0)
    }

    @Test("the outbox shares a file with an SQLiteStore; each keeps its own tables")
    func sharesTheStoreFile() async throws {
        let directory = try TemporaryDirectory(prefix: "strata-sqlite-outbox")
        let path = directory.appending("app.sqlite").path
        let store = try SQLiteStore<Item>(path: path, logger: quietLogger)
        let storage = try SQLiteOutboxStorage(path: path, logger: quietLogger)
        let entry = OutboxEntry(id: UUID(), sequence: 1, scope: "items", kind: "note", payload: Data("x".utf8), createdAt: referenceDate)
        try await store.insert(CacheEntry(value: itemA, storedAt: referenceDate), for: "a")
        try await storage.save(entry)
        #expect(try await store.retrieve("a")?.value == itemA)
        #expect(try await storage.loadAll() == [entry])
        // Both open the file again in either order: neither migration disturbs the other.
        let reopenedStorage = try SQLiteOutboxStorage(path: path, logger: quietLogger)
        let reopenedStore = try SQLiteStore<Item>(path: path, logger: quietLogger)
        #expect(try await reopenedStorage.loadAll() == [entry])
        #expect(try await reopenedStore.retrieve("a")?.value == itemA)
    }

    @Test("a row whose entry is garbage is left out, moved to the unreadable table as it was, and logged")
    func corruptRowIsSetAside() async throws {
        let directory = try TemporaryDirectory(prefix: "strata-sqlite-outbox")
        let path = directory.appending("outbox.sqlite").path
        let logs = LogCapture()
        let storage = try SQLiteOutboxStorage(path: path, logger: logs.logger)
        let entries = (0..<3).map { number in
            OutboxEntry(
                id: UUID(), sequence: UInt64(number), scope: "s", kind: "note", payload: Data("\(number)".utf8),
                createdAt: referenceDate)
        }
        for entry in entries { try await storage.save(entry) }
        try writeGarbage(into: entries[1].id, at: path)

        let loaded = try await storage.loadAll()
        #expect(Set(loaded) == [entries[0], entries[2]])
        let aside = try setAsideRows(for: entries[1].id, at: path)
        #expect(aside.count == 1)
        #expect(aside.first?.entry == garbage)
        #expect(aside.first?.reason.contains("does not decode") == true)
        #expect(try rowCount(SQLiteOutboxStorage.tableName, at: path) == 2)
        let logged = logs.entries.filter { $0.level == .error }
        #expect(logged.count == 1)
        #expect(logged.first?.message.contains("set aside") == true)
        #expect(logged.first?.metadata["outbox.entry"] == "\(entries[1].idempotencyKey)")

        // Loading again finds nothing more to set aside; an outbox over it works on the rest.
        #expect(Set(try await storage.loadAll()) == [entries[0], entries[2]])
        #expect(logs.entries.filter { $0.level == .error }.count == 1)
        let outbox = Outbox(storage: storage, environment: ManualClock().environment(logger: quietLogger))
        #expect(try await outbox.entries().map(\.id) == [entries[0].id, entries[2].id])
    }

    @Test("entry(_:) reads its one row: a damaged row of another entry stays where it is until read itself")
    func entryReadsOneRow() async throws {
        let directory = try TemporaryDirectory(prefix: "strata-sqlite-outbox")
        let path = directory.appending("outbox.sqlite").path
        let logs = LogCapture()
        let storage = try SQLiteOutboxStorage(path: path, logger: logs.logger)
        let (intact, damaged) = (
            OutboxEntry(id: UUID(), sequence: 0, scope: "s", kind: "note", payload: Data("0".utf8), createdAt: referenceDate),
            OutboxEntry(id: UUID(), sequence: 1, scope: "s", kind: "note", payload: Data("1".utf8), createdAt: referenceDate))
        try await storage.save(intact)
        try await storage.save(damaged)
        try writeGarbage(into: damaged.id, at: path)

        #expect(try await storage.entry(intact.id) == intact)
        // Before, entry(_:) read every row (through loadAll) and set this one aside on the way.
        #expect(try setAsideRows(for: damaged.id, at: path).isEmpty)
        #expect(try rowCount(SQLiteOutboxStorage.tableName, at: path) == 2)
        #expect(logs.entries.isEmpty)

        #expect(try await storage.entry(damaged.id) == nil)
        #expect(try setAsideRows(for: damaged.id, at: path).map(\.entry) == [garbage])
        #expect(try rowCount(SQLiteOutboxStorage.tableName, at: path) == 1)
        #expect(logs.entries.filter { $0.level == .error }.map(\.message) == ["outbox entry unreadable; set aside, not deleted"])
    }

    @Test("a row of the wrong type or with another entry's id is set aside too", arguments: [
        "UPDATE \(SQLiteOutboxStorage.tableName) SET entry = 42 WHERE id = ?",
        "UPDATE \(SQLiteOutboxStorage.tableName) SET id = 'not-the-id' WHERE id = ?",
    ])
    func malformedRowIsSetAside(_ damage: String) async throws {
        let directory = try TemporaryDirectory(prefix: "strata-sqlite-outbox")
        let path = directory.appending("outbox.sqlite").path
        let storage = try SQLiteOutboxStorage(path: path, logger: quietLogger)
        let damaged = OutboxEntry(id: UUID(), sequence: 0, scope: "s", kind: "k", payload: Data(), createdAt: referenceDate)
        let intact = OutboxEntry(id: UUID(), sequence: 1, scope: "s", kind: "k", payload: Data(), createdAt: referenceDate)
        try await storage.save(damaged)
        try await storage.save(intact)
        try await rawConnection(path).write { db in try db.execute(sql: damage, arguments: [damaged.idempotencyKey]) }
        #expect(try await storage.loadAll() == [intact])
        #expect(try rowCount(SQLiteOutboxStorage.unreadableTableName, at: path) == 1)
    }

    @Test("operations that fail throw a StoreError naming the storage, the operation and the entry")
    func failuresAreTyped() async throws {
        let directory = try TemporaryDirectory(prefix: "strata-sqlite-outbox")
        let path = directory.appending("outbox.sqlite").path
        let storage = try SQLiteOutboxStorage(path: path, logger: quietLogger)
        let entry = OutboxEntry(id: UUID(), sequence: 0, scope: "s", kind: "k", payload: Data(), createdAt: referenceDate)
        try await storage.save(entry)
        let connection = try rawConnection(path)
        let table = SQLiteOutboxStorage.tableName
        try await connection.write { db in try db.execute(sql: "ALTER TABLE \(table) RENAME TO \(table)_away") }
        await expectStoreError(.insert, key: entry.idempotencyKey, storage: storage) { try await storage.save(entry) }
        await expectStoreError(.delete, key: entry.idempotencyKey, storage: storage) { try await storage.remove(entry.id) }
        await expectStoreError(.retrieve, key: nil, storage: storage) { _ = try await storage.loadAll() }
        try await connection.write { db in try db.execute(sql: "ALTER TABLE \(table)_away RENAME TO \(table)") }
        #expect(try await storage.loadAll() == [entry])
    }

    @Test("a file that is not a database, or tables it did not create, fail at open with a typed error")
    func openFailures() throws {
        let directory = try TemporaryDirectory(prefix: "strata-sqlite-outbox")
        let notADatabase = directory.appending("text.sqlite").path
        try Data(repeating: 0x41, count: 4096).write(to: URL(fileURLWithPath: notADatabase))
        #expect {
            try SQLiteOutboxStorage(path: notADatabase, logger: quietLogger)
        } throws: { error in
            guard let error = error as? StoreError else { return false }
            return error.operation == .open && error.store.hasPrefix("SQLiteOutboxStorage(") && error.reason.contains("not a usable SQLite database")
        }

        let foreign = directory.appending("foreign.sqlite").path
        try rawConnection(foreign).write { db in
            try db.execute(sql: "CREATE TABLE \(SQLiteOutboxStorage.tableName) (something TEXT)")
        }
        #expect {
            try SQLiteOutboxStorage(path: foreign, logger: quietLogger)
        } throws: { error in
            guard let error = error as? StoreError else { return false }
            return error.operation == .open && error.reason.contains("did not create")
        }
    }

    @Test("a file made by the storage is 0600 in a 0700 directory it created, in WAL mode")
    func filePermissions() throws {
        let directory = try TemporaryDirectory(prefix: "strata-sqlite-outbox")
        let path = directory.appending("nested/outbox.sqlite").path
        _ = try SQLiteOutboxStorage(path: path, logger: quietLogger)
        let file = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        let folder = try FileManager.default.attributesOfItem(atPath: directory.appending("nested").path)[.posixPermissions] as? Int
        #expect(file == 0o600)
        #expect(folder == 0o700)
        // WAL: a save commits without blocking readers, and the mode is the file's, seen by every connection.
        #expect(try rawConnection(path).read { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") } == "wal")
    }

    @Test("every commit of a queued write is flushed (synchronous = FULL on the writer), also after a sequence is issued")
    func commitsAreFlushed() async throws {
        // GRDB turns WAL on with `synchronous = NORMAL` after `prepareDatabase` runs: a level set
        // only there left every save unflushed (lost on power loss) before this was found.
        let directory = try TemporaryDirectory(prefix: "strata-sqlite-outbox")
        defer { directory.remove() }
        let storage = try SQLiteOutboxStorage(path: directory.appending("outbox.sqlite").path, logger: quietLogger)
        #expect(try await storage.synchronousLevel() == 2)
        _ = try await storage.nextSequence(after: 0)
        #expect(try await storage.synchronousLevel() == 2, "a sequence commits unflushed; a flushed commit after it runs at FULL")
        #expect(try await storage.nextSequence(after: 0) == 2)
        // Inside an unflushed commit the level is NORMAL, every time: `PRAGMA synchronous` takes
        // effect when its statement is prepared, so a cached statement would set it only once.
        // A run of unflushed commits (a drain's) switches once, and stays at NORMAL until a flushed one.
        for _ in 0..<3 {
            #expect(try await storage.synchronousLevelWhileUnflushed() == 1)
            #expect(try await storage.synchronousLevelWhileUnflushed() == 1)
            #expect(try await storage.synchronousLevel() == 2)
        }
    }

    @Test("a file from before strata.outbox.v3 (rows keyed by the idempotency key): each write keeps its latest row, under its id")
    func migrationV3KeysRowsByTheWritesID() async throws {
        let directory = try TemporaryDirectory(prefix: "strata-sqlite-outbox")
        defer { directory.remove() }
        let path = directory.appending("outbox.sqlite").path
        let created = Date(timeIntervalSince1970: 1_767_225_600)
        let (first, other) = (
            OutboxEntry(id: UUID(), sequence: 1, scope: "s", kind: "note", payload: Data("1".utf8), createdAt: created),
            OutboxEntry(id: UUID(), sequence: 2, scope: "s", kind: "note", payload: Data("2".utf8), createdAt: created))
        do {
            let storage = try SQLiteOutboxStorage(path: path, logger: quietLogger)
            try await storage.save(first)
            try await storage.save(other)
        }
        // What the earlier versions wrote after a conflict gave `first` a new key: a second row
        // under "<id>-r1", beside the first one's.
        /// Inserts `entry`'s row keyed by its idempotency key, as the earlier versions did.
        func insertKeyedByItsKey(_ entry: OutboxEntry) async throws {
            let (key, bytes, sequence) = (entry.idempotencyKey, try entry.encodedForStorage(), Int64(entry.sequence))
            try await rawConnection(path).write { db in
                try db.execute(
                    sql: """
                        INSERT INTO strata_outbox_entries (id, sequence, scope, kind, state, attempts, created_at, next_attempt_at, entry)
                        VALUES (?, ?, 's', 'note', 'pending', 0, 0, 0, ?)
                        """,
                    arguments: [key, sequence, bytes])
            }
        }
        var revised = first
        revised.keyRevision = 1
        revised.attempts = 2
        try await insertKeyedByItsKey(revised)
        try await rawConnection(path).write { db in
            try db.execute(sql: "DELETE FROM grdb_migrations WHERE identifier = 'strata.outbox.v3'")
        }
        let reopened = try SQLiteOutboxStorage(path: path, logger: quietLogger)
        #expect(try await reopened.loadAll().sorted { $0.sequence < $1.sequence } == [revised, other])
        #expect(try await reopened.entry(first.id) == revised)
        let superseded = try await rawConnection(path).read { db in
            try String.fetchAll(db, sql: "SELECT reason FROM strata_outbox_unreadable WHERE id = ?", arguments: [first.id.uuidString.lowercased()])
        }
        #expect(superseded.count == 1 && superseded[0].hasPrefix("superseded"), "the older row is set aside, not deleted: \(superseded)")
        try await reopened.removeDelivered(first.id)
        #expect(try await reopened.loadAll() == [other], "its removal leaves nothing of it")

        // A process of an earlier version sharing the file keys a revised write by its key still:
        // read, and removed with it.
        var third = OutboxEntry(id: UUID(), sequence: 3, scope: "s", kind: "note", payload: Data("3".utf8), createdAt: created)
        third.keyRevision = 2
        try await insertKeyedByItsKey(third)
        #expect(try await reopened.loadAll().sorted { $0.sequence < $1.sequence } == [other, third])
        try await reopened.removeDelivered(third.id)
        #expect(try await reopened.loadAll() == [other])
        let ids = try await rawConnection(path).read { db in try String.fetchAll(db, sql: "SELECT id FROM strata_outbox_entries") }
        #expect(ids == [other.id.uuidString.lowercased()])
    }

    @Test("eight connections opening a new file at once: every one opens it, 20 files in a row")
    func concurrentOpenersOfANewFile() throws {
        for round in 0..<20 {
            let directory = try TemporaryDirectory(prefix: "strata-sqlite-outbox")
            defer { directory.remove() }
            let path = directory.appending("outbox.sqlite").path
            let failures = Locked<[String]>([])
            DispatchQueue.concurrentPerform(iterations: 8) { _ in
                do {
                    _ = try SQLiteOutboxStorage(path: path, logger: quietLogger)
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
            }
            #expect(failures.withLock { $0 }.isEmpty, "round \(round): \(failures.withLock { $0 })")
        }
    }

    @Test("an application's WAL pool below FULL is used, with a warning naming the storage")
    func applicationPoolBelowFullIsWarned() throws {
        let directory = try TemporaryDirectory(prefix: "strata-sqlite-outbox")
        defer { directory.remove() }
        let pool = try DatabasePool(path: directory.appending("app.sqlite").path)
        let capture = LogCapture()
        let storage = try SQLiteOutboxStorage(database: pool, logger: capture.logger)
        #expect(capture.entries.contains { $0.level == .warning && $0.message.contains("synchronous below FULL") && $0.metadata["outbox.storage"] == "\(storage.description)" })
    }

    @Test("100 concurrent enqueues into a real SQLite outbox: all stored, numbered in order, read back by a new outbox")
    func concurrentEnqueuesAreGroupCommitted() async throws {
        let directory = try TemporaryDirectory(prefix: "strata-sqlite-outbox")
        defer { directory.remove() }
        let path = directory.appending("outbox.sqlite").path
        let outbox = Outbox(storage: try SQLiteOutboxStorage(path: path, logger: quietLogger), name: "sqlite-burst")
        outbox.connectivityChanged(isOnline: false)
        let queued = try await withThrowingTaskGroup(of: OutboxEntry.self) { group in
            for index in 0..<100 {
                group.addTask { try await outbox.enqueue(kind: "post", scope: "s\(index % 4)", payload: Data("\(index)".utf8)) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let reopened = Outbox(storage: try SQLiteOutboxStorage(path: path, logger: quietLogger), name: "sqlite-burst-2")
        reopened.connectivityChanged(isOnline: false)
        let entries = try await reopened.entries()
        #expect(Set(entries.map(\.id)) == Set(queued.map(\.id)))
        #expect(Set(entries.map(\.sequence)).count == 100)
    }

    func expectStoreError(
        _ operation: StoreError.Operation, key: String?, storage: SQLiteOutboxStorage, _ body: () async throws -> Void
    ) async {
        await #expect {
            try await body()
        } throws: { error in
            guard let error = error as? StoreError else { return false }
            return error.operation == operation && error.key == key && error.store == storage.description && !error.reason.isEmpty
        }
    }
}

/// What the corrupt-row tests write into the `entry` column.
let garbage = Data("garbage \u{0}\u{1}".utf8)

/// Overwrites the stored entry of `id` with ``garbage``, from a connection of the test's own.
func writeGarbage(into id: UUID, at path: String) throws {
    try rawConnection(path).write { db in
        try db.execute(
            sql: "UPDATE \(SQLiteOutboxStorage.tableName) SET entry = ? WHERE id = ?",
            arguments: [garbage, id.uuidString.lowercased()])
        precondition(db.changesCount == 1, "no row to damage")
    }
}

/// The rows set aside for `id`.
func setAsideRows(for id: UUID, at path: String) throws -> [(entry: Data?, reason: String)] {
    try rawConnection(path).read { db in
        try Row.fetchAll(
            db, sql: "SELECT entry, reason FROM \(SQLiteOutboxStorage.unreadableTableName) WHERE id = ?",
            arguments: [id.uuidString.lowercased()]
        ).map { (entry: $0["entry"], reason: $0["reason"]) }
    }
}

func rowCount(_ table: String, at path: String) throws -> Int {
    try rawConnection(path).read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(table)") ?? -1 }
}

/// A server in a closure: records every request and answers 201.
final class OutboxRecordingServer: HTTPTransport {
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
