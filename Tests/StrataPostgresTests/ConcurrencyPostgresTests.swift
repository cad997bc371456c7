#if Postgres
import Foundation
@_spi(StrataInternals) import Strata
@testable import StrataPostgres
import StrataTesting
import Testing

/// Many tasks interleaving reads, writes, deletes and refreshes on `PostgresStore`, through two stores
/// with connection pools of their own on one table (two server instances sharing the cache).
@Suite("Concurrency: PostgresStore", .enabled(if: TestServer.isAvailable, TestServer.skipReason))
struct ConcurrencyPostgresTests {
    @Test func twoStoresOnOneTable() async throws {
        try await TestScope.run {
            let table = TestScope.table()
            let stores = try (0..<2).map { _ in try TestScope.store(StoreStress.Value.self, table: table) }
            let report = try await StoreStress(tasks: 16, steps: 40, largeValueSize: 16 * 1024).run(on: stores)
            #expect(report.hits > 0)
        }
    }
}
#endif
