import FeedCachingExample
import Foundation
import PostsRepositoryExample

/// The feed item of the source articles (S0, S4): S0's own type, which the demo server serves and
/// the demo caches.
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

/// The post of the REST repository article (S2): S2's own type.
public typealias Post = PostsRepositoryExample.Post

/// The body of `POST /posts`: S2's draft post.
public typealias NewPost = PostsRepositoryExample.PostDraft
