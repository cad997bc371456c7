import Foundation
import InMemoryTracing
import Logging
import MetricsTestKit
import Testing
import Tracing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

@Suite("metered(_:metricsFactory:)")
struct MeteredTests {
    let clock = ManualClock()

    @Test func countsLoadsHitsMissesRetriesAndTimesThem() async throws {
        let metrics = TestMetrics()
        let store = MemoryStore<String, Int>()
        try await store.insert(1, for: "hit", storedAt: clock.date)
        let remote = LoaderSpy<String, Int>(
            .failure(HTTPError.transport(url: URL(string: "https://x")!, reason: "reset", underlying: nil)), .success(2))
        let sut = store.loader(freshness: .any).environment(\.now, clock.wallClock)
            .fallingBack(to: remote.originating(from: .remote).retrying(.constant(attempts: 2, delay: .zero)).environment(\.clock, clock))
            .metered("feed", metricsFactory: metrics)

        _ = try await sut.load("hit")
        _ = try await sut.load("miss")

        let loader = ("loader", "feed")
        #expect(try metrics.expectCounter("strata_loads_total", [loader, ("outcome", "served")]).totalValue == 2)
        #expect(try metrics.expectCounter("strata_cache_hits_total", [loader]).totalValue == 1)
        #expect(try metrics.expectCounter("strata_cache_misses_total", [loader]).totalValue == 1)
        #expect(try metrics.expectCounter("strata_retries_total", [loader]).totalValue == 1)
        #expect(try metrics.expectTimer("strata_load_duration_seconds", [loader, ("outcome", "served")]).values.count == 2)
    }

    @Test func countsErrorsByType() async throws {
        let metrics = TestMetrics()
        let sut = StubLoader<Void, Int>(.failure(TestError())).metered("feed", metricsFactory: metrics)
        _ = try? await sut.load()
        #expect(try metrics.expectCounter("strata_errors_total", [("loader", "feed"), ("error", "TestError")]).totalValue == 1)
        #expect(try metrics.expectCounter("strata_loads_total", [("loader", "feed"), ("outcome", "failed")]).totalValue == 1)
        #expect(try metrics.expectCounter("strata_cache_misses_total", [("loader", "feed")]).totalValue == 1)
    }
}
