import FeedCachingExample
import FileFeedStoreExample
import Foundation
import StrataTesting
import Testing

/// What `CodableFeedStore` promises beyond the shared specs: the file it writes.
@Suite("S1 FileFeedStore: CodableFeedStore")
struct CodableFeedStoreTests {
    @Test func save_writesTheFeedAsJSONAtTheStoreURL() async throws {
        try await withStoreLocation { location in
            try await withLeakTracking { leaks in
                let sut = leaks.track(CodableFeedStore(storeURL: location.appending("feed.json")))
                let feed = uniqueFeed(count: 1)

                try await sut.save(feed)

                let object = try JSONSerialization.jsonObject(with: Data(contentsOf: sut.storeURL)) as? [String: Any]
                let items = try #require(object?["items"] as? [[String: String]])
                #expect(items == [["id": feed[0].id.uuidString, "title": feed[0].title, "imageURL": feed[0].imageURL.absoluteString]])
            }
        }
    }

    @Test func save_intoAMissingDirectory_createsIt() async throws {
        try await withStoreLocation { location in
            try await withLeakTracking { leaks in
                let sut = leaks.track(CodableFeedStore(storeURL: location.appending("caches/feed/feed.json")))
                let feed = uniqueFeed()

                try await sut.save(feed)

                #expect(try await sut.load() == feed)
            }
        }
    }

    @Test func save_leavesNoTemporaryFilesBehind() async throws {
        try await withStoreLocation { location in
            try await withLeakTracking { leaks in
                let sut = leaks.track(CodableFeedStore(storeURL: location.appending("feed.json")))

                try await sut.save(uniqueFeed())
                try await sut.save(uniqueFeed())

                #expect(try FileManager.default.contentsOfDirectory(atPath: location.url.path) == ["feed.json"])
            }
        }
    }

    @Test func delete_removesTheFile() async throws {
        try await withStoreLocation { location in
            try await withLeakTracking { leaks in
                let sut = leaks.track(CodableFeedStore(storeURL: location.appending("feed.json")))
                try await sut.save(uniqueFeed())

                try await sut.delete()

                #expect(!FileManager.default.fileExists(atPath: sut.storeURL.path))
            }
        }
    }

    @Test func save_whenTheLocationCannotHoldAFile_throws() async throws {
        try await withStoreLocation { location in
            try await withLeakTracking { leaks in
                // The store's "directory" is a regular file, so nothing can be written below it.
                let blocker = location.appending("not-a-directory")
                try Data().write(to: blocker)
                let sut = leaks.track(CodableFeedStore(storeURL: blocker.appendingPathComponent("feed.json")))

                await #expect(throws: (any Error).self) { try await sut.save(uniqueFeed()) }
            }
        }
    }

    @Test func load_whenTheStoreURLIsADirectory_throwsRatherThanReportingEmpty() async throws {
        try await withStoreLocation { location in
            try await withLeakTracking { leaks in
                let sut = leaks.track(CodableFeedStore(storeURL: location.url))

                await #expect(throws: (any Error).self) { try await sut.load() }
            }
        }
    }
}
