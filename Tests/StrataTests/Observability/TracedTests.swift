import Foundation
import InMemoryTracing
import Logging
import MetricsTestKit
import Testing
import Tracing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

@Suite("traced(_:tracer:)")
struct TracedTests {
    let clock = ManualClock()

    @Test func aSpanCarriesOriginTierRetriesAndEvents() async throws {
        let tracer = InMemoryTracer()
        let sut = observedChain(clock: clock).traced("load feed", tracer: tracer)
        #expect(try await sut.load() == 42)

        let span = try #require(tracer.finishedSpans.first)
        #expect(tracer.finishedSpans.count == 1)
        #expect(span.operationName == "load feed")
        #expect(span.attributes["strata.origin"]?.toSpanAttribute() == "remote")
        #expect(span.attributes["strata.tier"]?.toSpanAttribute() == "remote")
        #expect(span.attributes["strata.retries"]?.toSpanAttribute() == 1)
        #expect(span.attributes["strata.outcome"]?.toSpanAttribute() == "served")
        #expect(span.events.map(\.name) == ["tier_failed", "retrying", "served"])
        #expect(span.status == nil)
    }

    @Test func aFailedLoadRecordsTheErrorAndAnErrorStatus() async throws {
        let tracer = InMemoryTracer()
        let secret = HTTPError.transport(url: URL(string: "https://u:hunter2@x.example/a?token=abc123")!, reason: "reset", underlying: nil)
        let sut = StubLoader<Void, Int>(.failure(secret)).traced(tracer: tracer)
        await #expect(throws: HTTPError.self) { try await sut.load() }
        let span = try #require(tracer.finishedSpans.first)
        #expect(span.status?.code == .error)
        #expect(span.errors.count == 1)
        let recorded = "\(span.errors.map(\.error)) \(span.status?.message ?? "")"
        #expect(!recorded.contains("hunter2") && !recorded.contains("abc123"))
        #expect(span.operationName == "strata.load")
    }

    @Test func innerTracedLoadersNestUnderTheOuterSpan() async throws {
        let tracer = InMemoryTracer()
        let sut = ClosureLoader("inner") { 1 }.traced("inner", tracer: tracer).traced("outer", tracer: tracer)
        _ = try await sut.load()
        let spans = tracer.finishedSpans
        let inner = try #require(spans.first { $0.operationName == "inner" })
        let outer = try #require(spans.first { $0.operationName == "outer" })
        #expect(inner.parentSpanID == outer.spanID)
        #expect(inner.traceID == outer.traceID)
    }
}
