// Every scenario of issue 6 beside its baseline, in one run.
//
// Naming (Benchmarks/compare relies on it): `<Scenario>.strata` is Strata's side, `<Scenario>.baseline`
// its baseline (the limit); extra `<Scenario>.<variant>` rows are informational. A name ending in
// `(N loads)` or `(N ops)` measures N operations per iteration: compare divides by N for per-load
// figures. Every benchmark reports wall time, mallocs and throughput (the JMH export needs it).
import Benchmark
import Foundation
@_spi(StrataInternals) import Strata

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .mallocCountTotal, .throughput],
        warmupIterations: 3,
        maxDuration: .seconds(2),
        maxIterations: 2_000
    )
    registerChainBenchmarks()
    registerMemoryStoreBenchmarks()
    registerProductionChainBenchmarks()
    registerFileStoreBenchmarks()
    registerSQLiteStoreBenchmarks()
    registerCoalescingBenchmarks()
    registerRelaunchBenchmarks()
    registerOutboxBenchmarks()
    registerQueryBenchmarks()
}

/// A value a benchmark's `setup` prepares and its body reads.
final class Prepared<Value: Sendable>: Sendable {
    private let slot = Locked<Value?>(nil)

    /// Stores `value` (from `setup`).
    func set(_ value: Value) { slot.withLock { $0 = value } }

    /// The prepared value; a benchmark whose setup did not run is a bug in this file.
    var value: Value {
        guard let value = slot.withLock({ $0 }) else { fatalError("benchmark body ran before its setup") }
        return value
    }
}
