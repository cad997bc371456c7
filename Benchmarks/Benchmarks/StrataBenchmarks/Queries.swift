import Benchmark
import BenchmarkFixtures
import Foundation
@_spi(StrataInternals) import Strata
import StrataTesting
import StrataOutbox
import StrataQueries

/// Live queries (issue 22): a screen's read of an observed, cached query from the main actor against
/// the plain chain's load, and publishing one change to 1, 10 and 1,000 observers.
func registerQueryBenchmarks() {
    let feed = BenchmarkFeed.make()
    let memory = MemoryStore<String, [Article]>()
    let readme = Scenarios.readmeChain(memory: memory)
    let queries = QueryClient(environment: LoadEnvironment(logger: Scenarios.droppingInfoLogger(label: "app.queries")))
    // Fresh for the benchmark's length: observing it does not load.
    let query = queries.query(["feed"], policy: QueryPolicy(staleAfter: .seconds(3600)), chain: readme)
    let live = Prepared<LiveQuery<[Article]>>()
    let selection = Prepared<LiveSelection<[Article], Int>>()
    let setup: Benchmark.BenchmarkSetupHook = {
        try await memory.insert(feed, for: Scenarios.feedKey, storedAt: Date())
        await live.set(MainActor.run { query.observed() })
        await selection.set(MainActor.run { query.observed(select: { $0.count }) })
    }
    let configuration = Benchmark.Configuration(scalingFactor: .kilo, setup: setup)

    // Baseline: what a view model does without a query, a load through the chain.
    Benchmark("QueryRead.baseline (1000 loads)", configuration: configuration) { benchmark in
        try await Scenarios.onMainActor(benchmark.scaledIterations.count) { _ in blackHole(try await readme.load()) }
    }
    // The observed query's value, read as a view reads it.
    Benchmark("QueryRead.strata (1000 loads)", configuration: configuration) { benchmark in
        let live = live.value
        await Scenarios.onMainActor(benchmark.scaledIterations.count) { _ in blackHole(live.value) }
    }
    // A selection of the observed query (its count), read as a view reads it (issue 42: ≤ 1.2× the
    // plain observed read).
    Benchmark("QueryRead.select (1000 loads)", configuration: configuration) { benchmark in
        let selection = selection.value
        await Scenarios.onMainActor(benchmark.scaledIterations.count) { _ in blackHole(selection.value) }
    }
    // The query's snapshot as it is now (`current`), read from the main actor.
    Benchmark("QueryRead.current (1000 loads)", configuration: configuration) { benchmark in
        await Scenarios.onMainActor(benchmark.scaledIterations.count) { _ in blackHole(query.current.value) }
    }
    // A screen appearing: observe the cached query, read the first frame, go away.
    Benchmark("QueryRead.appear (1000 loads)", configuration: configuration) { benchmark in
        await Scenarios.onMainActor(benchmark.scaledIterations.count) { _ in
            let appeared = query.observed()
            blackHole(appeared.value)
        }
    }

    for observers in [1, 10, 1_000] {
        registerPublishBenchmarks(observers: observers)
    }
    registerInspectionBenchmarks()
    registerMutationBenchmarks()
}

/// A mutation with an optimistic update that fails and rolls back (the value set on an observed
/// query, then put back), against a plain `enqueue` of a write into an outbox in memory (issue 42:
/// ≤ 2×).
private func registerMutationBenchmarks() {
    let configuration = Benchmark.Configuration(scalingFactor: .kilo)
    Benchmark("Mutation.rollback (1000 ops)", configuration: configuration) { benchmark in
        let (queries, query, mutation) = Scenarios.refusedMutation()
        let observing = Task { for await _ in query.snapshots() {} }
        try await query.waitForObservers(1)
        try await query.settled()
        benchmark.startMeasurement()
        for index in benchmark.scaledIterations { _ = try? await mutation.mutate(index) }
        benchmark.stopMeasurement()
        observing.cancel()
        blackHole(queries)
    }
    Benchmark("Mutation.enqueue (1000 ops)", configuration: configuration) { benchmark in
        let outbox = Outbox(storage: MemoryOutboxStorage(), name: "benchmark")
        outbox.connectivityChanged(isOnline: false)
        _ = try await outbox.entries()
        let payload = Data(#"{"title":"Offline post","body":"Written on a train, sent later."}"#.utf8)
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations { blackHole(try await outbox.enqueue(kind: "post", scope: "/posts", payload: payload)) }
        benchmark.stopMeasurement()
    }
}

/// What an inspector costs the app: 100 refetches of an observed query (a loader that answers at
/// once), each until it has settled, with nobody following the client's changes against the same
/// with one follower of `changes()`, as a mounted inspector's open page is (it records every load
/// for the timeline and signals the page).
private func registerInspectionBenchmarks() {
    let refetches = 100
    let configuration = Benchmark.Configuration(maxDuration: .seconds(2), maxIterations: 200)
    for inspected in [false, true] {
        Benchmark("QueryRefetch.\(inspected ? "inspected" : "uninspected") (\(refetches) ops)", configuration: configuration) { benchmark in
            let queries = QueryClient(environment: LoadEnvironment(logger: Scenarios.droppingInfoLogger(label: "app.queries")))
            let query = queries.query(["feed"], policy: QueryPolicy(staleAfter: .seconds(3600)), chain: ClosureLoader { 1 })
            let observing = Task { for await _ in query.snapshots() {} }
            let following = inspected ? queries.changes() : nil
            let inspector = following.map { changes in Task { for await _ in changes {} } }
            try await query.waitForObservers(1)
            try await query.settled()
            benchmark.startMeasurement()
            for _ in 0..<refetches {
                query.refetch()
                try await query.settled()
            }
            benchmark.stopMeasurement()
            observing.cancel()
            inspector?.cancel()
        }
    }
}

/// One change of a query's snapshot (its `enabled` flag toggled: a phase change, no load) delivered
/// to `observers` streams, each iterated by a task of its own, against the same snapshots yielded to
/// as many bare `AsyncStream` continuations with the same buffering and the same consumers. Measured
/// until every consumer has received every change.
///
/// The query shows a fresh value before the measurement: one that showed nothing (as this benchmark
/// had it until issue 37) starts a load each time it is enabled again, so the rows measured a load,
/// its task and its cancellation every other change, not a publish.
private func registerPublishBenchmarks(observers: Int) {
    let publishes = 100
    let configuration = Benchmark.Configuration(maxDuration: .seconds(2), maxIterations: 200)
    Benchmark("QueryPublish\(observers).strata (\(publishes) ops)", configuration: configuration) { benchmark in
        let queries = QueryClient(environment: LoadEnvironment(logger: Scenarios.droppingInfoLogger(label: "app.queries")))
        let query = queries.query(["feed"], policy: QueryPolicy(staleAfter: .seconds(3600)), chain: ClosureLoader { 1 })
        query.refetch()
        try await query.settled()
        let received = Locked(0)
        let consumers = (0..<observers).map { _ in
            // Every change buffered, as the baseline's streams buffer them: the reader counts them all.
            let stream = query.snapshots(bufferingNewest: publishes + 1)
            return Task { for await _ in stream { received.withLock { $0 += 1 } } }
        }
        try await query.waitForObservers(observers)
        let initial = received.withLock { $0 }
        benchmark.startMeasurement()
        for index in 0..<publishes { query.setEnabled(index % 2 == 1) }
        await waitUntil { received.withLock { $0 } - initial >= publishes * observers }
        benchmark.stopMeasurement()
        consumers.forEach { $0.cancel() }
    }
    Benchmark("QueryPublish\(observers).baseline (\(publishes) ops)", configuration: configuration) { benchmark in
        // The snapshots a query would send: its own, with the phase toggled.
        let template = QueryClient().query(["feed"], chain: ClosureLoader { 1 }).current
        let snapshot = Locked(template)
        let received = Locked(0)
        var continuations: [AsyncStream<QuerySnapshot<Int>>.Continuation] = []
        let consumers = (0..<observers).map { _ in
            let (stream, continuation) = AsyncStream.makeStream(of: QuerySnapshot<Int>.self, bufferingPolicy: .bufferingNewest(publishes + 1))
            continuations.append(continuation)
            return Task { for await _ in stream { received.withLock { $0 += 1 } } }
        }
        benchmark.startMeasurement()
        for index in 0..<publishes {
            let next = snapshot.withLock { state in
                state.phase = index % 2 == 1 ? .idle : .paused(.disabled)
                return state
            }
            for continuation in continuations { continuation.yield(next) }
        }
        await waitUntil { received.withLock { $0 } >= publishes * observers }
        benchmark.stopMeasurement()
        continuations.forEach { $0.finish() }
        consumers.forEach { $0.cancel() }
    }
}

/// Yields until `condition` holds (the consumers run on the other core, or after this task yields).
private func waitUntil(_ condition: () -> Bool) async {
    while !condition() { await Task.yield() }
}
