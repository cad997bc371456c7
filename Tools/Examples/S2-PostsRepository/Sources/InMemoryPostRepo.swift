import Foundation

/// The "mock" repository: posts live in memory, ids count up from 1.
///
/// An actor, so concurrent `createPost` calls never hand out the same id. A create with an
/// idempotency key it has seen returns the post made the first time, as a cooperating server does.
///
/// ```swift
/// let repo = InMemoryPostRepo()
/// let first = try await repo.createPost(title: "Hello", body: "World")   // id 1
/// try await repo.getPost(id: 42)                                        // throws PostRepoError.notFound(id: 42)
/// ```
public actor InMemoryPostRepo: PostRepo {
    private var posts: [Int: Post]
    private var nextID: Int
    /// The post created for each idempotency key, as a server that honours `Idempotency-Key` keeps it.
    private var createdByKey: [UUID: Int] = [:]

    /// Creates a repository holding `posts`; new posts are numbered after the highest id among them.
    public init(posts: [Post] = []) {
        self.posts = Dictionary(posts.map { ($0.id, $0) }, uniquingKeysWith: { _, last in last })
        self.nextID = (posts.map(\.id).max() ?? 0) + 1
    }

    public func getPost(id: Int) throws -> Post {
        guard let post = posts[id] else { throw PostRepoError.notFound(id: id) }
        return post
    }

    public func createPost(title: String, body: String) -> Post {
        let post = Post(id: nextID, title: title, body: body)
        posts[post.id] = post
        nextID += 1
        return post
    }

    /// Creates the post once per `idempotencyKey`: a key seen before returns the post it created.
    public func createPost(title: String, body: String, idempotencyKey: UUID) -> Post {
        if let id = createdByKey[idempotencyKey], let post = posts[id] { return post }
        let post = createPost(title: title, body: body)
        createdByKey[idempotencyKey] = post.id
        return post
    }

    /// Every post held, by id (for tests and the demo).
    public var allPosts: [Int: Post] { posts }
}
