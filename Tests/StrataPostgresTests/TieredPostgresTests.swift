#if Postgres
import Foundation
@_spi(StrataInternals) import Strata
import StrataPostgres
import StrataTesting
import Testing

/// `TieredStore` with PostgreSQL as its shared tier: two "nodes" (each its own memory tier and its
/// own connection pool) over one table of the real server, and a node whose database refuses
/// connections.
@Suite("TieredStore over PostgresStore", .enabled(if: TestServer.isAvailable, TestServer.skipReason), .timeLimit(.minutes(2)))
struct TieredPostgresTests {
    struct Down: Error {}

    let clock = ManualClock()

    func node<Shared: Store>(_ shared: Shared) -> TieredStore<MemoryStore<String, Item>, Shared> where Shared.Key == String, Shared.Value == Item {
        TieredStore(memory: MemoryStore(), shared: shared, environment: clock.environment(logger: quietLogger))
    }

    @Test("what node A writes, node B reads from the table and keeps in memory; B's repair never replaces A's later row")
    func twoNodes_oneTable() async throws {
        try await TestScope.run {
            let table = TestScope.table()
            let a = node(try TestScope.store(Item.self, table: table))
            let sharedB = StoreSpy(try TestScope.store(Item.self, table: table))
            let b = node(sharedB)
            let start = clock.date

            try await a.insert(itemA, for: "feed", storedAt: start)
            #expect(b.immediateEntry(for: "feed") == nil)
            #expect(try await b.retrieve("feed")?.value == itemA, "an L2 hit")
            #expect(b.immediateEntry(for: "feed")?.value == itemA, "kept in B's memory tier")
            #expect(b.immediateEntry(for: "feed")?.storedAt == start)

            // B's write fails; meanwhile A stores a later one. When B's tier answers again, B's
            // waiting write is sent as a repair, reads the row, and leaves A's alone.
            sharedB.faults = .init(insert: Down())
            try await b.insert(itemB, for: "feed", storedAt: start.addingTimeInterval(1))
            #expect(b.unsentWrites == 1)
            try await a.insert(itemA, for: "feed", storedAt: start.addingTimeInterval(2))
            sharedB.faults = .init()
            #expect(try await b.retrieve("other") == nil)
            #expect(b.unsentWrites == 0)
            let row = try await a.shared.retrieve("feed")
            #expect(row?.value == itemA && row?.storedAt == start.addingTimeInterval(2))
        }
    }

    @Test("a database that refuses connections is a miss and a waiting write, never a failed call")
    func anUnreachableDatabase_isAMiss() async throws {
        let unreachable = try PostgresStore<Item>(url: "postgres://strata:unused@127.0.0.1:1/strata", options: PostgresStoreOptions(logger: quietLogger))
        let tiered = node(unreachable)
        #expect(try await tiered.retrieve("feed") == nil)
        #expect(tiered.sharedTierIsDown)
        try await tiered.insert(itemA, for: "feed", storedAt: clock.date)
        #expect(try await tiered.retrieve("feed")?.value == itemA, "the memory tier answers")
        #expect(tiered.unsentWrites == 1)
        await unreachable.shutdown()
    }
}
#endif
