import Foundation
import Testing
@_spi(StrataInternals) import Strata
import StrataDemo
import StrataTesting

/// `swift run strata demo` runs this scenario; the test checks what each step reports.
@Suite("strata demo")
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
