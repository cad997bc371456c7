import Metrics

/// What a ``TieredStore`` reports to swift-metrics when it is given a factory, each metric with the
/// dimension `store` (the name it was given):
///
/// | metric | what |
/// |---|---|
/// | `strata_tier_hits_total{tier="memory"\|"shared"}` | reads a tier answered |
/// | `strata_tier_misses_total` | reads neither tier answered (the shared tier failing included) |
/// | `strata_tier_shared_failures_total{operation="read"\|"write"}` | the shared tier failing a read (a miss) or a write (queued) |
/// | `strata_tier_shared_reads_skipped_total` | reads that did not try the shared tier while it was known to be down (misses) |
/// | `strata_tier_unsent_writes` (gauge) | writes waiting for the shared tier: the repairs queued |
/// | `strata_backplane_events_total{kind}` | backplane events: `change` (another node's, acted on), `own` (ignored), `invalidation`, `all`, `listening` |
@usableFromInline
struct TieredStoreMetrics: Sendable {
    @usableFromInline let memoryHits: Counter
    let sharedHits, misses, sharedReadFailures, sharedWriteFailures, sharedReadsSkipped: Counter
    let unsentWrites: Gauge
    let backplaneEvents: [String: Counter]

    init(name: String, factory: any MetricsFactory) {
        let store = ("store", name)
        func counter(_ label: String, _ extra: [(String, String)] = []) -> Counter {
            Counter(label: label, dimensions: [store] + extra, factory: factory)
        }
        memoryHits = counter("strata_tier_hits_total", [("tier", "memory")])
        sharedHits = counter("strata_tier_hits_total", [("tier", "shared")])
        misses = counter("strata_tier_misses_total")
        sharedReadFailures = counter("strata_tier_shared_failures_total", [("operation", "read")])
        sharedWriteFailures = counter("strata_tier_shared_failures_total", [("operation", "write")])
        sharedReadsSkipped = counter("strata_tier_shared_reads_skipped_total")
        unsentWrites = Gauge(label: "strata_tier_unsent_writes", dimensions: [store], factory: factory)
        backplaneEvents = Dictionary(uniqueKeysWithValues: ["change", "own", "invalidation", "all", "listening"].map {
            ($0, counter("strata_backplane_events_total", [("kind", $0)]))
        })
    }
}
