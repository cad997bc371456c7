/// The "mock" repository: posts live in memory, ids count up from 1.
///
/// An actor, so concurrent `createPost` calls never hand out the same id.
///
/// ```swift
/// let repo = InMemoryPostRepo()
/// let first = try await repo.createPost(title: "Hello", body: "World")   // id 1
/// try await repo.getPost(id: 42)                                        // throws PostRepoError.notFound(id: 42)
/// ```
public actor InMemoryPostRepo: PostRepo {
    private var posts: [Int: Post]
    private var nextID: Int

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

    /// Every post held, by id (for tests and the demo).
    public var allPosts: [Int: Post] { posts }
}
