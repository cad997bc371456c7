import Foundation
import Strata

/// Remembers posts by id.
///
/// ## Contract
/// - `getPost(id:)` returns the post stored for `id`, or `nil` when there is none. A cache that
///   cannot read (an I/O error, a corrupt entry) answers `nil`: to its caller that is a miss.
/// - `store(post:)` keeps `post` under its id, replacing any earlier copy. A cache that cannot write
///   drops the post; a failed write never fails the caller.
/// - Both may be called concurrently.
public protocol PostCache: Sendable {
    /// The post cached for `id`, or `nil`.
    func getPost(id: Int) async -> Post?
    /// Caches `post` under `post.id`.
    func store(post: Post) async
}

/// A ``PostCache`` on any Strata `Store` keyed by `String`: one entry per post, under the key
/// `"post-<id>"` (see ``key(for:)``).
///
/// Use it through the names below, which pick the store:
/// - ``InMemoryPostCache`` on a `MemoryStore`: gone when the process ends (the mock environment);
/// - ``DiskPostCache`` on a `FileStore`: one file per post in a directory, survives relaunches;
/// - ``UserDefaultsPostCache`` on a `UserDefaultsStore`: one defaults key per post.
///
/// Strata's stores already provide what the article's cache needs and more: atomic writes, corrupt
/// entries treated as misses, entries stamped with the time they were stored.
public struct StorePostCache<S: Store>: PostCache where S.Key == String, S.Value == Post {
    /// The store holding the posts.
    public let backingStore: S
    private let now: @Sendable () -> Date

    /// A cache on `store`, stamping entries with `now()`.
    public init(store: S, now: @escaping @Sendable () -> Date = { Date() }) {
        self.backingStore = store
        self.now = now
    }

    /// The store key of the post with `id`: `"post-<id>"`.
    ///
    /// ``PostLoaders/cacheFirst(remote:store:policy:now:)`` uses the same keys, so the decorator and
    /// the Strata chain can share one store.
    public static func key(for id: Int) -> String { "post-\(id)" }

    public func getPost(id: Int) async -> Post? {
        // The protocol cannot throw: a store that fails to read is a miss, as the contract says.
        try? await backingStore.retrieve(Self.key(for: id))?.value
    }

    public func store(post: Post) async {
        // A failed write keeps the store's previous entry (Store's contract) and is not the caller's problem.
        try? await backingStore.insert(post, for: Self.key(for: post.id), storedAt: now())
    }
}

/// Posts cached in memory, for the mock environment and tests.
public typealias InMemoryPostCache = StorePostCache<MemoryStore<String, Post>>

/// Posts cached on disk, one file per post, for the production environment.
public typealias DiskPostCache = StorePostCache<FileStore<Post>>

/// Posts cached in `UserDefaults`, one defaults key per post (the article's persistent cache).
public typealias UserDefaultsPostCache = StorePostCache<UserDefaultsStore<Post>>

extension StorePostCache where S == MemoryStore<String, Post> {
    /// An empty in-memory cache.
    public init() {
        self.init(store: MemoryStore())
    }
}

extension StorePostCache where S == FileStore<Post> {
    /// A cache in `directory` (created on the first write). Two caches on the same directory see
    /// each other's posts, so the cache survives a relaunch.
    public init(directory: URL) {
        self.init(store: FileStore(directory: directory))
    }
}

extension StorePostCache where S == UserDefaultsStore<Post> {
    /// A cache in the defaults suite `suiteName` (`nil` for the standard defaults), under keys
    /// prefixed with `keyPrefix`.
    public init(suiteName: String? = nil, keyPrefix: String = "posts.") {
        self.init(store: UserDefaultsStore(suiteName: suiteName, keyPrefix: keyPrefix))
    }
}
