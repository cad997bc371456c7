import FeedCachingExample
import Foundation

/// A ``FeedStore`` in one JSON file.
///
/// - **Atomic writes.** `save(_:)` writes the whole file next to the old one and renames it into place
///   (`Data.write(to:options: .atomic)`), so readers, in this process or another, see the old feed or
///   the new one, never half of one. A failed save leaves the old file untouched.
/// - **Serial side effects.** The store is an actor: the operations on one instance run one at a time,
///   in the order they reach it.
/// - **Several instances** on the same `storeURL` share the file; the last save wins.
/// - **Unreadable file.** A file that does not decode loads as `[]` (a cache miss) and is replaced by
///   the next save.
/// - The file's format is the store's own (`{"items": [{"id", "title", "imageURL"}]}`), decoupled from
///   ``FeedItem``'s `Codable` conformance, so the domain type can change without breaking saved files.
/// - File-system errors other than a missing file (permissions, a full disk) are thrown as Foundation
///   reports them.
///
/// ```swift
/// let store = CodableFeedStore(storeURL: cachesDirectory.appendingPathComponent("feed.json"))
/// ```
public actor CodableFeedStore: FeedStore {
    /// The feed as it is written to disk.
    private struct StoredFeed: Codable {
        var items: [StoredItem]
    }

    private struct StoredItem: Codable {
        var id: UUID
        var title: String
        var imageURL: URL

        init(_ item: FeedItem) {
            self.id = item.id
            self.title = item.title
            self.imageURL = item.imageURL
        }

        var item: FeedItem { FeedItem(id: id, title: title, imageURL: imageURL) }
    }

    /// The file holding the feed. Its directory is created on the first save.
    public nonisolated let storeURL: URL

    /// A store in the file at `storeURL`.
    public init(storeURL: URL) {
        self.storeURL = storeURL
    }

    public func save(_ items: [FeedItem]) throws {
        let data = try JSONEncoder().encode(StoredFeed(items: items.map(StoredItem.init)))
        try FileManager.default.createDirectory(at: storeURL.deletingLastPathComponent(), withIntermediateDirectories: true)
        try data.write(to: storeURL, options: .atomic)
    }

    public func load() throws -> [FeedItem] {
        let data: Data
        do {
            data = try Data(contentsOf: storeURL)
        } catch let error as CocoaError where error.isMissingFile {
            return []
        }
        guard let stored = try? JSONDecoder().decode(StoredFeed.self, from: data) else { return [] }
        return stored.items.map(\.item)
    }

    public func delete() throws {
        do {
            try FileManager.default.removeItem(at: storeURL)
        } catch let error as CocoaError where error.isMissingFile {
            // Nothing stored: deleting succeeds.
        }
    }
}

extension CodableFeedStore: CustomStringConvertible {
    /// `CodableFeedStore(<path>)`.
    public nonisolated var description: String { "CodableFeedStore(\(storeURL.path))" }
}

extension CocoaError {
    /// Whether the error says the file does not exist.
    fileprivate var isMissingFile: Bool {
        code == .fileReadNoSuchFile || code == .fileNoSuchFile
    }
}
