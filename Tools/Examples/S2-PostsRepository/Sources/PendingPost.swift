import Foundation

/// A post the user created while the server could not be reached: queued in an outbox, not yet
/// numbered by the server.
///
/// It is also what the outbox stores (the payload of a `post.create` write, as JSON), so a
/// relaunched app reads back exactly what was queued.
///
/// ## Its id
/// A pending post has no server id yet: the server assigns the `Int` id when it creates the post.
/// Its ``id`` is chosen here, by the client, when the user presses "Post", and it is the
/// `Idempotency-Key` of every request that creates it: the first attempt, and every resend from
/// the outbox, in this process or after a relaunch. A server that remembers keys therefore creates
/// the post once and answers every repeat with the same post (and the same `Int` id).
/// ``PostRepoOutboxDecorator``'s `delivered` callback hands over the pair (this pending post, the
/// created ``Post``), which is how an app swaps one for the other in what it shows.
public struct PendingPost: Codable, Equatable, Hashable, Sendable, Identifiable {
    /// Chosen by the client; the create's `Idempotency-Key`.
    public var id: UUID
    /// The headline.
    public var title: String
    /// The text.
    public var body: String

    /// A pending post with a new client-chosen id (the default) or `id`.
    public init(id: UUID = UUID(), title: String, body: String) {
        self.id = id
        self.title = title
        self.body = body
    }

    /// The `Idempotency-Key` header value: the id as a lowercase UUID string.
    public var idempotencyKey: String { id.uuidString.lowercased() }
}

/// What ``PostRepo/submitPost(title:body:)`` did with a new post.
public enum CreateResult: Equatable, Hashable, Sendable {
    /// The server created it now: here it is, with its id.
    case created(Post)
    /// The server could not be reached: the post is queued durably and will be created once, later,
    /// even if the app is killed meanwhile.
    case pending(PendingPost)

    /// The created post, or `nil` while it is pending.
    public var post: Post? {
        if case .created(let post) = self { post } else { nil }
    }

    /// The pending post, or `nil` once created.
    public var pendingPost: PendingPost? {
        if case .pending(let pending) = self { pending } else { nil }
    }
}

/// One row of a list of posts: a post the server has, or one still waiting to be sent.
///
/// ``PostLoaders/withPendingCreates(_:outbox:)`` builds such lists: the server's posts, then the
/// creates still queued.
public enum PostListItem: Equatable, Hashable, Sendable {
    /// A post the server has.
    case post(Post)
    /// A post waiting in the outbox.
    case pending(PendingPost)

    /// The headline, whichever it is.
    public var title: String {
        switch self {
        case .post(let post): post.title
        case .pending(let pending): pending.title
        }
    }

    /// Whether it is still waiting to be sent.
    public var isPending: Bool {
        if case .pending = self { true } else { false }
    }
}
