import Testing
import PostsRepositoryExample

@Suite("S2 PostsRepository: InMemoryPostRepo (the mock environment)")
struct InMemoryPostRepoTests {
    @Test func createPost_numbersPostsOneTwoThreeInCreationOrder() async {
        let repo = InMemoryPostRepo()

        let ids = [
            await repo.createPost(title: "a", body: "1").id,
            await repo.createPost(title: "b", body: "2").id,
            await repo.createPost(title: "c", body: "3").id,
        ]

        #expect(ids == [1, 2, 3])
    }

    @Test func getPost_returnsThePostAsCreated() async throws {
        let repo = InMemoryPostRepo()
        let created = await repo.createPost(title: "Hello", body: "World")

        #expect(try await repo.getPost(id: created.id) == Post(id: 1, title: "Hello", body: "World"))
    }

    @Test func getPost_withAnUnknownID_throwsNotFoundNamingTheID() async throws {
        let repo = InMemoryPostRepo()
        _ = await repo.createPost(title: "Hello", body: "World")

        await #expect(throws: PostRepoError.notFound(id: 42)) { try await repo.getPost(id: 42) }
    }

    @Test func createPost_afterSeededPosts_continuesAfterTheHighestID() async throws {
        let repo = InMemoryPostRepo(posts: [Post(id: 7, title: "seed", body: "")])

        #expect(await repo.createPost(title: "next", body: "").id == 8)
        #expect(try await repo.getPost(id: 7).title == "seed")
    }

    @Test func concurrentCreates_neverHandOutTheSameID() async {
        let repo = InMemoryPostRepo()

        let ids = await withTaskGroup(of: Int.self) { group in
            for index in 0..<100 {
                group.addTask { await repo.createPost(title: "post \(index)", body: "").id }
            }
            return await group.reduce(into: Set<Int>()) { $0.insert($1) }
        }

        #expect(ids == Set(1...100))
        #expect(await repo.allPosts.count == 100)
    }
}
