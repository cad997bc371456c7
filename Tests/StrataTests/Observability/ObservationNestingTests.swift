import Foundation
import InMemoryTracing
import Logging
import MetricsTestKit
import Testing
import Tracing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

@Suite("observation nesting")
struct ObservationNestingTests {
    @Test func innerEventsReachEveryEnclosingObserverAndTheCaller() async throws {
        let inner = LogCapture()
        let outer = LogCapture()
        let sut = StubLoader<Void, Int>(.failure(TestError()), name: "a")
            .fallingBack(to: ClosureLoader("b") { 1 }.originating(from: .bundled))
            .logged(to: inner.logger)
            .logged(to: outer.logger)
        let served = try await sut.loadServed()
        #expect(served.provenance.origin == .bundled)
        #expect(inner.entries.contains { $0.message.hasPrefix("failed: a") })
        #expect(outer.entries.contains { $0.message.hasPrefix("failed: a") })
        #expect(served.events.map(\.kind) == ["tier_failed", "served"])
    }
}
