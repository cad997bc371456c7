import Foundation
import InMemoryTracing
import Logging
import MetricsTestKit
import Testing
import Tracing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

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
