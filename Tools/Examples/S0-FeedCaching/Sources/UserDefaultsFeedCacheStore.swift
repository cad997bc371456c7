import Foundation
import Strata

/// A ``FeedCacheStore`` in `UserDefaults`: the feed as JSON under one defaults key, through Strata's
/// `UserDefaultsStore`.
///
/// The defaults key is `"strata." + key` (`strata.feed` by default). Its value is the JSON-encoded
/// feed inside Strata's small entry envelope, which also records when the feed was saved; that date
/// lets `loadServed()` report how old a cached feed is. An empty cache, and an entry that cannot be
/// read back (written by something else, or damaged), load as `[]`.
///
/// ```swift
/// let cache = UserDefaultsFeedCacheStore(suiteName: "com.example.feed")
/// ```
public struct UserDefaultsFeedCacheStore: FeedCacheStore {
    /// The Strata store underneath, for chains that use it directly (`staleIfError(in:key:)`).
    public let store: UserDefaultsStore<[FeedItem]>
    /// The key the feed is saved under (before the store's `strata.` prefix).
    public let key: String
    private let now: @Sendable () -> Date

    /// A cache in the defaults suite `suiteName` (`nil` for `UserDefaults.standard`).
    /// - Parameters:
    ///   - suiteName: the defaults suite.
    ///   - key: the key the feed is saved under.
    ///   - now: the wall clock that stamps saved feeds and ages loaded ones; inject one in tests.
    public init(suiteName: String? = nil, key: String = "feed", now: @escaping @Sendable () -> Date = { Date() }) {
        self.store = UserDefaultsStore(suiteName: suiteName)
        self.key = key
        self.now = now
    }

    public func save(_ items: [FeedItem]) async throws {
        try await store.insert(items, for: key, storedAt: now())
    }

    public func load() async throws -> [FeedItem] {
        // Through Strata's store loader, so a feed served from here reports its origin and age.
        try await LoadEnvironment(now: now).bound { try await store.value(for: key) } ?? []
    }
}

extension UserDefaultsFeedCacheStore: CustomStringConvertible {
    /// `UserDefaultsStore(<suite>)`.
    public var description: String { store.description }
}
