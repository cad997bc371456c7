import Foundation
import Strata

/// The production repository: `GET /posts/{id}` and `POST /posts` through a ``JSONAPIClient``.
///
/// - A `404` from `GET /posts/{id}` becomes ``PostRepoError/notFound(id:)``, the same error the
///   in-memory repository throws, so features handle "no such post" once.
/// - `createPost(title:body:idempotencyKey:)` sends the key as `Idempotency-Key`.
/// - Every other failure keeps Strata's typed `HTTPError` (`.transport`, `.status`, `.decoding`), with
///   the URL, so a caller can still tell "offline" from "server error".
public struct HTTPPostRepo: PostRepo {
    /// The API the posts come from.
    public let client: any JSONAPIClient

    /// A repository on `client`.
    public init(client: any JSONAPIClient) {
        self.client = client
    }

    public func getPost(id: Int) async throws -> Post {
        do {
            return try await client.get("posts/\(id)", as: Post.self)
        } catch let error as HTTPError where error.statusCode == 404 {
            throw PostRepoError.notFound(id: id)
        }
    }

    public func createPost(title: String, body: String) async throws -> Post {
        try await client.post("posts", body: PostDraft(title: title, body: body), as: Post.self)
    }

    /// `POST /posts` with `Idempotency-Key: <key>` (lowercase UUID): a server that remembers keys
    /// answers a repeat with the post it created the first time.
    public func createPost(title: String, body: String, idempotencyKey: UUID) async throws -> Post {
        try await client.post(
            "posts", body: PostDraft(title: title, body: body),
            headerFields: [Self.idempotencyKeyField: idempotencyKey.uuidString.lowercased()], as: Post.self)
    }

    /// The header carrying a create's key.
    public static let idempotencyKeyField = HTTPField.Name("Idempotency-Key")!
}
