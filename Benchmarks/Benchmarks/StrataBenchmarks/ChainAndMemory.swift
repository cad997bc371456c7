import Benchmark
import BenchmarkFixtures
import Foundation
import Strata

/// The 5-operator chain against a direct `await` of the same MemoryStore hit.
///
/// Baseline ("a direct call"): `try await memory.retrieve("feed")!.value` — the store the chain ends
/// in, awaited directly. The ratio is what the four operators in front of the hit add.
func registerChainBenchmarks() {
    let feed = BenchmarkFeed.make()
    let memory = MemoryStore<String, [Article]>()
    let chain = Scenarios.chain5(memory: memory)
    let setup: Benchmark.BenchmarkSetupHook = { try await memory.insert(feed, for: Scenarios.feedKey, storedAt: Date()) }
    let configuration = Benchmark.Configuration(scalingFactor: .kilo, setup: setup)

    Benchmark("Chain5.strata (1000 loads)", configuration: configuration) { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try await chain.load())
        }
    }
    let uncoalesced = Scenarios.chain5Uncoalesced(memory: memory)
    Benchmark("Chain5Uncoalesced.strata (1000 loads)", configuration: configuration) { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try await uncoalesced.load())
        }
    }
    Benchmark("Chain5.baseline (1000 loads)", configuration: configuration) { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try await memory.retrieve(Scenarios.feedKey)!.value)
        }
    }
}

/// MemoryStore hits against a bare `Synchronization.Mutex<[String: Article]>` lookup, from one task and
/// from two tasks at once. Both hold the same 1,000 articles under the same keys and look them up in
/// the same order (so the LRU moves an entry to the front on almost every hit).
func registerMemoryStoreBenchmarks() {
    guard #available(macOS 15, *) else { return }
    let articles = BenchmarkFeed.make()
    let keys = articles.map { "article-\($0.id)" }
    let memory = MemoryStore<String, Article>()
    let mutex = MutexDictionary(Dictionary(uniqueKeysWithValues: zip(keys, articles)))
    let setup: Benchmark.BenchmarkSetupHook = {
        for (key, article) in zip(keys, articles) { try await memory.insert(article, for: key, storedAt: Date()) }
    }
    let configuration = Benchmark.Configuration(scalingFactor: .kilo, setup: setup)

    Benchmark("MemoryHit.1task.strata (1000 loads)", configuration: configuration) { benchmark in
        for index in benchmark.scaledIterations {
            blackHole(try await memory.retrieve(keys[index % keys.count]))
        }
    }
    Benchmark("MemoryHit.1task.baseline (1000 loads)", configuration: configuration) { benchmark in
        for index in benchmark.scaledIterations {
            blackHole(mutex.value(for: keys[index % keys.count]))
        }
    }
    // Two tasks, 1,000 hits each, running at once on the two cores: per-load time is wall / 2,000.
    Benchmark("MemoryHit.2tasks.strata (2000 loads)", configuration: configuration) { _ in
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<2 {
                group.addTask {
                    for index in 0..<1_000 {
                        blackHole(try? await memory.retrieve(keys[(index + task * 500) % keys.count]))
                    }
                }
            }
        }
    }
    Benchmark("MemoryHit.2tasks.baseline (2000 loads)", configuration: configuration) { _ in
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<2 {
                group.addTask {
                    for index in 0..<1_000 {
                        blackHole(mutex.value(for: keys[(index + task * 500) % keys.count]))
                    }
                }
            }
        }
    }
}

/// The README's production chain (``Scenarios/readmeChain(memory:)``) on a memory hit, against a direct
/// `await` of the same store; and the chain, the 5-operator chain and a MemoryStore hit awaited by
/// main-actor code, against the same baselines run on the main actor. A hit from the main actor must
/// not leave it (tests prove it; these rows show what it costs).
func registerProductionChainBenchmarks() {
    guard #available(macOS 15, *) else { return }
    let feed = BenchmarkFeed.make()
    let memory = MemoryStore<String, [Article]>()
    let readme = Scenarios.readmeChain(memory: memory)
    let chain5 = Scenarios.chain5(memory: memory)
    let keys = feed.map { "article-\($0.id)" }
    let hits = MemoryStore<String, Article>()
    let mutex = MutexDictionary(Dictionary(uniqueKeysWithValues: zip(keys, feed)))
    let setup: Benchmark.BenchmarkSetupHook = {
        try await memory.insert(feed, for: Scenarios.feedKey, storedAt: Date())
        for (key, article) in zip(keys, feed) { try await hits.insert(article, for: key, storedAt: Date()) }
    }
    let configuration = Benchmark.Configuration(scalingFactor: .kilo, setup: setup)

    Benchmark("ReadmeChain.strata (1000 loads)", configuration: configuration) { benchmark in
        for _ in benchmark.scaledIterations { blackHole(try await readme.load()) }
    }
    Benchmark("ReadmeChain.baseline (1000 loads)", configuration: configuration) { benchmark in
        for _ in benchmark.scaledIterations { blackHole(try await memory.retrieve(Scenarios.feedKey)!.value) }
    }
    Benchmark("ReadmeChainMain.strata (1000 loads)", configuration: configuration) { benchmark in
        try await loadOnMainActor(readme, benchmark.scaledIterations.count)
    }
    Benchmark("ReadmeChainMain.baseline (1000 loads)", configuration: configuration) { benchmark in
        try await retrieveOnMainActor(memory, benchmark.scaledIterations.count)
    }
    Benchmark("Chain5Main.strata (1000 loads)", configuration: configuration) { benchmark in
        try await loadOnMainActor(chain5, benchmark.scaledIterations.count)
    }
    Benchmark("Chain5Main.baseline (1000 loads)", configuration: configuration) { benchmark in
        try await retrieveOnMainActor(memory, benchmark.scaledIterations.count)
    }
    Benchmark("MemoryHitMain.strata (1000 loads)", configuration: configuration) { benchmark in
        try await Scenarios.onMainActor(benchmark.scaledIterations.count) { index in
            blackHole(try await hits.retrieve(keys[index % keys.count]))
        }
    }
    Benchmark("MemoryHitMain.baseline (1000 loads)", configuration: configuration) { benchmark in
        await Scenarios.onMainActor(benchmark.scaledIterations.count) { index in
            blackHole(mutex.value(for: keys[index % keys.count]))
        }
    }
}

/// `count` loads of `loader`, each awaited by main-actor code itself, as a view model awaits one
/// (a loop that reached each load through a closure value would add an executor check per load).
@MainActor
func loadOnMainActor<L: Loader>(_ loader: L, _ count: Int) async throws where L.Input == Void {
    for _ in 0..<count { blackHole(try await loader.load()) }
}

/// The baseline of ``loadOnMainActor(_:_:)``: the same loop around the store call the chains end in.
@MainActor
func retrieveOnMainActor(_ memory: MemoryStore<String, [Article]>, _ count: Int) async throws {
    for _ in 0..<count { blackHole(try await memory.retrieve(Scenarios.feedKey)!.value) }
}
