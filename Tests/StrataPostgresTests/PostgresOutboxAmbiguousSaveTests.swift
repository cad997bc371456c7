#if Postgres
import Foundation
@_spi(StrataInternals) import Strata
import StrataOutbox
@testable import StrataPostgres
import StrataTesting
import Testing

/// A ``PostgresOutboxStorage`` whose client stops waiting once the row is committed: the save throws
/// as a client timeout does, though the server has the row (the "COMMIT sent, answer lost" case).
struct CommitThenTimeOutStorage: OutboxStorage {
    let base: PostgresOutboxStorage
    let timesOut: @Sendable (OutboxEntry) -> Bool

    func loadAll() async throws -> [OutboxEntry] { try await base.loadAll() }
    func save(_ entry: OutboxEntry) async throws {
        try await base.save(entry)
        if timesOut(entry) { throw TimeoutError(tier: "postgres", timeout: .seconds(5)) }
    }
    func remove(_ id: UUID) async throws { try await base.remove(id) }
    func entry(_ id: UUID) async throws -> OutboxEntry? { try await base.entry(id) }
}

/// `enqueue` over the real server when the save's outcome is ambiguous: it reads the row back and
/// answers "queued", and an app that queues the same write again (same id) gets that entry, so the
/// server applies it once. Before the read-back, `enqueue` threw while the row existed: this process
/// never delivered it, and a retry queued a second copy under a new key.
@Suite("PostgresOutboxStorage: an ambiguous save", .enabled(if: TestServer.isAvailable, TestServer.skipReason), .timeLimit(.minutes(2)))
struct PostgresOutboxAmbiguousSaveTests {
    @Test("a save committed after the client gave up is queued, delivered once, and a retry with its id adds no copy")
    func aCommittedSaveIsQueuedOnce() async throws {
        try await TestScope.run {
            let table = TestScope.outboxTable()
            let base = try TestScope.outboxStorage(table: table)
            let storage = CommitThenTimeOutStorage(base: base, timesOut: { $0.attempts == 0 })
            let server = PostgresOutboxRecordingServer()
            let outbox = Outbox(storage: storage, environment: ManualClock().environment(logger: quietLogger))
            outbox.registerHTTP(transport: server)
            let (request, body) = PostgresOutboxRecordingServer.post(title: "once")
            let id = UUID()
            let entry = try await outbox.enqueue(request, body: body, id: id)
            #expect(entry.id == id)
            let again = try await outbox.enqueue(request, body: body, id: id)
            #expect(again == entry)
            #expect(try await Admin.require().integer(#"SELECT count(*) FROM "\#(unescaped: table)""#) == 1)
            #expect(try await outbox.drain().delivered == 1)
            #expect(server.requests.count == 1)
            #expect(try await Admin.require().integer(#"SELECT count(*) FROM "\#(unescaped: table)""#) == 0)
        }
    }
}
#endif
