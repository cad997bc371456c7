import FeedCachingExample

/// Keeps one feed on this device: the S1 article's store.
///
/// ## Contract
/// Written once as `FeedStoreSpecs` in this example's tests; every conforming store runs it.
/// - `load()` on an empty store delivers `[]`, and loading has no side effects.
/// - `load()` delivers what the last `save(_:)` saved; a second save replaces the first.
/// - After `delete()` the store loads `[]`; `delete()` on an empty store succeeds.
/// - Two instances on the same location see each other's writes.
/// - Side effects run serially: operations issued one after another complete in that order, and
///   concurrent operations never expose a half-written feed.
/// - Data that cannot be read back (a damaged or foreign file) loads as `[]`, and the next save
///   replaces it. It is a cache: a miss, never a crash.
public protocol FeedStore: Sendable {
    /// Saves `items`, replacing the stored feed.
    func save(_ items: [FeedItem]) async throws
    /// The stored feed; `[]` when there is none.
    func load() async throws -> [FeedItem]
    /// Removes the stored feed; succeeds when there is none.
    func delete() async throws
}
