import DemoServer
import Foundation
import PostsRepositoryExample
import Strata

/// The S2 PostsRepository scenario, step by step: the posts repository in its mock configuration, then in its
/// production configuration against a real server and a real file cache.
///
/// Both configurations come from one place, ``PostsRepositoryExample/PostsEnvironment``; every step
/// talks to `any PostRepo` and never learns which one it has.
public struct PostsRepositoryScenario: Sendable {
    /// What one step of the scenario observed.
    public struct Step: Sendable, Equatable {
        /// Which configuration the step ran in.
        public enum Configuration: String, Sendable {
            case mock, production
        }

        /// What the repository answered.
        public enum Outcome: Sendable, Equatable {
            /// A post.
            case post(id: Int, title: String)
            /// ``PostsRepositoryExample/PostRepoError/notFound(id:)``.
            case notFound(id: Int)
            /// Any other failure, in words (for example a transport error while offline).
            case failed(String)
        }

        public var configuration: Configuration
        public var title: String
        public var outcome: Outcome
        /// Requests the app sent during this step (answered or not).
        public var requestsSent: Int
        /// Requests the server answered during this step.
        public var requestsAnswered: Int
    }

    public init() {}

    /// Runs the scenario, writing each line of the narration through `write`, and returns what each step observed.
    public func run(write: @escaping @Sendable (String) -> Void) async throws -> [Step] {
        let server = try await DemoServer.start()
        let cacheDirectory = FileManager.default.temporaryDirectory
            .appendingPathComponent("strata-posts-demo-\(UUID().uuidString)", isDirectory: true)
        defer { try? FileManager.default.removeItem(at: cacheDirectory) }
        let client = CountingHTTPClient()

        let mock = PostsEnvironment.mock
        let postsDirectory = cacheDirectory.appendingPathComponent("posts", isDirectory: true)
        let outbox = PostsEnvironment.makeOutbox(directory: cacheDirectory.appendingPathComponent("outbox", isDirectory: true))
        let production = PostsEnvironment.production(baseURL: server.baseURL, cacheDirectory: postsDirectory, outbox: outbox)

        write("Strata demo: the posts repository (S2 PostsRepository)")
        write("  mock        InMemoryPostRepo behind InMemoryPostCache: no network, no files")
        write("  production  HTTPPostRepo → \(server.baseURL.absoluteString) (Hummingbird, in this process)")
        write("              behind DiskPostCache → \(postsDirectory.path) (FileStore, one file per post)")
        write("  chosen in   PostsEnvironment.makePostRepo(), the only place that knows which is which")

        var steps: [Step] = []
        func step(
            _ configuration: Step.Configuration, _ title: String, _ situation: String,
            _ call: () async throws -> PostsRepositoryExample.Post
        ) async {
            let sentBefore = client.requestCount
            let answeredBefore = server.requests.count
            let outcome: Step.Outcome
            do {
                let post = try await call()
                outcome = .post(id: post.id, title: post.title)
            } catch PostRepoError.notFound(let id) {
                outcome = .notFound(id: id)
            } catch let error as HTTPError {
                if case .transport(_, let reason, _) = error { outcome = .failed(reason) } else { outcome = .failed("\(error)") }
            } catch {
                outcome = .failed("\(error)")
            }
            let result = Step(
                configuration: configuration, title: title, outcome: outcome,
                requestsSent: client.requestCount - sentBefore, requestsAnswered: server.requests.count - answeredBefore)
            steps.append(result)
            write("")
            write("\(steps.count). \(title)")
            write("   situation  \(situation)")
            write("   answer     \(describe(result))")
            write("   network    \(Narration.network(sent: result.requestsSent, answered: result.requestsAnswered))")
        }

        let mockRepo = mock.makePostRepo()
        await step(.mock, "Mock: create a post", "PostsEnvironment.mock, nothing stored yet") {
            try await mockRepo.createPost(title: "Hello from the mock", body: "Nothing leaves this process.")
        }
        await step(.mock, "Mock: read it back", "the cache decorator kept the created post") {
            try await mockRepo.getPost(id: 1)
        }
        await step(.mock, "Mock: an unknown id", "no post 42 in memory") {
            try await mockRepo.getPost(id: 42)
        }

        let productionRepo = production.makePostRepo(transport: client)
        await step(.production, "Production: create a post", "PostsEnvironment.production, server up, cache empty") {
            try await productionRepo.createPost(title: "Hello, server", body: "Created with POST /posts.")
        }
        await step(.production, "Production: read it back", "the created post was saved to the disk cache") {
            try await productionRepo.getPost(id: 1)
        }
        await step(.production, "Production: an unknown id", "the cache has no post 99, so the server is asked") {
            try await productionRepo.getPost(id: 99)
        }

        await server.goOffline()
        let relaunched = production.makePostRepo(transport: client)
        await step(.production, "Relaunch, server down: read post 1", "a new repository on the same cache directory; connections refused") {
            try await relaunched.getPost(id: 1)
        }
        await step(.production, "Server down: a post never cached", "post 2 is neither cached nor reachable") {
            try await relaunched.getPost(id: 2)
        }

        await server.stop()
        write("")
        write("Every step above used `any PostRepo`; only PostsEnvironment chose what stood behind it.")
        return steps
    }

    private func describe(_ step: Step) -> String {
        switch step.outcome {
        case .post(let id, let title):
            let source = switch (step.configuration, step.requestsSent) {
            case (.mock, _): "in memory"
            case (.production, 0): "from the disk cache"
            case (.production, _): "from the server, saved to the disk cache"
            }
            return "post \(id) \"\(title)\", \(source)"
        case .notFound(let id):
            return "not found: there is no post with id \(id) (PostRepoError.notFound)"
        case .failed(let reason):
            return "failed: \(reason) (Strata's HTTPError, passed through: offline is not \"not found\")"
        }
    }

}
