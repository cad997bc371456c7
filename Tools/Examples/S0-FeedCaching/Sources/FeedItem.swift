import Foundation

/// One entry of the feed: what the server sends, the cache keeps and the screen shows.
///
/// Its JSON form is the one the demo server serves at `GET /feed`:
///
/// ```json
/// {"id": "3F1B7E2A-0000-4000-8000-000000000001", "title": "Decorators in Swift", "imageURL": "https://example.com/images/1.png"}
/// ```
public struct FeedItem: Codable, Equatable, Hashable, Sendable, Identifiable {
    /// Identifies the item across loads.
    public var id: UUID
    /// The headline shown for the item.
    public var title: String
    /// Where the item's picture can be downloaded.
    public var imageURL: URL

    /// Creates an item.
    public init(id: UUID, title: String, imageURL: URL) {
        self.id = id
        self.title = title
        self.imageURL = imageURL
    }
}
