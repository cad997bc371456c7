import Foundation
import Metrics
import MetricsTestKit
import Testing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

/// The fleet tier in the logs/metrics/traces vocabulary: the events the latency and fleet operators
/// record (a refresh started ahead, a stale copy served and why, a wait for another process's
/// lock), what `metered` makes of them, and the counters a ``TieredStore`` given a metrics factory
/// keeps (hits per tier, misses, the shared tier's failures, writes waiting, backplane events).
@Suite("The fleet tier's events and metrics", .timeLimit(.minutes(1)))
struct FleetObservabilityTests {
    let clock = ManualClock()

    @Test("a late hit of refreshingAhead records refresh_started once; metered counts it")
    func refreshAhead_isRecorded() async throws {
        let store = MemoryStore<String, String>()
        try await store.insert("cached", for: "feed", storedAt: clock.date)
        let remote = LoaderSpy<Void, String>(.success("fresh"), holdsLoads: true)
        let refreshing = remote.refreshingAhead(.maxAge(.seconds(100)), in: store, key: "feed")
        let metrics = TestMetrics()
        let loader = refreshing.metered("feed", metricsFactory: metrics).environment(clock.environment(logger: quietLogger))
        clock.advance(by: .seconds(85))
        let first = try await loader.loadServed()
        let second = try await loader.loadServed()
        #expect(first.events.map(\.kind) == ["refresh_started", "served"])
        #expect(second.events.map(\.kind) == ["served"], "the refresh is running: no second one")
        #expect(try metrics.expectCounter("strata_refresh_ahead_total", [("loader", "feed")]).totalValue == 1)
        try await remote.waitForLoads(count: 1)
        #expect(remote.complete(0, with: .success("fresh")))
        try await refreshing.waitForBackgroundRefreshes()
    }

    @Test("a copy served after the soft timeout records served_stale(soft_timeout); one served because the load failed, served_stale(load_failed)")
    func staleServed_isRecordedWithItsReason() async throws {
        let store = MemoryStore<String, String>()
        try await store.insert("copy", for: "feed", storedAt: clock.date)
        let metrics = TestMetrics()
        let environment = clock.environment(logger: quietLogger)

        let slow = LoaderSpy<Void, String>(.success("fresh"), holdsLoads: true)
        let soft = slow.servingStaleAfter(.milliseconds(200), in: store, key: "feed", maxStale: .hours(1))
        let early = Task { try await soft.metered("soft", metricsFactory: metrics).environment(environment).loadServed() }
        try await slow.waitForLoads(count: 1)
        try await clock.waitForSleepers(count: 2)
        clock.advance(by: .milliseconds(200))
        let served = try await early.value
        #expect(served.events.map(\.kind) == ["served_stale", "served"])
        guard case .servedStale(_, let reason) = served.events.first else { Issue.record("no served_stale"); return }
        #expect(reason == .softTimeout)
        #expect(try metrics.expectCounter("strata_stale_served_total", [("loader", "soft"), ("reason", "soft_timeout")]).totalValue == 1)
        #expect(slow.complete(0, with: .success("fresh")))
        try await soft.waitForBackgroundLoads()

        let failing = ClosureLoader<Void, String>("offline") { throw URLError(.notConnectedToInternet) }
        let fallback = try await failing.servingStaleOnError(in: store, key: "feed")
            .metered("fallback", metricsFactory: metrics).environment(environment).loadServed()
        #expect(fallback.events.contains { if case .servedStale(_, .loadFailed) = $0 { true } else { false } })
        #expect(try metrics.expectCounter("strata_stale_served_total", [("loader", "fallback"), ("reason", "load_failed")]).totalValue == 1)
    }

    @Test("a waiter of coalescedAcrossProcesses records how long it waited and how the wait ended")
    func fleetLockWaits_areRecorded() async throws {
        let store = MemoryStore<String, String>()
        let lock = InMemoryFleetLock()
        let metrics = TestMetrics()
        let remote = LoaderSpy<Void, String>(.success("fresh"), holdsLoads: true)
        func process(timeout: Duration) -> some Loader<Void, String> {
            remote.coalescedAcrossProcesses(in: store, key: "feed", freshness: .maxAge(.seconds(60)), lock: lock, timeout: timeout)
                .metered("feed", metricsFactory: metrics)
                .environment(clock.environment(logger: quietLogger))
        }
        let holder = Task { try await process(timeout: .seconds(1)).loadServed() }
        try await remote.waitForLoads(count: 1)
        let waiter = Task { try await process(timeout: .seconds(1)).loadServed() }
        try await clock.waitForSleepers(count: 1)
        #expect(remote.complete(0, with: .success("fresh")))
        _ = try await holder.value
        clock.advance(by: .milliseconds(50))
        let served = try await waiter.value
        #expect(served.events.map(\.kind) == ["waited_for_fleet_lock", "served"])
        guard case .waitedForFleetLock(let key, let waited, let outcome) = served.events.first else { return }
        #expect(key == "feed" && waited == .milliseconds(50) && outcome == .filledByHolder)
        #expect(try metrics.expectCounter("strata_fleet_lock_waits_total", [("loader", "feed"), ("outcome", "filled_by_holder")]).totalValue == 1)

        // A holder that never stores: the waiter gives up at its timeout and loads.
        try await store.removeAll()
        let stuck = Task { try await process(timeout: .seconds(1)).load() }
        try await remote.waitForLoads(count: 2)
        let late = Task { try await process(timeout: .milliseconds(100)).loadServed() }
        for _ in 0..<2 {
            try await clock.waitForSleepers(count: 1)
            clock.advance(by: .milliseconds(50))
        }
        try await remote.waitForLoads(count: 3)
        #expect(remote.complete(2, with: .success("late")))
        let timedOut = try await late.value
        #expect(timedOut.events.contains { if case .waitedForFleetLock(_, .milliseconds(100), .timedOut) = $0 { true } else { false } })
        #expect(remote.complete(1, with: .success("stuck")))
        _ = try await stuck.value
    }

    @Test("a TieredStore given a metrics factory counts hits per tier, misses, the shared tier's failures, writes waiting and backplane events")
    func tieredStore_metrics() async throws {
        struct Down: Error {}
        let metrics = TestMetrics()
        let shared = StoreSpy(MemoryStore<String, String>())
        let backplane = ScriptedBackplane(node: "b")
        let tiered = TieredStore(
            memory: MemoryStore(), shared: shared, backplane: backplane, environment: clock.environment(logger: quietLogger),
            metricsFactory: metrics, metricsName: "feeds")
        let store = ("store", "feeds")
        try await shared.base.insert("v", for: "k", storedAt: clock.date)
        #expect(try await tiered.retrieve("k")?.value == "v")   // shared hit, kept in memory
        #expect(try await tiered.retrieve("k")?.value == "v")   // memory hit
        #expect(try await tiered.retrieve("absent") == nil)     // miss
        #expect(try metrics.expectCounter("strata_tier_hits_total", [store, ("tier", "memory")]).totalValue == 1)
        #expect(try metrics.expectCounter("strata_tier_hits_total", [store, ("tier", "shared")]).totalValue == 1)
        #expect(try metrics.expectCounter("strata_tier_misses_total", [store]).totalValue == 1)

        shared.faults = .init(insert: Down())
        try await tiered.insert("w", for: "w", storedAt: clock.date)   // refused: it waits
        shared.faults = .init(retrieve: Down(), insert: Down())
        #expect(try await tiered.retrieve("other") == nil)
        #expect(try metrics.expectCounter("strata_tier_shared_failures_total", [store, ("operation", "read")]).totalValue == 1)
        #expect(try metrics.expectCounter("strata_tier_shared_failures_total", [store, ("operation", "write")]).totalValue == 1)
        #expect(try metrics.expectGauge("strata_tier_unsent_writes", [store]).lastValue == 1)

        backplane.send(.changed(CacheChange(key: "k", action: .set, at: clock.date.addingTimeInterval(1), sender: "a")))
        backplane.send(.invalidated(CacheInvalidation(selection: .tag("t"), mode: .expire, at: clock.date, sender: "a")))
        backplane.send(.changed(CacheChange(key: "k", action: .set, at: clock.date, sender: "b")))
        try await tiered.waitForBackplaneEvents(atLeast: 3)
        #expect(try metrics.expectCounter("strata_backplane_events_total", [store, ("kind", "change")]).totalValue == 1)
        #expect(try metrics.expectCounter("strata_backplane_events_total", [store, ("kind", "invalidation")]).totalValue == 1)
        #expect(try metrics.expectCounter("strata_backplane_events_total", [store, ("kind", "own")]).totalValue == 1)
    }
}
