import Foundation

/// The repository the app's features talk to: read one post, create one.
///
/// Features depend on this protocol only. Which implementation stands behind it (in memory, over
/// HTTP, with or without a cache) is decided once, in ``PostsEnvironment``.
///
/// ## Contract
/// - `getPost(id:)` throws ``PostRepoError/notFound(id:)`` when no post has that id; other failures
///   (transport, server errors, undecodable bodies) come typed by the layer that failed.
/// - `createPost(title:body:)` returns the post as stored, with the id the repository gave it.
/// - `createPost(title:body:idempotencyKey:)` creates a post once per key: asked again with a key
///   it has seen, the repository returns the post it created the first time and creates no other.
///   That is what makes resending a create safe when an answer was lost.
/// - `submitPost(title:body:)` is the create a "Post" button calls: ``CreateResult/created(_:)``
///   with the stored post, or, behind a ``PostRepoOutboxDecorator`` while the server cannot be
///   reached, ``CreateResult/pending(_:)``: queued durably, sent later, once.
/// - All may be called concurrently.
public protocol PostRepo: Sendable {
    /// The post with `id`.
    func getPost(id: Int) async throws -> Post
    /// Creates a post and returns it with its new id.
    func createPost(title: String, body: String) async throws -> Post
    /// Creates a post once per `idempotencyKey` and returns it with its id (the same post for a
    /// key seen before).
    func createPost(title: String, body: String, idempotencyKey: UUID) async throws -> Post
    /// Creates a post now, or queues it to be created when the server can be reached.
    ///
    /// The default creates it now (``createPost(title:body:)``), so every repository can be asked;
    /// ``PostRepoOutboxDecorator`` is the one that queues.
    func submitPost(title: String, body: String) async throws -> CreateResult
}

extension PostRepo {
    /// Creates the post now: ``CreateResult/created(_:)``, or the error ``createPost(title:body:)`` throws.
    public func submitPost(title: String, body: String) async throws -> CreateResult {
        .created(try await createPost(title: title, body: body))
    }
}

/// A failure every ``PostRepo`` reports the same way, whatever stands behind it.
public enum PostRepoError: Error, Equatable, Sendable, CustomStringConvertible {
    /// There is no post with this id.
    case notFound(id: Int)

    public var description: String {
        switch self {
        case .notFound(let id): "there is no post with id \(id)"
        }
    }
}
