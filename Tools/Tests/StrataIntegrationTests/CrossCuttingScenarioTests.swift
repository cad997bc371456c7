import Foundation
import Testing
@_spi(StrataInternals) import Strata
import DemoServer
import StrataDemo

/// `strata demo --scenario cross-cutting` runs this scenario; the test checks what each step reports.
@Suite("S3 CrossCutting: strata demo --scenario cross-cutting", .timeLimit(.minutes(1)))
struct CrossCuttingScenarioTests {
    @Test func narratesAnalyticsAddedAroundTheServiceAndDeliveryOnMain() async throws {
        let lines = Locked<[String]>([])
        let steps = try await CrossCuttingScenario().run { line in lines.withLock { $0.append(line) } }
        let titles = DemoData.feed.map(\.title)

        #expect(steps.count == 7)
        #expect(steps.prefix(3).map(\.loaded) == [titles, titles, titles], "decorators return what the service loaded")
        #expect(steps.prefix(3).map(\.tracked) == [[], [titles], [titles]], "only the decorated loads are tracked")
        #expect(steps.map(\.requestsSent) == [1, 1, 1, 0, 0, 0, 1])
        #expect(steps[0].logged.isEmpty)
        #expect(steps[1].logged == ["info items loaded count=3 values=\(titles)"])

        #expect(steps.dropFirst(3).map(\.deliveredOnMainQueue) == [false, true, true, true])
        #expect(steps[5].deliveredBeforeCallReturned == true, "already on main: delivered without a dispatch")
        #expect(steps[3].loaded == ["Ada"])
        #expect(steps[6].loaded == titles)

        let output = lines.withLock { $0 }.joined(separator: "\n")
        #expect(output.contains("2. Behind AnalyticsDecorator"))
        #expect(output.contains("on the main queue, dispatched with DispatchQueue.main.async"))
        #expect(output.contains("on the main queue, immediately: before fetchUserData returned"))
        #expect(output.contains("off the main queue"))
    }
}
