import Foundation
import Logging

/// Writes every value its base loader produces into a store; built by ``Loader/writingThrough(to:key:now:logger:)``.
///
/// - On success the value is written, then returned. A failed write is logged at `warning`, recorded
///   as ``LoadEvent/cacheWriteFailed(store:key:error:)``, and never fails the load; the store keeps its
///   previous entry.
/// - On failure the error passes through untouched and nothing is written.
/// - When the task is cancelled, nothing is written and `CancellationError` is thrown.
public struct WriteThroughLoader<Base: Loader, S: Store>: Loader where S.Value == Base.Output {
    public typealias Input = Base.Input
    public typealias Output = Base.Output

    public let base: Base
    public let store: S
    @usableFromInline let key: @Sendable (Input) -> S.Key
    @usableFromInline let now: @Sendable () -> Date
    @usableFromInline let logger: Logger

    init(base: Base, store: S, key: @escaping @Sendable (Input) -> S.Key, now: @escaping @Sendable () -> Date, logger: Logger) {
        self.base = base
        self.store = store
        self.key = key
        self.now = now
        self.logger = logger
    }

    public func load(_ input: Input) async throws -> Output {
        let value = try await base.load(input)
        try Task.checkCancellation()
        await writeToCache(value, for: key(input), store: store, now: now, logger: logger)
        return value
    }
}

/// Writes `value` (with `validators`), reporting (never throwing) a failure.
func writeToCache<S: Store>(
    _ value: S.Value, for key: S.Key, store: S, now: () -> Date, validators: CacheValidators = .none, logger: Logger
) async {
    do {
        try await store.insert(value, for: key, storedAt: now(), validators: validators)
        LoadRecorder.record(.cacheWritten(store: store.storeDescription, key: "\(key)"))
    } catch {
        logger.warning(
            "cache write failed; the load still succeeds and the previous entry is kept",
            metadata: ["store": "\(store.storeDescription)", "key": "\(key)", "error": "\(error)"])
        LoadRecorder.record(.cacheWriteFailed(store: store.storeDescription, key: "\(key)", error: error))
    }
}

extension WriteThroughLoader: LoaderDescribing {
    public var loaderNode: LoaderNode {
        let inner = base.chainNode
        return LoaderNode(label: "cache(\(store.storeDescription))", summary: "\(inner.summary) + cache(\(store.storeDescription))", children: [inner])
    }
}

extension Loader {
    /// Writes every loaded value to `store` under `key` (write-through).
    ///
    /// ```swift
    /// let remote = HTTPLoader(url: feedURL).decoding([FeedItem].self).writingThrough(to: store, key: "feed")
    /// ```
    /// - Parameters:
    ///   - store: where values are written.
    ///   - key: the key every value is written under.
    ///   - now: the wall clock that stamps entries; inject one in tests.
    ///   - logger: where failed writes are reported.
    public func writingThrough<S: Store>(
        to store: S, key: S.Key, now: @escaping @Sendable () -> Date = { Date() },
        logger: Logger = Logger(label: "strata.cache")
    ) -> WriteThroughLoader<Self, S> where S.Value == Output {
        WriteThroughLoader(base: self, store: store, key: { _ in key }, now: now, logger: logger)
    }

    /// Writes every loaded value to `store` under the key derived from the input.
    ///
    /// ```swift
    /// let posts = HTTPLoader.get { (id: Int) in baseURL.appendingPathComponent("posts/\(id)") }
    ///     .decoding(Post.self)
    ///     .writingThrough(to: store) { id in "post-\(id)" }
    /// ```
    public func writingThrough<S: Store>(
        to store: S, now: @escaping @Sendable () -> Date = { Date() },
        logger: Logger = Logger(label: "strata.cache"), key: @escaping @Sendable (Input) -> S.Key
    ) -> WriteThroughLoader<Self, S> where S.Value == Output {
        WriteThroughLoader(base: self, store: store, key: key, now: now, logger: logger)
    }
}
