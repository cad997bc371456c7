import Foundation
import PostsRepositoryExample
import Testing
@_spi(StrataInternals) import Strata
import StrataOutbox
import StrataDemo

/// `strata demo --scenario offline-write` runs this scenario; the test checks what each step reports.
@Suite("strata demo: offline-write", .timeLimit(.minutes(1)))
struct OfflineWriteScenarioTests {
    @Test func narratesQueuedPendingRelaunchedDeliveredOnceAndPendingGone() async throws {
        let lines = Locked<[String]>([])
        let steps = try await OfflineWriteScenario().run { line in lines.withLock { $0.append(line) } }

        #expect(steps.map(\.title) == [
            "Offline: write a post", "Offline: the list of posts", "Relaunch, still offline",
            "Online: the outbox sends the post", "A second later: the outbox sends it again", "Online: the list of posts",
        ])
        #expect(steps.map(\.queued) == [1, 1, 1, 1, 0, 0])
        #expect(steps.map(\.filesOnDisk) == [1, 1, 1, 1, 0, 0], "the write lives in one file until it is delivered")
        #expect(steps.map(\.pendingInList) == [0, 1, 1, 0, 0, 0])
        #expect(steps.map(\.serverPosts) == [0, 0, 0, 1, 1, 1], "applied by the first send, not again by the second")
        #expect(steps.map(\.requestsSent) == [1, 0, 0, 1, 1, 0], "refused, then two POSTs; the list is served from the cache")
        #expect(steps.map(\.serverWrites.count) == [0, 0, 0, 1, 1, 0])
        #expect(steps[3].serverWrites.first?.hasSuffix(": applied (201), connection dropped without an answer") == true)
        #expect(steps[4].serverWrites.first?.hasSuffix(": already applied, recorded answer sent again (201)") == true)

        let pending = try #require(steps[1].list?.first.flatMap { item -> PendingPost? in
            if case .pending(let pending) = item { pending } else { nil }
        })
        let pendingRow = PostListItem.pending(pending)
        #expect(steps[1].list == [pendingRow])
        #expect(steps[2].list == [pendingRow], "read back from the files after the relaunch")
        #expect(steps[5].list?.map(\.isPending) == [false])
        #expect(steps[5].list?.map(\.title) == [OfflineWriteScenario.title])
        let key = pending.idempotencyKey
        #expect(steps[3].serverWrites.first?.hasPrefix("POST /posts Idempotency-Key \(key)") == true)
        #expect(steps[4].serverWrites.first?.hasPrefix("POST /posts Idempotency-Key \(key)") == true)

        let output = lines.withLock { $0 }.joined(separator: "\n")
        #expect(output.contains("shown      pending: \"Written on the train\", client id "))
        #expect(output.contains("shown      \"Written on the train\" (pending)"))
        #expect(output.contains("pending (1)"))
        #expect(output.contains("the first launch's Outbox has been deallocated"))
        #expect(output.contains("1 delivered: post 1 \"Written on the train\""))
        #expect(output.contains("shown      post 1 \"Written on the train\""))
        #expect(output.contains("0 delivered; the answer was lost (timedOut: "), "the request reached the server: no answer, not unreachable")
        #expect(output.contains("next attempt in 1s, same key"))
        #expect(output.contains("1 request sent, no answer"), "the dropped answer is not counted as one")
        #expect(output.contains("2 requests, applied 1, answered again from the record 1"))
        #expect(output.contains(": 1 post on the server."))
    }
}
