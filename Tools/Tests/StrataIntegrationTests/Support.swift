import DemoServer
import Foundation
import Logging
import OfflineFirstExample
import Strata
import StrataTesting


/// The test bundle's default feed (`Resources/default_feed.json`), as S4 OfflineFirst's default loader.
var testDefaults: DefaultLoader { DefaultLoader(resource: "default_feed", in: .module) }

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
