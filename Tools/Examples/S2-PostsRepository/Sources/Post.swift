/// A blog post, as the REST API serves it: `{"id": 1, "title": "…", "body": "…"}`.
///
/// This is the example's own type; its JSON is the same as the demo server's, so the two can talk.
public struct Post: Codable, Equatable, Hashable, Sendable, Identifiable {
    /// The server-assigned identifier.
    public var id: Int
    /// The headline.
    public var title: String
    /// The text.
    public var body: String

    /// Creates a post.
    public init(id: Int, title: String, body: String) {
        self.id = id
        self.title = title
        self.body = body
    }
}

/// What `POST /posts` sends: a post the server has not numbered yet, `{"title": "…", "body": "…"}`.
public struct PostDraft: Codable, Equatable, Hashable, Sendable {
    /// The headline.
    public var title: String
    /// The text.
    public var body: String

    /// Creates a draft.
    public init(title: String, body: String) {
        self.title = title
        self.body = body
    }
}
