import Foundation
import Logging
import Strata
import StrataDemo
import StrataTesting

/// Runs `body` with a fresh demo server on 127.0.0.1 and stops the server afterwards, even when `body`
/// throws.
func withDemoServer<Result>(
    feed: [FeedItem] = DemoData.feed, _ body: (DemoServer) async throws -> Result
) async throws -> Result {
    let server = try await DemoServer.start(feed: feed)
    do {
        let result = try await body(server)
        await server.stop()
        return result
    } catch {
        await server.stop()
        throw error
    }
}

/// A logger that drops everything.
let quietLogger = Logger(label: "quiet", factory: { _ in SwiftLogNoOpLogHandler() })

/// The test bundle's default feed (`Resources/default_feed.json`).
var testDefaults: BundledLoader { BundledLoader(resource: "default_feed", withExtension: "json", in: .module) }

let defaultFeed: [FeedItem] = [
    FeedItem(
        id: UUID(uuidString: "00000000-0000-4000-8000-000000000000")!,
        title: "Welcome to Strata — connect to load the latest feed",
        imageURL: URL(string: "https://example.com/images/welcome.png")!),
]

let updatedFeed: [FeedItem] = [
    FeedItem(id: UUID(uuidString: "3F1B7E2A-0000-4000-8000-0000000000AA")!, title: "Breaking: caches are fast",
             imageURL: URL(string: "https://example.com/images/aa.png")!),
]
