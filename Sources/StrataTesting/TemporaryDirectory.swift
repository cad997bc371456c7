import Foundation

/// A directory of its own for one test: created empty, removed when the object goes away (or on
/// ``remove()``), so every test starts and ends clean.
///
/// ```swift
/// let directory = try TemporaryDirectory()
/// let store = FileStore<[FeedItem]>(directory: directory.url)
/// ```
public final class TemporaryDirectory: Sendable {
    /// The directory. It exists until ``remove()`` or deinit.
    public let url: URL

    /// Creates a new, empty directory under the system's temporary directory.
    public init(prefix: String = "strata-test") throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("\(prefix)-\(UUID().uuidString)", isDirectory: true)
        try? FileManager.default.removeItem(at: url)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// A path inside the directory (not created).
    public func appending(_ component: String) -> URL {
        url.appendingPathComponent(component)
    }

    /// Removes the directory and everything in it.
    public func remove() {
        try? FileManager.default.removeItem(at: url)
    }

    deinit { remove() }
}
