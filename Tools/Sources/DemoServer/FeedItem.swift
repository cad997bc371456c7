import FeedCachingExample
import Foundation
import PostsRepositoryExample

/// The feed item the demo server serves at `GET /feed`: S0 FeedCaching's own type, which the
/// scenarios cache.
public typealias FeedItem = FeedCachingExample.FeedItem

/// Fixed sample data, so demo output and tests are repeatable.
public enum DemoData {
    /// The feed the demo server serves by default.
    public static let feed: [FeedItem] = [
        item("3F1B7E2A-0000-4000-8000-000000000001", "Decorators in Swift", "https://example.com/images/1.png"),
        item("3F1B7E2A-0000-4000-8000-000000000002", "Composite loaders", "https://example.com/images/2.png"),
        item("3F1B7E2A-0000-4000-8000-000000000003", "Offline first, by design", "https://example.com/images/3.png"),
    ]

    static func item(_ id: String, _ title: String, _ image: String) -> FeedItem {
        FeedItem(id: UUID(uuidString: id)!, title: title, imageURL: URL(string: image)!)
    }
}

/// The post the demo server serves at `/posts`: S2 PostsRepository's own type.
public typealias Post = PostsRepositoryExample.Post

/// The body of `POST /posts`: S2 PostsRepository's draft post.
public typealias NewPost = PostsRepositoryExample.PostDraft

/// One page of `GET /posts/pages/{number}?size=N`: the posts newest first, and the number of the
/// next page, `nil` on the last. Page 1 holds the newest posts, so a new post moves the others
/// down a page.
public struct PostsPage: Codable, Equatable, Hashable, Sendable {
    /// The posts a page holds unless `size` says otherwise.
    public static let defaultSize = 5

    public var posts: [Post]
    public var next: Int?

    public init(posts: [Post], next: Int?) {
        self.posts = posts
        self.next = next
    }

    /// Page `number` (from 1) of `all`, newest first, `size` per page.
    init(_ all: [Post], number: Int, size: Int) {
        let start = min((number - 1) * size, all.count)
        let end = min(start + size, all.count)
        self.init(posts: Array(all[start..<end]), next: end < all.count ? number + 1 : nil)
    }
}
