import Benchmark
import BenchmarkFixtures
import Foundation
@_spi(StrataInternals) import Strata
import StrataTesting

/// The upstream calls a coalescing benchmark made in one iteration (must be exactly 1 for `.strata`).
let upstreamCalls = BenchmarkMetric.custom("upstreamCalls", polarity: .prefersSmaller, useScalingFactor: false)

/// 10,000 concurrent identical loads through `coalesced()` against one load.
///
/// Each iteration builds a fresh coalesced loader over an upstream that counts its calls and then
/// waits on a gate; 10,000 tasks call `load()`, and the gate opens once all 10,000 have joined
/// the flight (`waitForWaiters`), so a correct single-flight makes exactly one upstream call. Every
/// caller must receive the 1,000 articles (checked on every iteration). The callers are unstructured
/// tasks awaited in order, not a task group: a group's bookkeeping removes each finished child from a
/// list, and 10,000 children finishing at once made that quadratic walk (in the runtime's
/// `TaskGroup::removeChildTask`) a third of the instructions measured — a cost of the harness, not of
/// coalescing.
///
/// Baseline: one `await` of the same upstream with its gate open. compare reports
/// `(p50 strata − p50 baseline) / 10,000` as the time added per waiter. The `.tasks` row (10,000 tasks
/// each awaiting the upstream directly, no coalescing) shows how much of that is the cost of a task.
func registerCoalescingBenchmarks() {
    let waiters = 10_000
    let feed = BenchmarkFeed.make()
    let configuration = Benchmark.Configuration(
        metrics: [.wallClock, .mallocCountTotal, .throughput, upstreamCalls],
        maxDuration: .seconds(5),
        maxIterations: 300
    )

    Benchmark("Coalesced10k.strata (10000 loads)", configuration: configuration) { benchmark in
        let calls = CallCounter()
        let gate = Gate()
        let loader = ClosureLoader<Void, [Article]>("upstream") {
            calls.increment()
            await gate.wait()
            return feed
        }.coalesced()
        benchmark.startMeasurement()
        let opener = Task {
            try await loader.waitForWaiters(count: waiters)
            gate.open()
        }
        let callers = (0..<waiters).map { _ in Task { try await loader.load().count } }
        var served = 0
        for caller in callers { served += try await caller.value }
        try await opener.value
        benchmark.stopMeasurement()
        precondition(served == waiters * feed.count, "a waiter did not receive the feed")
        benchmark.measurement(upstreamCalls, calls.value)
    }

    Benchmark("Coalesced10k.baseline", configuration: configuration) { benchmark in
        let calls = CallCounter()
        let gate = Gate(open: true)
        let upstream = ClosureLoader<Void, [Article]>("upstream") {
            calls.increment()
            await gate.wait()
            return feed
        }
        benchmark.startMeasurement()
        let served = try await upstream.load().count
        benchmark.stopMeasurement()
        precondition(served == feed.count, "the load did not return the feed")
        benchmark.measurement(upstreamCalls, calls.value)
    }

    Benchmark("Coalesced10k.tasks (10000 loads)", configuration: configuration) { benchmark in
        let calls = CallCounter()
        let gate = Gate(open: true)
        let upstream = ClosureLoader<Void, [Article]>("upstream") {
            calls.increment()
            await gate.wait()
            return feed
        }
        benchmark.startMeasurement()
        let callers = (0..<waiters).map { _ in Task { try await upstream.load().count } }
        var served = 0
        for caller in callers { served += try await caller.value }
        benchmark.stopMeasurement()
        precondition(served == waiters * feed.count, "a task did not receive the feed")
        benchmark.measurement(upstreamCalls, calls.value)
    }
}
