import Foundation
import Testing
@_spi(StrataInternals) import Strata
import StrataDemo

/// `strata demo --scenario posts-repository` runs this scenario; the test checks what each step reports.
@Suite("S2 PostsRepository: strata demo --scenario posts-repository", .timeLimit(.minutes(3)))
struct PostsRepositoryScenarioTests {
    @Test func narratesMockThenProduction_withCacheHitsOfflineReadsAndNotFound() async throws {
        let lines = Locked<[String]>([])
        let steps = try await PostsRepositoryScenario().run { line in lines.withLock { $0.append(line) } }

        #expect(steps.map(\.configuration) == [.mock, .mock, .mock, .production, .production, .production, .production, .production])
        #expect(steps.map(\.outcome) == [
            .post(id: 1, title: "Hello from the mock"),
            .post(id: 1, title: "Hello from the mock"),
            .notFound(id: 42),
            .post(id: 1, title: "Hello, server"),
            .post(id: 1, title: "Hello, server"),
            .notFound(id: 99),
            .post(id: 1, title: "Hello, server"),
            .failed("could not connect (connection refused)"),
        ])
        #expect(steps.map(\.requestsSent) == [0, 0, 0, 1, 0, 1, 0, 1], "reads of a cached post send nothing, even offline")
        #expect(steps.map(\.requestsAnswered) == [0, 0, 0, 1, 0, 1, 0, 0])

        let output = lines.withLock { $0 }.joined(separator: "\n")
        #expect(output.contains("5. Production: read it back"))
        #expect(output.contains("post 1 \"Hello, server\", from the disk cache"))
        #expect(output.contains("not found: there is no post with id 99"))
        #expect(output.contains("no request made"))
    }
}
