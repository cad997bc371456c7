import Testing
import PostsRepositoryExample
import StrataTesting

/// A decorator that changes only `createPost`; `getPost` must still reach the wrapped repository.
private struct ShoutingTitlesRepo: PostRepoDecorator {
    let inner: any PostRepo

    func createPost(title: String, body: String) async throws -> Post {
        try await inner.createPost(title: title.uppercased(), body: body)
    }
}

@Suite("S2 PostsRepository: PostRepoDecorator (forwarding by default)")
struct PostRepoDecoratorTests {
    @Test func decoratorOverridingNothing_forwardsEveryCallWithItsArgumentsInOrder() async throws {
        let spy = PostRepoSpy(posts: [hello, second], created: .success(second))
        let sut = ForwardingPostRepo(inner: spy)

        let read = try await sut.getPost(id: 1)
        let created = try await sut.createPost(title: "Second", body: "Post")
        let readAgain = try await sut.getPost(id: 2)

        #expect([read, created, readAgain] == [hello, second, second])
        #expect(await spy.messages == [.getPost(id: 1), .createPost(title: "Second", body: "Post"), .getPost(id: 2)])
    }

    @Test func decoratorOverridingNothing_passesInnerErrorsThroughUnchanged() async throws {
        let spy = PostRepoSpy(created: .failure(TestError("server down")))
        let sut = ForwardingPostRepo(inner: spy)

        await #expect(throws: PostRepoError.notFound(id: 9)) { try await sut.getPost(id: 9) }
        await #expect(throws: TestError("server down")) { try await sut.createPost(title: "t", body: "b") }
    }

    @Test func decoratorOverridingOneMethod_changesItAndStillForwardsTheOther() async throws {
        let spy = PostRepoSpy(posts: [hello])
        let sut = ShoutingTitlesRepo(inner: spy)

        _ = try await sut.createPost(title: "quiet", body: "b")
        #expect(try await sut.getPost(id: 1) == hello)

        #expect(await spy.messages == [.createPost(title: "QUIET", body: "b"), .getPost(id: 1)])
    }

    @Test func decoratorsStack_eachForwardingToTheNext() async throws {
        let spy = PostRepoSpy(posts: [hello])
        let sut = ForwardingPostRepo(inner: ShoutingTitlesRepo(inner: ForwardingPostRepo(inner: spy)))

        _ = try await sut.createPost(title: "stacked", body: "b")
        _ = try await sut.getPost(id: 1)

        #expect(await spy.messages == [.createPost(title: "STACKED", body: "b"), .getPost(id: 1)])
    }
}
