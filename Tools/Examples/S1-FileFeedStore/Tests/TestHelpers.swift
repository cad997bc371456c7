import FeedCachingExample
import Foundation
import Logging
import StrataTesting
import Testing

/// A feed no other test uses.
func uniqueFeed(count: Int = 2) -> [FeedItem] {
    (0..<count).map { index in
        FeedItem(id: UUID(), title: "item \(index)", imageURL: URL(string: "https://example.com/\(UUID().uuidString).png")!)
    }
}

/// A logger that drops everything (Strata's stores warn about the corrupt entries some specs make).
let quietLogger = Logger(label: "quiet", factory: { _ in SwiftLogNoOpLogHandler() })

/// Runs `body` with a store location of its own: a new directory, checked empty before `body` runs,
/// removed afterwards (also when `body` throws) and checked gone.
func withStoreLocation<Result>(
    isolation: isolated (any Actor)? = #isolation, _ body: (TemporaryDirectory) async throws -> Result
) async throws -> Result {
    let location = try TemporaryDirectory(prefix: "feed-store")
    #expect(try FileManager.default.contentsOfDirectory(atPath: location.url.path).isEmpty, "a new store location must start empty")
    defer {
        location.remove()
        #expect(!FileManager.default.fileExists(atPath: location.url.path), "the store location must be gone after the test")
    }
    return try await body(location)
}

/// Runs `body` with a `UserDefaults` suite name of its own, cleared before and removed afterwards.
func withDefaultsSuite<Result>(
    isolation: isolated (any Actor)? = #isolation, _ body: (String) async throws -> Result
) async throws -> Result {
    let name = "strata.examples.feed-store.\(UUID().uuidString)"
    UserDefaults(suiteName: name)?.removePersistentDomain(forName: name)
    defer { UserDefaults(suiteName: name)?.removePersistentDomain(forName: name) }
    return try await body(name)
}
