import Foundation

/// A repository that wraps another one and, unless it says otherwise, passes every call through.
///
/// The protocol extension forwards each ``PostRepo`` method to ``inner``. A concrete decorator
/// conforms, stores `inner`, and implements only the methods whose behaviour it changes; everything
/// else keeps reaching the wrapped repository. Adding a method to ``PostRepo`` means adding one
/// forwarding method here, not one to every decorator.
///
/// ```swift
/// struct AuditingPostRepo: PostRepoDecorator {
///     let inner: any PostRepo
///     func createPost(title: String, body: String) async throws -> Post {
///         let post = try await inner.createPost(title: title, body: body)
///         audit("created \(post.id)")
///         return post
///     }
///     // getPost(id:) is forwarded by the extension.
/// }
/// ```
public protocol PostRepoDecorator: PostRepo {
    /// The repository this one wraps.
    var inner: any PostRepo { get }
}

extension PostRepoDecorator {
    /// Forwards to ``inner``.
    public func getPost(id: Int) async throws -> Post {
        try await inner.getPost(id: id)
    }

    /// Forwards to ``inner``.
    public func createPost(title: String, body: String) async throws -> Post {
        try await inner.createPost(title: title, body: body)
    }

    /// Forwards to ``inner``.
    public func createPost(title: String, body: String, idempotencyKey: UUID) async throws -> Post {
        try await inner.createPost(title: title, body: body, idempotencyKey: idempotencyKey)
    }

    /// Forwards to ``inner``.
    public func submitPost(title: String, body: String) async throws -> CreateResult {
        try await inner.submitPost(title: title, body: body)
    }
}

/// The smallest decorator: it overrides nothing, so every call reaches ``inner`` unchanged.
///
/// Useful as a starting point and as proof that the forwarding in ``PostRepoDecorator`` is complete.
public struct ForwardingPostRepo: PostRepoDecorator {
    public let inner: any PostRepo

    /// Wraps `inner`.
    public init(inner: any PostRepo) {
        self.inner = inner
    }
}
