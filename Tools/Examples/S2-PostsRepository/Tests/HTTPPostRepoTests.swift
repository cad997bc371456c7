import Foundation
import Testing
import PostsRepositoryExample
import Strata
import DemoServer
import StrataTesting

/// HTTPPostRepo and the production configuration against the real demo server on 127.0.0.1.
@Suite("S2 PostsRepository: HTTPPostRepo against a real server")
struct HTTPPostRepoTests {
    func makeRepo(_ server: DemoServer) -> HTTPPostRepo {
        HTTPPostRepo(client: HTTPJSONAPIClient(baseURL: server.baseURL))
    }

    @Test func createPost_thenGetPost_returnsThePostTheServerNumbered() async throws {
        try await withDemoServer { server in
            let repo = makeRepo(server)

            let created = try await repo.createPost(title: "Hello", body: "World")
            let read = try await repo.getPost(id: created.id)

            #expect(created == Post(id: 1, title: "Hello", body: "World"))
            #expect(read == created)
            #expect(server.posts[1]?.title == "Hello")
            #expect(server.requests.map { "\($0.method) \($0.path)" } == ["POST /posts", "GET /posts/1"])
            #expect(server.requests.first?.headers["Content-Type"] == "application/json")
        }
    }

    @Test func getPost_ofAnUnknownID_throwsNotFound() async throws {
        try await withDemoServer { server in
            await #expect(throws: PostRepoError.notFound(id: 404)) { try await makeRepo(server).getPost(id: 404) }
        }
    }

    @Test func getPost_whenTheServerFails_keepsStrataTypedStatusError() async throws {
        try await withDemoServer { server in
            server.faults = .init(status: 503)
            await #expect {
                try await makeRepo(server).getPost(id: 1)
            } throws: { error in
                (error as? HTTPError)?.statusCode == 503
            }
        }
    }

    @Test func getPost_whenTheServerIsOffline_isATransportErrorWithTheURL() async throws {
        try await withDemoServer { server in
            await server.goOffline()
            await #expect {
                try await makeRepo(server).getPost(id: 1)
            } throws: { error in
                guard case HTTPError.transport(let url, _, _) = error else { return false }
                return url == server.baseURL.appendingPathComponent("posts/1")
            }
        }
    }

    @Test func jsonAPIClient_resolvesPathsAgainstTheBaseURLKeepingItsPath() {
        let api = HTTPJSONAPIClient(baseURL: URL(string: "https://api.example.com/v1")!)

        #expect(api.url(for: "posts/1").absoluteString == "https://api.example.com/v1/posts/1")
        #expect(api.url(for: "/posts").absoluteString == "https://api.example.com/v1/posts")
    }

    @Test func createPostWithAKey_sendsItAsIdempotencyKeyWithABodyOfSortedKeys() async throws {
        try await withDemoServer { server in
            let key = UUID()

            let created = try await makeRepo(server).createPost(title: "Hello", body: "World", idempotencyKey: key)
            let again = try await makeRepo(server).createPost(title: "Hello", body: "World", idempotencyKey: key)

            #expect(again == created, "the server answered the repeat from its record")
            #expect(server.posts.count == 1)
            #expect(server.requests.map { $0.headers["Idempotency-Key"] } == [key.uuidString.lowercased(), key.uuidString.lowercased()])
            let record = try #require(server.idempotencyKey(key.uuidString.lowercased()))
            #expect((record.applied, record.replayed, record.refused) == (1, 1, 0),
                    "the same bytes both times: a different body under the key would be refused with 422")
        }
    }

    @Test func jsonAPIClient_encodesBodiesWithSortedKeys() throws {
        let body = try HTTPJSONAPIClient.stableEncoder().encode(PostDraft(title: "t", body: "b"))

        #expect(String(decoding: body, as: UTF8.self) == #"{"body":"b","title":"t"}"#)
    }

    @Test func strataLoaders_readAndWriteTheSamePostsAsTheRepository() async throws {
        try await withDemoServer { server in
            let created = try await PostLoaders.create(baseURL: server.baseURL).load(PostDraft(title: "Via", body: "Strata"))

            #expect(try await makeRepo(server).getPost(id: created.id) == created)
            #expect(try await PostLoaders.remote(baseURL: server.baseURL).load(created.id) == created)
        }
    }
}

@Suite("S2 PostsRepository: PostsEnvironment")
struct PostsEnvironmentTests {
    @Test func mock_createsAndReadsPostsInMemoryAndReportsUnknownIDs() async throws {
        let repo = PostsEnvironment.mock.makePostRepo()

        let created = try await repo.createPost(title: "Hello", body: "World")

        #expect(created == hello)
        #expect(try await repo.getPost(id: 1) == hello)
        await #expect(throws: PostRepoError.notFound(id: 2)) { try await repo.getPost(id: 2) }
    }

    @Test func mock_eachRepositoryStartsEmpty() async throws {
        _ = try await PostsEnvironment.mock.makePostRepo().createPost(title: "Hello", body: "World")

        await #expect(throws: PostRepoError.notFound(id: 1)) { try await PostsEnvironment.mock.makePostRepo().getPost(id: 1) }
    }

    @Test func production_readsACreatedPostFromTheCacheWithoutARequest() async throws {
        try await withDemoServer { server in
            let cacheDirectory = try TemporaryDirectory()
            let repo = PostsEnvironment.production(
                baseURL: server.baseURL, cacheDirectory: cacheDirectory.url,
                outbox: PostsEnvironment.makeOutbox(directory: cacheDirectory.appending("outbox"))).makePostRepo()

            let created = try await repo.createPost(title: "Hello", body: "World")
            let read = try await repo.getPost(id: created.id)

            #expect(read == created)
            #expect(server.requestCount(path: "/posts") == 1)
            #expect(server.requestCount(path: "/posts/1") == 0, "served from the cache")
        }
    }

    @Test func production_servesACachedPostWhenTheServerIsOffline_evenAfterARelaunch() async throws {
        try await withDemoServer { server in
            let cacheDirectory = try TemporaryDirectory()
            let environment = PostsEnvironment.production(
                baseURL: server.baseURL, cacheDirectory: cacheDirectory.url,
                outbox: PostsEnvironment.makeOutbox(directory: cacheDirectory.appending("outbox")))
            let created = try await environment.makePostRepo().createPost(title: "Hello", body: "World")

            await server.goOffline()
            let relaunched = environment.makePostRepo()

            #expect(try await relaunched.getPost(id: created.id) == created)
            await #expect {
                try await relaunched.getPost(id: 2)
            } throws: { error in
                if case HTTPError.transport = error { true } else { false }
            }
        }
    }

    @Test func production_unknownIDIsNotFoundAndNothingIsCached() async throws {
        try await withDemoServer { server in
            let cacheDirectory = try TemporaryDirectory()
            let repo = PostsEnvironment.production(
                baseURL: server.baseURL, cacheDirectory: cacheDirectory.url,
                outbox: PostsEnvironment.makeOutbox(directory: cacheDirectory.appending("outbox"))).makePostRepo()

            await #expect(throws: PostRepoError.notFound(id: 7)) { try await repo.getPost(id: 7) }
            await #expect(throws: PostRepoError.notFound(id: 7)) { try await repo.getPost(id: 7) }

            #expect(server.requestCount(path: "/posts/7") == 2, "a miss is asked again, not remembered")
            #expect(await DiskPostCache(directory: cacheDirectory.url).getPost(id: 7) == nil)
        }
    }
}
