import Foundation
import Testing
import PostsRepositoryExample
@_spi(StrataInternals) import Strata
import StrataOutbox
import DemoServer
import StrataTesting

/// The production configuration's offline create against the real demo server, with the outbox in
/// real files: queued while the server is down, still queued after a relaunch, created once.
@Suite("S2 PostsRepository: offline posting against a real server", .timeLimit(.minutes(1)))
struct OfflinePostingTests {
    /// One launch of the app: a new outbox and repository over the same directories.
    struct Launch {
        let outbox: Outbox
        let repo: any PostRepo
        let list: any Loader<[Int], [PostListItem]>
    }

    static func launch(_ server: DemoServer, in directory: TemporaryDirectory, clock: ManualClock, delivered: Locked<[Post]>) -> Launch {
        // The parked-write warnings go to a capture, not the test output.
        let outbox = PostsEnvironment.makeOutbox(
            directory: directory.appending("outbox"), environment: clock.environment(logger: LogCapture().logger))
        let environment = PostsEnvironment.production(
            baseURL: server.baseURL, cacheDirectory: directory.appending("posts"), outbox: outbox)
        let repo = environment.makePostRepo { _, post in delivered.withLock { $0.append(post) } }
        let list = PostLoaders.withPendingCreates(PostLoaders.posts(in: repo).named("posts"), outbox: outbox)
        return Launch(outbox: outbox, repo: repo, list: list)
    }

    @Test func aPostWrittenOfflineSurvivesARelaunchAndIsCreatedOnceWhenTheServerIsBack() async throws {
        try await withDemoServer { server in
            let directory = try TemporaryDirectory(prefix: "strata-offline-posts")
            let clock = ManualClock()
            let delivered = Locked<[Post]>([])
            await server.goOffline()

            // Written offline: queued, and shown as pending.
            let first = Self.launch(server, in: directory, clock: clock, delivered: delivered)
            let pending = try #require(try await first.repo.submitPost(title: "On the train", body: "No signal").pendingPost)
            let offline = try await first.list.loadServed([])
            #expect(offline.value == [.pending(pending)])
            #expect(offline.provenance.description.hasSuffix("pending (1)"))

            // The app is killed: nothing of the first launch is used again.
            let relaunch = Self.launch(server, in: directory, clock: clock, delivered: delivered)
            #expect(try await relaunch.list.load([]) == [.pending(pending)], "the queued post is read back from the files")

            // The server is back: the relaunched outbox sends it.
            try await server.goOnline()
            let report = try await relaunch.outbox.drain()

            #expect(report.delivered == 1)
            #expect(server.posts.count == 1, "created once")
            let created = try #require(server.posts[1])
            #expect((created.title, created.body) == ("On the train", "No signal"))
            let creates = server.requests.filter { $0.method == "POST" && $0.path == "/posts" }
            #expect(creates.map { $0.headers["Idempotency-Key"] } == [pending.idempotencyKey],
                    "the refused first attempt never arrived; the resend carries the client-chosen key")
            #expect(delivered.withLock { $0 } == [created])
            let record = try #require(server.idempotencyKey(pending.idempotencyKey))
            #expect((record.requests, record.applied) == (1, 1))
            let online = try await relaunch.list.loadServed([created.id])
            #expect(online.value == [.post(created)], "pending gone: the server's post stands in its place")
            #expect(online.provenance.pendingWrites == 0)
            #expect(server.requestCount(path: "/posts/1") == 0, "the delivered post was cached on its way back")
        }
    }

    @Test func aPostWhoseAnswerIsLost_isQueuedAndResentWithTheSameKey_andCreatedOnce() async throws {
        try await withDemoServer { server in
            let directory = try TemporaryDirectory(prefix: "strata-offline-posts")
            let clock = ManualClock()
            let delivered = Locked<[Post]>([])
            let launch = Self.launch(server, in: directory, clock: clock, delivered: delivered)
            // The server applies the create, then drops the connection without answering.
            server.faults = .init(writeFault: .dropAfterApply, remainingWriteFaults: 1)

            let pending = try #require(try await launch.repo.submitPost(title: "Hello", body: "World").pendingPost,
                                       "no answer: the app cannot know it was created, so it is queued")
            #expect(server.posts.count == 1, "the server did apply it")

            #expect(try await launch.outbox.drain().delivered == 1)

            #expect(server.posts.count == 1, "the resend was answered from the server's record, not applied again")
            let record = try #require(server.idempotencyKey(pending.idempotencyKey))
            #expect((record.requests, record.applied, record.replayed) == (2, 1, 1))
            #expect(delivered.withLock { $0 } == [Post(id: 1, title: "Hello", body: "World")])
            #expect(try await launch.list.load([1]) == [.post(Post(id: 1, title: "Hello", body: "World"))])
        }
    }

    @Test func withoutAServerThatHonoursKeys_theLostAnswerWouldCostADuplicate() async throws {
        // The negative control of the test above: the same steps against a server that ignores the key.
        try await withDemoServer { server in
            let directory = try TemporaryDirectory(prefix: "strata-offline-posts")
            let launch = Self.launch(server, in: directory, clock: ManualClock(), delivered: Locked([]))
            server.honoursIdempotencyKeys = false
            server.faults = .init(writeFault: .dropAfterApply, remainingWriteFaults: 1)

            _ = try #require(try await launch.repo.submitPost(title: "Hello", body: "World").pendingPost)
            #expect(try await launch.outbox.drain().delivered == 1)

            #expect(server.posts.count == 2, "the key is what keeps the resend from creating a second post")
        }
    }

    @Test func aPostWrittenOnline_isCreatedAtOnceWithAnIdempotencyKey() async throws {
        try await withDemoServer { server in
            let directory = try TemporaryDirectory(prefix: "strata-offline-posts")
            let launch = Self.launch(server, in: directory, clock: ManualClock(), delivered: Locked([]))

            let result = try await launch.repo.submitPost(title: "Hello", body: "World")

            #expect(result == .created(Post(id: 1, title: "Hello", body: "World")))
            #expect(server.requests.first?.headers["Idempotency-Key"]?.count == 36)
            #expect(launch.outbox.status.pending == 0)
        }
    }

    @Test func aSecondPostWrittenWhileTheFirstIsQueued_isCreatedAfterIt() async throws {
        try await withDemoServer { server in
            let directory = try TemporaryDirectory(prefix: "strata-offline-posts")
            let launch = Self.launch(server, in: directory, clock: ManualClock(), delivered: Locked([]))
            await server.goOffline()
            let first = try #require(try await launch.repo.submitPost(title: "first", body: "1").pendingPost)
            try await server.goOnline()

            let second = try #require(try await launch.repo.submitPost(title: "second", body: "2").pendingPost)
            #expect(server.requests.isEmpty, "not sent ahead of the first")
            #expect(try await launch.list.load([]) == [.pending(first), .pending(second)])

            #expect(try await launch.outbox.drain().delivered == 2)
            #expect(server.posts.mapValues(\.title) == [1: "first", 2: "second"])
        }
    }

    @Test func theServerRejectingAQueuedPost_parksItAndTheListNoLongerShowsIt() async throws {
        try await withDemoServer { server in
            let directory = try TemporaryDirectory(prefix: "strata-offline-posts")
            let launch = Self.launch(server, in: directory, clock: ManualClock(), delivered: Locked([]))
            await server.goOffline()
            _ = try await launch.repo.submitPost(title: "rejected", body: "b")
            try await server.goOnline()
            server.faults = .init(status: 422)

            #expect(try await launch.outbox.drain().parked == 1)

            #expect(try await launch.list.load([]) == [])
            #expect(try await launch.outbox.deadLetters().map(\.deadLetter?.status) == [422])
        }
    }
}
