import Foundation
import InMemoryTracing
import Logging
import MetricsTestKit
import Testing
import Tracing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

/// A chain with a retry, a failing cache tier and a serving tier, so every observer has something to see.
private func chain(clock: ManualClock, cacheAge: Duration? = nil) -> some Loader<Void, Int> {
    let store = MemoryStore<String, Int>()
    let remote = LoaderSpy<Void, Int>(
        .failure(HTTPError.status(code: 503, url: URL(string: "https://user:secret@api.example.com/feed?token=abc")!, headerFields: [:], body: Data())),
        .success(42), name: "remote")
    return store.loader(key: "k", freshness: .maxAge(.seconds(60))).environment(\.now, clock.wallClock).named("fresh local")
        .fallingBack(to: remote.originating(from: .remote).retrying(.constant(attempts: 2, delay: .zero)).environment(\.clock, clock).named("remote"))
}

@Suite("logged(to:level:failureLevel:)")
struct LoggedTests {
    let clock = ManualClock()

    @Test func logsStartEventsAndTheServedValueWithOriginAndTier() async throws {
        let capture = LogCapture(level: .trace)
        let sut = chain(clock: clock).logged(to: capture.logger)
        #expect(try await sut.load() == 42)

        let lines = capture.entries.map { $0.line(excluding: ["duration"]) }
        #expect(lines.first == "debug load started loader=fresh local → remote")
        #expect(lines.contains { $0.hasPrefix("info failed: fresh local: MemoryStore: nothing cached for 'k'") })
        #expect(lines.contains { $0.hasPrefix("info retrying: remote, attempt 2") })
        #expect(lines.last == "info served from remote age=0s loader=fresh local → remote origin=remote retries=1 tier=remote")
    }

    @Test func secretsInErrorsNeverReachTheLog() async throws {
        let capture = LogCapture(level: .trace)
        let url = URL(string: "https://user:hunter2@api.example.com/feed?token=abc123")!
        let failure = HTTPError.transport(url: url, reason: "Authorization: Bearer abc123 rejected", underlying: nil)
        let sut = StubLoader<Void, Int>(.failure(failure), name: "GET \(url.absoluteString)").logged(to: capture.logger)
        await #expect(throws: HTTPError.self) { try await sut.load() }

        let everything = capture.entries.map { $0.line() }.joined(separator: "\n")
        #expect(!everything.contains("hunter2"))
        #expect(!everything.contains("abc123"))
        #expect(capture.entries.last?.level == .error)
        #expect(capture.entries.last?.message == "load failed")
    }

    @Test func atADisabledLevelItIsAPlainCall() async throws {
        let capture = LogCapture(level: .critical)
        let base = LoaderSpy<Void, Int>(.failure(TestError()))
        let sut = base.logged(to: capture.logger)
        await #expect(throws: TestError.self) { try await sut.load() }
        #expect(capture.entries.isEmpty)
        #expect(base.loadCount == 1)
    }

    @Test func breakerChangesAreWarnings() async throws {
        let capture = LogCapture(level: .warning)
        let breaker = CircuitBreaker(name: "api", policy: CircuitBreakerPolicy(minimumThroughput: 1), clock: clock)
        let sut = StubLoader<Void, Int>(.failure(TestError())).guarded(by: breaker).logged(to: capture.logger)
        _ = try? await sut.load()
        #expect(capture.entries.map(\.message) == ["circuit api: closed → open", "load failed"])
    }
}

@Suite("Redaction.redactingSecrets(in:)")
struct RedactionTests {
    @Test(arguments: [
        ("GET https://user:pass@host.example/a", "GET https://***@host.example/a"),
        ("https://host.example/a?token=abc&page=2", "https://host.example/a?token=***&page=***"),
        ("Authorization: Bearer abc.def", "Authorization: ***"),
        ("headers [\"Cookie\": \"session=1\"]", "headers [\"Cookie\": ***"),
        ("sent bearer xyz123 to host", "sent Bearer *** to host"),
        ("x-api-key=k123", "x-api-key=***"),
        ("nothing secret here", "nothing secret here"),
        ("postgres://strata:pw@127.0.0.1:5432/db", "postgres://***@127.0.0.1:5432/db"),
        // Path segments shaped like secrets.
        ("GET https://api.example.com/v1/reset/sk_live_4eC39HqLyjWDarjtT1zdp7dc/confirm", "GET https://api.example.com/v1/reset/***/confirm"),
        ("https://hooks.slack.com/services/xoxb-2444-ab12cd34ef/x", "https://hooks.slack.com/services/***/x"),
        ("https://h.example/files/a8Fk29dLq0ZrT7xW3mNb5vYc1Qs/raw", "https://h.example/files/***/raw"),
        ("https://h.example/s/eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl", "https://h.example/s/***"),
        ("token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl in text", "token *** in text"),
        ("https://s3.example/AKIAIOSFODNN7EXAMPLE/obj", "https://s3.example/***/obj"),
        // Identifiers are kept.
        ("https://api.example.com/users/550e8400-e29b-41d4-a716-446655440000/posts/123456789012345678901234",
         "https://api.example.com/users/550e8400-e29b-41d4-a716-446655440000/posts/123456789012345678901234"),
        ("https://blog.example/how-to-cache-feeds-offline-in-2026", "https://blog.example/how-to-cache-feeds-offline-in-2026"),
    ])
    func redacts(input: String, expected: String) {
        #expect(Redaction.redactingSecrets(in: input) == expected)
    }
}

@Suite("metered(_:factory:)")
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
            .metered("feed", factory: metrics)

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
        let sut = StubLoader<Void, Int>(.failure(TestError())).metered("feed", factory: metrics)
        _ = try? await sut.load()
        #expect(try metrics.expectCounter("strata_errors_total", [("loader", "feed"), ("error", "TestError")]).totalValue == 1)
        #expect(try metrics.expectCounter("strata_loads_total", [("loader", "feed"), ("outcome", "failed")]).totalValue == 1)
        #expect(try metrics.expectCounter("strata_cache_misses_total", [("loader", "feed")]).totalValue == 1)
    }
}

@Suite("traced(_:tracer:)")
struct TracedTests {
    let clock = ManualClock()

    @Test func aSpanCarriesOriginTierRetriesAndEvents() async throws {
        let tracer = InMemoryTracer()
        let sut = chain(clock: clock).traced("load feed", tracer: tracer)
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

@Suite("tracked(by:)")
struct TrackedTests {
    final class Reports: LoadTracker {
        let reports = Locked<[LoadReport]>([])
        func track(_ report: LoadReport) { reports.withLock { $0.append(report) } }
    }

    @Test func everyLoadIsReportedWithItsOutcome() async throws {
        let tracker = Reports()
        let store = MemoryStore<String, Int>()
        try await store.insert(5, for: "k", storedAt: Date())
        let sut = store.loader(key: "k").tracked(by: tracker)
        _ = try await sut.load()
        let failing = StubLoader<Void, Int>(.failure(TestError())).tracked(by: tracker)
        _ = try? await failing.load()

        let reports = tracker.reports.withLock { $0 }
        #expect(reports.count == 2)
        #expect(reports[0].isCacheHit)
        #expect(reports[0].provenance?.origin == .memory)
        #expect(reports[1].outcomeName == "failed")
    }

    @Test func theReportsStringsAreRedacted_itsErrorsKeepTheirType() async throws {
        let tracker = Reports()
        let url = URL(string: "https://user:pw@api.example.com/v1/reset/sk_live_4eC39HqLyjWDarjtT1zdp7dc?token=abc123456")!
        let failure = HTTPError.status(code: 503, url: url, headerFields: [:], body: Data())
        let sut = StubLoader<Void, Int>(.failure(failure), name: "GET \(url.absoluteString)")
            .fallingBack(to: ClosureLoader("cache at \(url.absoluteString)") { 1 }.originating(from: .disk))
            .tracked(by: tracker)
        _ = try await sut.load()

        let report = try #require(tracker.reports.withLock { $0.first })
        let texts = [report.loader, report.description, report.provenance?.tier ?? ""] + report.events.map(\.description)
        for text in texts {
            #expect(!text.contains("pw@"), "\(text)")
            #expect(!text.contains("sk_live_4eC39"), "\(text)")
            #expect(!text.contains("abc123456"), "\(text)")
        }
        guard case .tierFailed(_, let error) = report.events.first else { Issue.record("no tierFailed event"); return }
        #expect(error is HTTPError)
    }
}

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
