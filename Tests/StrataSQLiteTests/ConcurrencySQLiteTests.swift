#if SQLite
import Foundation
@_spi(StrataInternals) import Strata
import StrataSQLite
import StrataTesting
import Testing

/// Many tasks interleaving reads, writes, deletes and refreshes on `SQLiteStore`, through two stores
/// on one file (two connection pools: as two processes would). Run under ThreadSanitizer too:
/// `swift test --sanitize=thread --scratch-path .build-tsan --filter "Concurrency"`.
@Suite("Concurrency: SQLiteStore")
struct ConcurrencySQLiteTests {
    let directory: TemporaryDirectory

    init() throws {
        directory = try TemporaryDirectory(prefix: "strata-sqlite-concurrency")
    }

    @Test func twoStoresOnOneFile() async throws {
        let path = directory.appending("cache.sqlite").path
        let stores = try (0..<2).map { _ in try SQLiteStore<StoreStress.Value>(path: path, logger: quietLogger) }
        let report = try await StoreStress().run(on: stores)
        #expect(report.hits > 0 && report.misses > 0)
    }

    @Test func twoStoresWithACountLimitOnOneFile() async throws {
        let path = directory.appending("cache.sqlite").path
        let stores = try (0..<2).map { _ in
            try SQLiteStore<StoreStress.Value>(path: path, limits: .init(countLimit: 3), logger: quietLogger)
        }
        try await StoreStress().run(on: stores, countLimit: 3, count: { try await stores[0].count })
    }
}
#endif
