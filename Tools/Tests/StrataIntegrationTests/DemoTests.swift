import Foundation
import Testing
@_spi(StrataInternals) import Strata
import StrataDemo
import StrataTesting

/// `strata demo --scenario resilience` runs this scenario; the test checks what each step reports.
@Suite("strata demo --scenario resilience", .timeLimit(.minutes(3)))
struct ResilienceDemoTests {
    @Test func coalescesTimesOutBreaksAndRecovers() async throws {
        let lines = Locked<[String]>([])
        let steps = try await ResilienceScenario().run { line in lines.withLock { $0.append(line) } }
        try #require(steps.count == 5)
        #expect(steps[0].loads == 50)
        #expect(steps[0].requestsSent == 1)
        #expect(steps[0].servedFrom == "remote")
        #expect(steps[1].servedFrom == "cache", "the hung request timed out and the cache answered")
        #expect(steps[2].circuit == .open)
        #expect(steps[3].requestsSent == 0, "an open circuit sends nothing")
        #expect(steps[3].servedFrom == "cache")
        #expect(steps[4].servedFrom == "remote")
        #expect(steps[4].circuit == .closed)
        #expect(lines.withLock { $0 }.contains { $0.contains("circuit demo api: closed → open") })
    }
}
