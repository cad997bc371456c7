import Foundation
import Testing
import Strata
import StrataTesting
import FeedCachingExample

/// Each test runs in a defaults suite of its own, removed afterwards.
@Suite("S0 FeedCaching: UserDefaultsFeedCacheStore")
struct UserDefaultsFeedCacheStoreTests {
    @Test func load_onAnEmptyCache_deliversAnEmptyFeed() async throws {
        try await withScopedDefaultsSuite { suiteName in
            let feed = try await UserDefaultsFeedCacheStore(suiteName: suiteName).load()

            #expect(feed == [])
        }
    }

    @Test func load_afterSave_deliversTheSavedFeed() async throws {
        try await withScopedDefaultsSuite { suiteName in
            let sut = UserDefaultsFeedCacheStore(suiteName: suiteName)
            let feed = uniqueFeed()

            try await sut.save(feed)

            #expect(try await sut.load() == feed)
        }
    }

    @Test func save_twice_keepsOnlyTheLatestFeed() async throws {
        try await withScopedDefaultsSuite { suiteName in
            let sut = UserDefaultsFeedCacheStore(suiteName: suiteName)
            let latest = uniqueFeed()

            try await sut.save(uniqueFeed())
            try await sut.save(latest)

            #expect(try await sut.load() == latest)
        }
    }

    @Test func load_throughASecondInstanceOnTheSameSuite_deliversTheFeedTheFirstSaved() async throws {
        try await withScopedDefaultsSuite { suiteName in
            let feed = uniqueFeed()

            try await UserDefaultsFeedCacheStore(suiteName: suiteName).save(feed)

            #expect(try await UserDefaultsFeedCacheStore(suiteName: suiteName).load() == feed)
        }
    }

    @Test func save_keepsTheFeedAsJSONUnderOneDefaultsKey() async throws {
        try await withScopedDefaultsSuite { suiteName in
            let feed = uniqueFeed(count: 1)

            try await UserDefaultsFeedCacheStore(suiteName: suiteName).save(feed)

            let defaults = try #require(UserDefaults(suiteName: suiteName))
            let keys = defaults.dictionaryRepresentation().keys.filter { $0.hasPrefix("strata.") }
            #expect(keys == ["strata.feed"])
            // The value is Strata's entry envelope (magic, date, key) ending in the feed's JSON.
            let stored = try #require(defaults.data(forKey: "strata.feed"))
            let jsonTails = stored.indices.filter { stored[$0] == UInt8(ascii: "[") }.map { stored[$0...] }
            #expect(jsonTails.contains { (try? JSONDecoder().decode([FeedItem].self, from: Data($0))) == feed })
        }
    }

    @Test func save_underDifferentKeys_keepsSeparateFeeds() async throws {
        try await withScopedDefaultsSuite { suiteName in
            let home = uniqueFeed()
            let saved = uniqueFeed()

            try await UserDefaultsFeedCacheStore(suiteName: suiteName, key: "home").save(home)
            try await UserDefaultsFeedCacheStore(suiteName: suiteName, key: "saved").save(saved)

            #expect(try await UserDefaultsFeedCacheStore(suiteName: suiteName, key: "home").load() == home)
            #expect(try await UserDefaultsFeedCacheStore(suiteName: suiteName, key: "saved").load() == saved)
        }
    }

    @Test func load_ofAnUnreadableEntry_deliversAnEmptyFeed() async throws {
        try await withScopedDefaultsSuite { suiteName in
            UserDefaults(suiteName: suiteName)?.set(Data("not a feed".utf8), forKey: "strata.feed")

            let feed = try await UserDefaultsFeedCacheStore(suiteName: suiteName).load()

            #expect(feed == [])
        }
    }

    @Test func scopedSuite_isRemovedAfterTheTest() async throws {
        let suiteName = try await withScopedDefaultsSuite { suiteName in
            try await UserDefaultsFeedCacheStore(suiteName: suiteName).save(uniqueFeed())
            return suiteName
        }

        #expect(try await UserDefaultsFeedCacheStore(suiteName: suiteName).load() == [])
        UserDefaults(suiteName: suiteName)?.removePersistentDomain(forName: suiteName)
    }
}
