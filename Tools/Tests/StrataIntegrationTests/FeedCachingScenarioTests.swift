import Foundation
import Testing
@_spi(StrataInternals) import Strata
import DemoServer
import StrataDemo
import StrataTesting

/// `strata demo --scenario feed-caching` runs this scenario (S0 FeedCaching against the real demo
/// server); the test checks what each step observed.
@Suite("S0 FeedCaching: strata demo --scenario feed-caching", .timeLimit(.minutes(3)))
struct FeedCachingScenarioTests {
    @Test func narratesOnlineThenCachedThenTheOriginalErrorWithTheRightSourceAndNetworkUse() async throws {
        let lines = Locked<[String]>([])

        let steps = try await FeedCachingScenario().run { line in lines.withLock { $0.append(line) } }

        try #require(steps.count == 3)
        #expect(steps.map { $0.served?.provenance.origin } == [.remote, .disk, nil])
        #expect(steps[0].served?.value.map(\.title) == DemoData.feed.map(\.title))
        #expect(steps[1].served?.value.map(\.title) == DemoData.feed.map(\.title))
        #expect(steps[1].served?.provenance.age == .seconds(2 * 3600))
        #expect(steps.map(\.requestsSent) == [1, 1, 1])
        #expect(steps.map(\.requestsAnswered) == [1, 0, 0])
        #expect(steps.map(\.cachedItems) == [3, 3, 0])
        #expect(steps.map(\.screen) == [
            "from the server, just now",
            "saved on this device 2h 0m ago",
            "Can't reach the server. Check your connection and try again.",
        ])

        let error = try #require(steps[2].error as? HTTPError)
        guard case .transport(let url, _, _) = error else {
            Issue.record("expected the original transport error, got \(error)")
            return
        }
        #expect(url.path == "/feed")

        #expect(steps[0].log == ["info feed load started", "info feed load succeeded count=3"])
        #expect(steps[1].log == ["info feed load started", "info feed load succeeded count=3"])
        #expect(steps[2].log == ["info feed load started", "error feed load failed error.type=HTTPError"])

        let output = lines.withLock { $0 }.joined(separator: "\n")
        #expect(output.contains("1. Online"))
        #expect(output.contains("2. Two hours later, server down"))
        #expect(output.contains("local cache (the decorator's fallback), 3 items — \"Decorators in Swift\", age 2h 0m"))
        #expect(output.contains("1 request sent, no answer"))
        #expect(output.contains("error      HTTPError: HTTP request to"))
        #expect(output.contains("screen     \"Can't reach the server. Check your connection and try again.\""))
    }
}
