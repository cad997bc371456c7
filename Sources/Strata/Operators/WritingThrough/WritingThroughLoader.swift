/// Writes every value its base loader produces into a store; built by ``Loader/writingThrough(in:key:)-(_,S.Key)``.
///
/// Entries are stamped with the ``LoadEnvironment``'s `now`; failed writes go to its `logger`.
///
/// - On success the value is written, then returned. A failed write is logged at `warning`, recorded
///   as ``LoadEvent/cacheWriteFailed(store:key:error:)``, and never fails the load; the store keeps its
///   previous entry.
/// - On failure the error passes through untouched and nothing is written.
/// - When the task is cancelled, nothing is written and `CancellationError` is thrown.
public struct WritingThroughLoader<Base: Loader, S: Store>: Loader where S.Value == Base.Output {
    public typealias Input = Base.Input
    public typealias Output = Base.Output

    public let base: Base
    public let store: S
    @usableFromInline let key: @Sendable (Input) -> S.Key

    init(base: Base, store: S, key: @escaping @Sendable (Input) -> S.Key) {
        self.base = base
        self.store = store
        self.key = key
    }

    public func load(_ input: Input) async throws -> Output {
        try await load(input, in: .current)
    }

    public func load(_ input: Input, in context: LoadContext) async throws -> Output {
        let value = try await base.load(input, in: context)
        try Task.checkCancellation()
        await store.insertReportingFailure(value, for: key(input), in: context)
        return value
    }
}

extension WritingThroughLoader: LoaderDescribing {
    public var loaderNode: LoaderNode {
        let inner = base.chainNode
        return LoaderNode(label: "writingThrough(\(store.storeDescription))", summary: "\(inner.summary) + writingThrough(\(store.storeDescription))", children: [inner])
    }
}

extension Loader {
    /// Writes every loaded value to `store` under `key` (write-through).
    ///
    /// ```swift
    /// let remote = HTTPLoader(url: feedURL).decoding([FeedItem].self).writingThrough(in: store, key: "feed")
    /// ```
    /// - Parameters:
    ///   - store: where values are written.
    ///   - key: the key every value is written under.
    public func writingThrough<S: Store>(in store: S, key: S.Key) -> WritingThroughLoader<Self, S> where S.Value == Output {
        WritingThroughLoader(base: self, store: store, key: { _ in key })
    }

    /// Writes every loaded value to `store` under the key derived from the input.
    ///
    /// ```swift
    /// let posts = HTTPLoader.get { (id: Int) in baseURL.appendingPathComponent("posts/\(id)") }
    ///     .decoding(Post.self)
    ///     .writingThrough(in: store) { id in "post-\(id)" }
    /// ```
    public func writingThrough<S: Store>(
        in store: S, key: @escaping @Sendable (Input) -> S.Key
    ) -> WritingThroughLoader<Self, S> where S.Value == Output {
        WritingThroughLoader(base: self, store: store, key: key)
    }

    /// The former spelling of `writingThrough(in:key:)`: every operator names the store it
    /// reads and writes with `in:`.
    @available(*, deprecated, renamed: "writingThrough(in:key:)")
    public func writingThrough<S: Store>(to store: S, key: S.Key) -> WritingThroughLoader<Self, S> where S.Value == Output {
        writingThrough(in: store, key: key)
    }

    /// The former spelling of the keyed `writingThrough(in:key:)`.
    @available(*, deprecated, renamed: "writingThrough(in:key:)")
    public func writingThrough<S: Store>(
        to store: S, key: @escaping @Sendable (Input) -> S.Key
    ) -> WritingThroughLoader<Self, S> where S.Value == Output {
        writingThrough(in: store, key: key)
    }
}
