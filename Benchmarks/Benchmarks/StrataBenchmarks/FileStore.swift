import Benchmark
import BenchmarkFixtures
import Foundation
import Strata
import StrataTesting

/// FileStore reads and writes of the 1,000-item feed against Foundation doing the same by hand.
///
/// - Read baseline: `Data(contentsOf:)` + `JSONDecoder` of the very JSON bytes the store keeps as its
///   payload (JSONCodec's output, keys sorted).
/// - Write baseline: `JSONEncoder` with `.sortedKeys` (JSONCodec sorts keys so an unchanged value is
///   stored byte-identical; the baseline produces the same bytes) + `Data.write(options: .atomic)`,
///   which on Linux writes a temporary file, `fsync`s it and renames it. FileStore (default
///   `synchronizesWrites: true`) does the same and also `fsync`s the directory; the `.nosync` row
///   shows the store with both flushes turned off.
/// - Fastest codec: the same read through `BinaryCodec`, against the same JSON baseline.
func registerFileStoreBenchmarks() {
    let feed = BenchmarkFeed.make()
    let directory = Prepared<TemporaryDirectory>()
    let jsonStore = Prepared<FileStore<[Article]>>()
    let binaryStore = Prepared<FileStore<[Article]>>()
    let unsyncedStore = Prepared<FileStore<[Article]>>()
    let setup: Benchmark.BenchmarkSetupHook = {
        let temporary = try TemporaryDirectory(prefix: "strata-bench-files")
        directory.set(temporary)
        let json = FileStore<[Article]>(directory: temporary.appending("json"))
        let binary = FileStore<[Article]>(directory: temporary.appending("binary"), codec: BinaryCodec<[Article]>())
        let unsynced = FileStore<[Article]>(directory: temporary.appending("nosync"), synchronizesWrites: false)
        for store in [json, binary, unsynced] { try await store.insert(feed, for: Scenarios.feedKey, storedAt: Date()) }
        try JSONCodec<[Article]>().encode(feed).write(to: temporary.appending("feed.json"), options: .atomic)
        jsonStore.set(json)
        binaryStore.set(binary)
        unsyncedStore.set(unsynced)
    }
    let teardown: Benchmark.BenchmarkTeardownHook = { directory.value.remove() }
    let configuration = Benchmark.Configuration(maxDuration: .seconds(3), maxIterations: 500, setup: setup, teardown: teardown)

    Benchmark("FileRead.json.strata", configuration: configuration) { _ in
        blackHole(try await jsonStore.value.retrieve(Scenarios.feedKey)!)
    }
    Benchmark("FileRead.json.baseline", configuration: configuration) { _ in
        let url = directory.value.appending("feed.json")
        blackHole(try JSONDecoder().decode([Article].self, from: Data(contentsOf: url)))
    }
    Benchmark("FileRead.binary.strata", configuration: configuration) { _ in
        blackHole(try await binaryStore.value.retrieve(Scenarios.feedKey)!)
    }
    Benchmark("FileWrite.json.strata", configuration: configuration) { _ in
        try await jsonStore.value.insert(feed, for: Scenarios.feedKey, storedAt: Date())
    }
    Benchmark("FileWrite.json.nosync", configuration: configuration) { _ in
        try await unsyncedStore.value.insert(feed, for: Scenarios.feedKey, storedAt: Date())
    }
    Benchmark("FileWrite.json.baseline", configuration: configuration) { _ in
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        try encoder.encode(feed).write(to: directory.value.appending("written.json"), options: .atomic)
    }
}
