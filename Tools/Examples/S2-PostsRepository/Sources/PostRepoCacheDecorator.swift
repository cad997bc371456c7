import Foundation

/// Adds a cache in front of any ``PostRepo``: reads are answered locally when possible, and every
/// post that passes through is remembered.
///
/// - `getPost(id:)`: a cached post is returned without asking ``inner``. On a miss, ``inner`` is
///   asked and its answer is stored before it is returned. Failures of ``inner`` pass through
///   unchanged and store nothing.
/// - `createPost(title:body:)`, `createPost(title:body:idempotencyKey:)` and `submitPost(title:body:)`:
///   forwarded; a created post is stored, so reading it back right after creating it costs no
///   request (a post ``inner`` only queued has no id yet: nothing is stored).
///
/// The cache is never invalidated: this is the article's cache-first policy, right for posts that
/// do not change once written. For a freshness limit, use the Strata chain in
/// ``PostLoaders/cacheFirst(remote:store:policy:now:)`` with a `.maxAge` policy.
public struct PostRepoCacheDecorator: PostRepoDecorator {
    public let inner: any PostRepo
    /// Where posts are remembered.
    public let cache: any PostCache

    /// Wraps `inner` with `cache`.
    public init(inner: any PostRepo, cache: any PostCache) {
        self.inner = inner
        self.cache = cache
    }

    public func getPost(id: Int) async throws -> Post {
        if let cached = await cache.getPost(id: id) { return cached }
        let post = try await inner.getPost(id: id)
        await cache.store(post: post)
        return post
    }

    public func createPost(title: String, body: String) async throws -> Post {
        let post = try await inner.createPost(title: title, body: body)
        await cache.store(post: post)
        return post
    }

    public func createPost(title: String, body: String, idempotencyKey: UUID) async throws -> Post {
        let post = try await inner.createPost(title: title, body: body, idempotencyKey: idempotencyKey)
        await cache.store(post: post)
        return post
    }

    public func submitPost(title: String, body: String) async throws -> CreateResult {
        let result = try await inner.submitPost(title: title, body: body)
        if case .created(let post) = result { await cache.store(post: post) }
        return result
    }
}
