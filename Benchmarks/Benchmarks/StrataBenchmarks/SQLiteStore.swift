import Benchmark
import BenchmarkFixtures
import Foundation
import GRDB
@_spi(StrataInternals) import Strata
import StrataSQLite
import StrataTesting

/// SQLiteStore reads and writes of 10,000 small entries (64-byte values, stored as they are with
/// `DataCodec`, so the codec costs nothing on either side) against raw GRDB on an equivalent table.
/// Each iteration reads (or writes) the next 1,000 of the 10,000 keys, one operation at a time, so
/// ten iterations cover the whole table and an iteration stays short enough to be sampled often.
///
/// Baseline: a `DatabasePool` (WAL, GRDB's default configuration, as SQLiteStore uses) on a table with
/// the entry's data — `key TEXT PRIMARY KEY, value BLOB, stored_at REAL, etag, last_modified, max_age` —
/// one `pool.read` with a cached `SELECT` per read, one `pool.write` with a cached upsert per write.
/// What SQLiteStore keeps on top (an LRU `last_access` column with its index, a `stored_at` index, a
/// `size` column and the triggers that keep the totals row exact) is its cost, so it is not in the
/// baseline.
func registerSQLiteStoreBenchmarks() {
    let count = 10_000
    let keys = (0..<count).map { "entry-\($0)" }
    let payload = Data((0..<64).map { UInt8($0) })
    let directory = Prepared<TemporaryDirectory>()
    let store = Prepared<SQLiteStore<Data>>()
    let pool = Prepared<DatabasePool>()
    let setup: Benchmark.BenchmarkSetupHook = {
        let temporary = try TemporaryDirectory(prefix: "strata-bench-sqlite")
        directory.set(temporary)
        let sqliteStore = try SQLiteStore<Data>(path: temporary.appending("store.sqlite"), codec: DataCodec())
        for key in keys { try await sqliteStore.insert(payload, for: key, storedAt: Date()) }
        store.set(sqliteStore)
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        let rawPool = try DatabasePool(path: temporary.appending("raw.sqlite").path, configuration: configuration)
        try await rawPool.write { db in
            try db.execute(sql: RawTable.create)
            for key in keys { try RawTable.upsert(db, key: key, value: payload, storedAt: Date()) }
        }
        pool.set(rawPool)
    }
    let teardown: Benchmark.BenchmarkTeardownHook = { directory.value.remove() }
    let configuration = Benchmark.Configuration(maxDuration: .seconds(3), maxIterations: 200, setup: setup, teardown: teardown)
    let batch = 1_000
    // The next 1,000 keys for each benchmark (each benchmark's iterations run one after another).
    let cursors = Locked<[String: Int]>([:])
    let nextKeys: @Sendable (String) -> ArraySlice<String> = { benchmark in
        let start = cursors.withLock { cursors in
            defer { cursors[benchmark, default: 0] = (cursors[benchmark, default: 0] + batch) % count }
            return cursors[benchmark, default: 0]
        }
        return keys[start..<start + batch]
    }

    Benchmark("SQLiteRead.strata (1000 ops)", configuration: configuration) { _ in
        let store = store.value
        for key in nextKeys("SQLiteRead.strata") {
            blackHole(try await store.retrieve(key)!)
        }
    }
    Benchmark("SQLiteRead.baseline (1000 ops)", configuration: configuration) { _ in
        let pool = pool.value
        for key in nextKeys("SQLiteRead.baseline") {
            blackHole(try await pool.read { db in try RawTable.fetch(db, key: key)! })
        }
    }
    Benchmark("SQLiteWrite.strata (1000 ops)", configuration: configuration) { _ in
        let store = store.value
        for key in nextKeys("SQLiteWrite.strata") {
            try await store.insert(payload, for: key, storedAt: Date())
        }
    }
    Benchmark("SQLiteWrite.baseline (1000 ops)", configuration: configuration) { _ in
        let pool = pool.value
        for key in nextKeys("SQLiteWrite.baseline") {
            let storedAt = Date()
            try await pool.write { db in try RawTable.upsert(db, key: key, value: payload, storedAt: storedAt) }
        }
    }
}
