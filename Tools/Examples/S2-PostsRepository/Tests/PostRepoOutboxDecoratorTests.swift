import Foundation
import Testing
import PostsRepositoryExample
@_spi(StrataInternals) import Strata
import StrataOutbox
import StrataTesting

/// The offline create, with a spy for the wrapped repository and an outbox in memory on a manual clock.
@Suite("S2 PostsRepository: PostRepoOutboxDecorator", .timeLimit(.minutes(1)))
struct PostRepoOutboxDecoratorTests {
    static let postsURL = URL(string: "https://api.example.com/posts")!
    static let unreachable = HTTPError.transport(url: postsURL, reason: "could not connect (connection refused)", underlying: nil)

    static func status(_ code: Int) -> HTTPError {
        .status(code: code, url: postsURL, headerFields: [:], body: Data())
    }

    /// What the outboxes of these tests log.
    let logs = LogCapture()

    func makeSUT(
        inner: PostRepoSpy = PostRepoSpy(created: .success(hello)),
        delivered: (@Sendable (PendingPost, Post) async -> Void)? = nil
    ) -> (sut: PostRepoOutboxDecorator, inner: PostRepoSpy, outbox: Outbox) {
        let outbox = Outbox(storage: MemoryOutboxStorage(), environment: ManualClock().environment(logger: logs.logger))
        return (PostRepoOutboxDecorator(inner: inner, outbox: outbox, delivered: delivered), inner, outbox)
    }

    @Test func submitPost_whenTheServerAnswers_returnsTheCreatedPostAndQueuesNothing() async throws {
        let (sut, inner, outbox) = makeSUT()

        let result = try await sut.submitPost(title: "Hello", body: "World")

        #expect(result == .created(hello))
        let messages = await inner.messages
        guard case .createPostWithKey(let title, let body, _) = try #require(messages.first) else {
            Issue.record("expected a keyed create, got \(messages)")
            return
        }
        #expect(messages.count == 1)
        #expect((title, body) == ("Hello", "World"))
        #expect(try await outbox.entries().isEmpty)
    }

    @Test func submitPost_whenTheServerCannotBeReached_queuesThePostDurablyAndReturnsItPending() async throws {
        let (sut, inner, outbox) = makeSUT(inner: PostRepoSpy(created: .failure(Self.unreachable)))

        let result = try await sut.submitPost(title: "On the train", body: "No signal")

        let pending = try #require(result.pendingPost)
        #expect(pending.title == "On the train")
        #expect(pending.body == "No signal")
        #expect(await inner.messages == [.createPostWithKey(title: "On the train", body: "No signal", idempotencyKey: pending.id)],
                "the attempt used the key the queued write keeps")
        let entries = try await outbox.entries()
        #expect(entries.map(\.kind) == [PostRepoOutboxDecorator.createKind])
        #expect(entries.map(\.scope) == [PostRepoOutboxDecorator.scope])
        #expect(try entries.first?.decoded(PendingPost.self) == pending)
        #expect(try await sut.pendingPosts() == [pending])
    }

    @Test(arguments: [408, 429, 500, 502, 503])
    func submitPost_whenTheServerFailsTransiently_queuesThePost(status: Int) async throws {
        let (sut, _, outbox) = makeSUT(inner: PostRepoSpy(created: .failure(Self.status(status))))

        #expect(try await sut.submitPost(title: "t", body: "b").pendingPost != nil)
        #expect(outbox.status.pending == 1)
    }

    @Test(arguments: [400, 404, 413, 422])
    func submitPost_whenTheServerRejectsThePost_throwsItsErrorAndQueuesNothing(status: Int) async throws {
        let (sut, _, outbox) = makeSUT(inner: PostRepoSpy(created: .failure(Self.status(status))))

        await #expect { try await sut.submitPost(title: "t", body: "b") } throws: { error in
            (error as? HTTPError)?.statusCode == status
        }
        #expect(try await outbox.entries().isEmpty, "sending it again would fail the same way")
    }

    @Test func submitPost_whenTheOutboxKnowsItIsOffline_queuesWithoutTrying() async throws {
        let (sut, inner, outbox) = makeSUT()
        outbox.connectivityChanged(isOnline: false)

        #expect(try await sut.submitPost(title: "t", body: "b").pendingPost != nil)
        #expect(await inner.messages.isEmpty)
    }

    @Test func submitPost_behindAnEarlierQueuedPost_waitsInLineSoPostsKeepTheirOrder() async throws {
        let (sut, inner, outbox) = makeSUT(inner: PostRepoSpy(created: .failure(Self.unreachable)))
        let first = try #require(try await sut.submitPost(title: "first", body: "1").pendingPost)
        await inner.answerCreates(with: .success(hello))

        let second = try #require(try await sut.submitPost(title: "second", body: "2").pendingPost,
                                  "the server answers again, but the first post has not been sent yet")

        #expect(await inner.messages.count == 1, "the second post was not tried ahead of the first")
        #expect(try await sut.pendingPosts() == [first, second])
        try await outbox.drain()
        #expect(await inner.messages.dropFirst() == [
            .createPostWithKey(title: "first", body: "1", idempotencyKey: first.id),
            .createPostWithKey(title: "second", body: "2", idempotencyKey: second.id),
        ])
        #expect(try await sut.pendingPosts().isEmpty)
    }

    @Test func drain_createsTheQueuedPostWithItsKeyAndReportsTheServersPost() async throws {
        let delivered = Locked<[(PendingPost, Post)]>([])
        let (sut, inner, outbox) = makeSUT(inner: PostRepoSpy(created: .failure(Self.unreachable))) { pending, post in
            delivered.withLock { $0.append((pending, post)) }
        }
        let pending = try #require(try await sut.submitPost(title: "Hello", body: "World").pendingPost)
        await inner.answerCreates(with: .success(hello))

        let report = try await outbox.drain()

        #expect(report.delivered == 1)
        #expect(await inner.messages == [
            .createPostWithKey(title: "Hello", body: "World", idempotencyKey: pending.id),
            .createPostWithKey(title: "Hello", body: "World", idempotencyKey: pending.id),
        ], "the resend carries the first attempt's key")
        #expect(delivered.withLock { $0.map(\.0) } == [pending])
        #expect(delivered.withLock { $0.map(\.1) } == [hello])
        #expect(outbox.status.pending == 0)
    }

    @Test func drain_whenTheServerRejectsTheQueuedPost_parksItAndItLeavesThePendingList() async throws {
        let (sut, inner, outbox) = makeSUT(inner: PostRepoSpy(created: .failure(Self.unreachable)))
        _ = try await sut.submitPost(title: "too long", body: "b")
        await inner.answerCreates(with: .failure(Self.status(422)))

        #expect(try await outbox.drain().parked == 1)

        #expect(try await sut.pendingPosts().isEmpty)
        #expect(try await outbox.deadLetters().map(\.deadLetter?.status) == [422], "kept as a dead letter, not dropped")
        let parked = logs.entries.filter { $0.message == "outbox write parked as a dead letter" }
        #expect(parked.map { $0.metadata["outbox.kind"] } == ["\(PostRepoOutboxDecorator.createKind)"])
    }

    @Test func createPost_isForwardedAndStillThrowsWhenTheServerCannotBeReached() async throws {
        let (sut, inner, outbox) = makeSUT(inner: PostRepoSpy(created: .failure(Self.unreachable)))

        await #expect { try await sut.createPost(title: "t", body: "b") } throws: { error in
            if case HTTPError.transport = error { true } else { false }
        }
        #expect(await inner.messages == [.createPost(title: "t", body: "b")])
        #expect(try await outbox.entries().isEmpty, "createPost promises a post with its server id: it never queues")
    }

    @Test func aDecoratorBuiltLaterOnTheSameOutbox_sendsWhatAnEarlierOneQueued() async throws {
        let storage = MemoryOutboxStorage()
        let clock = ManualClock()
        let pending: PendingPost
        do {
            let outbox = Outbox(storage: storage, environment: clock.environment())
            let sut = PostRepoOutboxDecorator(inner: PostRepoSpy(created: .failure(Self.unreachable)), outbox: outbox)
            pending = try #require(try await sut.submitPost(title: "Hello", body: "World").pendingPost)
        }
        let relaunched = Outbox(storage: storage, environment: clock.environment())
        let inner = PostRepoSpy(created: .success(hello))
        _ = PostRepoOutboxDecorator(inner: inner, outbox: relaunched)

        #expect(try await relaunched.drain().delivered == 1)
        #expect(await inner.messages == [.createPostWithKey(title: "Hello", body: "World", idempotencyKey: pending.id)])
    }
}

@Suite("S2 PostsRepository: posts lists with pending creates", .timeLimit(.minutes(1)))
struct PendingCreatesListTests {
    @Test func aListShowsQueuedPostsAfterTheServersSaysPendingAndDropsThemOnceDelivered() async throws {
        let server = InMemoryPostRepo(posts: [hello])
        let outbox = Outbox(storage: MemoryOutboxStorage(), environment: ManualClock().environment())
        let sut = PostRepoOutboxDecorator(inner: server, outbox: outbox)
        let list = PostLoaders.withPendingCreates(PostLoaders.posts(in: server).named("posts"), outbox: outbox)
        outbox.connectivityChanged(isOnline: false)
        let pending = try #require(try await sut.submitPost(title: "Second", body: "Post").pendingPost)

        let before = try await list.loadServed([1, 2])

        #expect(before.value == [.post(hello), .pending(pending)])
        #expect(before.provenance.pendingWrites == 1)
        #expect(before.provenance.description.hasSuffix("pending (1)"))

        outbox.connectivityChanged(isOnline: true)
        try await outbox.drain()
        let after = try await list.loadServed([1, 2])

        #expect(after.value == [.post(hello), .post(second)])
        #expect(after.provenance.pendingWrites == 0)
    }

    @Test func postsIn_leavesOutIdsTheRepositoryDoesNotHave() async throws {
        let repo = InMemoryPostRepo(posts: [hello, second])

        #expect(try await PostLoaders.posts(in: repo).load([2, 7, 1]) == [second, hello])
    }
}

@Suite("S2 PostsRepository: keyed creates")
struct KeyedCreateTests {
    @Test func inMemoryRepo_createsOncePerKey() async throws {
        let repo = InMemoryPostRepo()
        let key = UUID()

        let first = await repo.createPost(title: "Hello", body: "World", idempotencyKey: key)
        let again = await repo.createPost(title: "Hello", body: "World", idempotencyKey: key)
        let other = await repo.createPost(title: "Hello", body: "World", idempotencyKey: UUID())

        #expect(first == hello)
        #expect(again == hello)
        #expect(other.id == 2)
        #expect(await repo.allPosts.count == 2)
    }

    @Test func decorators_forwardKeyedCreatesAndSubmits() async throws {
        let spy = PostRepoSpy(created: .success(second))
        let sut = ForwardingPostRepo(inner: spy)
        let key = UUID()

        #expect(try await sut.createPost(title: "Second", body: "Post", idempotencyKey: key) == second)
        #expect(try await sut.submitPost(title: "Second", body: "Post") == .created(second))
        #expect(await spy.messages == [
            .createPostWithKey(title: "Second", body: "Post", idempotencyKey: key),
            .createPost(title: "Second", body: "Post"),
        ], "a repository without an outbox submits by creating now")
    }

    @Test func cacheDecorator_storesPostsCreatedWithAKeyOrSubmitted() async throws {
        let cache = PostCacheSpy()
        let sut = PostRepoCacheDecorator(inner: PostRepoSpy(created: .success(second)), cache: cache)

        _ = try await sut.createPost(title: "Second", body: "Post", idempotencyKey: UUID())
        _ = try await sut.submitPost(title: "Second", body: "Post")

        #expect(await cache.messages == [.store(second), .store(second)])
    }

    @Test func cacheDecorator_storesNothingForAPendingPost() async throws {
        let cache = PostCacheSpy()
        let outbox = Outbox(storage: MemoryOutboxStorage(), environment: ManualClock().environment())
        outbox.connectivityChanged(isOnline: false)
        let sut = PostRepoCacheDecorator(inner: PostRepoOutboxDecorator(inner: PostRepoSpy(), outbox: outbox), cache: cache)

        #expect(try await sut.submitPost(title: "t", body: "b").pendingPost != nil)
        #expect(await cache.messages.isEmpty)
    }
}
