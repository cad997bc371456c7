import Testing
import PostsRepositoryExample
import StrataTesting

@Suite("S2 PostsRepository: PostRepoCacheDecorator")
struct PostRepoCacheDecoratorTests {
    func makeSUT(
        inner: PostRepoSpy = PostRepoSpy(), cached: [Post] = []
    ) -> (sut: PostRepoCacheDecorator, inner: PostRepoSpy, cache: PostCacheSpy) {
        let cache = PostCacheSpy(posts: cached)
        return (PostRepoCacheDecorator(inner: inner, cache: cache), inner, cache)
    }

    @Test func getPost_onACacheHit_returnsTheCachedPostWithoutAskingInner() async throws {
        let (sut, inner, cache) = makeSUT(cached: [hello])

        #expect(try await sut.getPost(id: 1) == hello)

        #expect(await inner.messages.isEmpty)
        #expect(await cache.messages == [.getPost(id: 1)])
    }

    @Test func getPost_onACacheMiss_asksInnerThenStoresItsAnswer() async throws {
        let (sut, inner, cache) = makeSUT(inner: PostRepoSpy(posts: [hello]))

        #expect(try await sut.getPost(id: 1) == hello)

        #expect(await inner.messages == [.getPost(id: 1)])
        #expect(await cache.messages == [.getPost(id: 1), .store(hello)])
    }

    @Test func getPost_afterAMiss_isAHitTheSecondTime() async throws {
        let (sut, inner, _) = makeSUT(inner: PostRepoSpy(posts: [hello]))

        _ = try await sut.getPost(id: 1)
        _ = try await sut.getPost(id: 1)

        #expect(await inner.messages == [.getPost(id: 1)])
    }

    @Test func getPost_whenInnerFails_rethrowsItsErrorAndStoresNothing() async throws {
        let (sut, _, cache) = makeSUT()

        await #expect(throws: PostRepoError.notFound(id: 5)) { try await sut.getPost(id: 5) }

        #expect(await cache.messages == [.getPost(id: 5)])
    }

    @Test func createPost_forwardsThenStoresTheCreatedPost() async throws {
        let (sut, inner, cache) = makeSUT(inner: PostRepoSpy(created: .success(second)))

        #expect(try await sut.createPost(title: "Second", body: "Post") == second)

        #expect(await inner.messages == [.createPost(title: "Second", body: "Post")])
        #expect(await cache.messages == [.store(second)])
    }

    @Test func createPost_thenGetPost_isServedFromTheCache() async throws {
        let (sut, inner, _) = makeSUT(inner: PostRepoSpy(created: .success(second)))

        let created = try await sut.createPost(title: "Second", body: "Post")
        #expect(try await sut.getPost(id: created.id) == second)

        #expect(await inner.messages == [.createPost(title: "Second", body: "Post")])
    }

    @Test func createPost_whenInnerFails_rethrowsAndStoresNothing() async throws {
        let (sut, _, cache) = makeSUT(inner: PostRepoSpy(created: .failure(TestError("rejected"))))

        await #expect(throws: TestError("rejected")) { try await sut.createPost(title: "t", body: "b") }

        #expect(await cache.messages.isEmpty)
    }

    @Test func decoratorAndItsCollaborators_areReleasedAfterUse() async throws {
        try await withLeakTracking { leaks in
            let inner = leaks.track(PostRepoSpy(posts: [hello]))
            let cache = leaks.track(PostCacheSpy())
            let sut = PostRepoCacheDecorator(inner: inner, cache: cache)
            _ = try await sut.getPost(id: 1)
        }
    }
}
