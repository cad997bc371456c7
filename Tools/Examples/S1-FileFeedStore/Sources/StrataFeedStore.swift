import FeedCachingExample
import Foundation
import Strata

/// Any Strata store of feeds, seen as a ``FeedStore``: the feed is one entry under `key`.
///
/// Strata's `FileStore`, `UserDefaultsStore` and `MemoryStore` pass the same `FeedStoreSpecs` as
/// ``CodableFeedStore`` through this adapter, so they can stand in for it.
///
/// ```swift
/// let store = StrataFeedStore(store: FileStore<[FeedItem]>(directory: cachesDirectory), key: "feed")
/// ```
///
/// Loads go through a Strata store loader, so a feed served from here reports its origin (disk or
/// memory) and age to `loadServed()`. Store failures are thrown as the store's `StoreError`.
public struct StrataFeedStore<S: Store>: FeedStore where S.Key == String, S.Value == [FeedItem] {
    /// The Strata store underneath.
    public let store: S
    /// The key of the feed's entry.
    public let key: String
    private let now: @Sendable () -> Date

    /// A feed store keeping the feed in `store` under `key`.
    /// - Parameters:
    ///   - store: the Strata store.
    ///   - key: the key of the feed's entry.
    ///   - now: the wall clock that stamps saves and ages loads; inject one in tests.
    public init(store: S, key: String = "feed", now: @escaping @Sendable () -> Date = { Date() }) {
        self.store = store
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

    public func delete() async throws {
        try await store.delete(key)
    }
}

extension StrataFeedStore: CustomStringConvertible {
    /// The store's description and the key.
    public var description: String {
        let name = (store as? CustomStringConvertible)?.description ?? "\(S.self)"
        return "\(name)[\(key)]"
    }
}
