import DemoServer
import Foundation
import PostsRepositoryExample
import Strata

// DemoServer has a `Post` of its own (the server's); in these tests `Post` is the example's.
typealias Post = PostsRepositoryExample.Post

let hello = Post(id: 1, title: "Hello", body: "World")
let second = Post(id: 2, title: "Second", body: "Post")

/// A repository that records every call and answers from stubs.
actor PostRepoSpy: PostRepo {
    enum Message: Equatable {
        case getPost(id: Int)
        case createPost(title: String, body: String)
        case createPostWithKey(title: String, body: String, idempotencyKey: UUID)
    }

    private(set) var messages: [Message] = []
    private var posts: [Int: Post]
    private var created: Result<Post, any Error>

    init(posts: [Post] = [], created: Result<Post, any Error> = .success(hello)) {
        self.posts = Dictionary(uniqueKeysWithValues: posts.map { ($0.id, $0) })
        self.created = created
    }

    func getPost(id: Int) throws -> Post {
        messages.append(.getPost(id: id))
        guard let post = posts[id] else { throw PostRepoError.notFound(id: id) }
        return post
    }

    func createPost(title: String, body: String) throws -> Post {
        messages.append(.createPost(title: title, body: body))
        return try created.get()
    }

    func createPost(title: String, body: String, idempotencyKey: UUID) throws -> Post {
        messages.append(.createPostWithKey(title: title, body: body, idempotencyKey: idempotencyKey))
        return try created.get()
    }

    /// What later creates answer.
    func answerCreates(with result: Result<Post, any Error>) {
        created = result
    }
}

/// A cache that records every call and keeps posts in a dictionary.
actor PostCacheSpy: PostCache {
    enum Message: Equatable {
        case getPost(id: Int)
        case store(Post)
    }

    private(set) var messages: [Message] = []
    private var posts: [Int: Post]

    init(posts: [Post] = []) {
        self.posts = Dictionary(uniqueKeysWithValues: posts.map { ($0.id, $0) })
    }

    func getPost(id: Int) -> Post? {
        messages.append(.getPost(id: id))
        return posts[id]
    }

    func store(post: Post) {
        messages.append(.store(post))
        posts[post.id] = post
    }
}

