import Foundation

/// The feed item of the source articles (S0, S4): what the demo server serves and the demo caches.
public struct FeedItem: Codable, Equatable, Hashable, Sendable, Identifiable {
    public var id: UUID
    public var title: String
    public var imageURL: URL

    public init(id: UUID, title: String, imageURL: URL) {
        self.id = id
        self.title = title
        self.imageURL = imageURL
    }
}

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

/// The post of the REST repository article (S2).
public struct Post: Codable, Equatable, Hashable, Sendable, Identifiable {
    public var id: Int
    public var title: String
    public var body: String

    public init(id: Int, title: String, body: String) {
        self.id = id
        self.title = title
        self.body = body
    }
}

/// The body of `POST /posts`.
public struct NewPost: Codable, Equatable, Hashable, Sendable {
    public var title: String
    public var body: String

    public init(title: String, body: String) {
        self.title = title
        self.body = body
    }
}
