/// The repository the app's features talk to: read one post, create one.
///
/// Features depend on this protocol only. Which implementation stands behind it (in memory, over
/// HTTP, with or without a cache) is decided once, in ``PostsEnvironment``.
///
/// ## Contract
/// - `getPost(id:)` throws ``PostRepoError/notFound(id:)`` when no post has that id; other failures
///   (transport, server errors, undecodable bodies) come typed by the layer that failed.
/// - `createPost(title:body:)` returns the post as stored, with the id the repository gave it.
/// - Both may be called concurrently.
public protocol PostRepo: Sendable {
    /// The post with `id`.
    func getPost(id: Int) async throws -> Post
    /// Creates a post and returns it with its new id.
    func createPost(title: String, body: String) async throws -> Post
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
