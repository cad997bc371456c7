import Foundation
import Testing
@_spi(StrataInternals) import Strata
import StrataDemo
import StrataTesting

/// `swift run strata demo` runs this scenario; the test checks what each step reports.
@Suite("strata demo", .timeLimit(.minutes(3)))
struct DemoTests {
    @Test func narratesTheFiveStepsWithTheRightTierAndNetworkUse() async throws {
        let lines = Locked<[String]>([])
        let steps = try await OfflineFirstDemo().run { line in lines.withLock { $0.append(line) } }

        #expect(steps.map(\.served.provenance.origin) == [.bundled, .remote, .disk, .disk, .remote])
        #expect(steps.map(\.served.provenance.tier) == ["bundled default", "remote", "fresh local", "stale local", "remote"])
        #expect(steps.map(\.requestsSent) == [1, 1, 0, 1, 1])
        #expect(steps.map(\.requestsAnswered) == [0, 1, 0, 0, 1])
        #expect(steps[2].served.provenance.age == .seconds(2 * 3600))
        #expect(steps[3].served.provenance.age == .seconds(25 * 3600))

        let output = lines.withLock { $0 }.joined(separator: "\n")
        #expect(output.contains("1. First launch, offline"))
        #expect(output.contains("no request made"))
        #expect(output.contains("stale local ✓"))
    }
}

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
