import Foundation

/// A remote loader and a store combined by a ``CachePolicy``; built by
/// ``Loader/cached(_:in:key:)-(_,_,S.Key)``.
///
/// Time and logging come from the ``LoadEnvironment``.
public struct CachedLoader<Remote: Loader, S: Store>: Loader where S.Value == Remote.Output {
    public typealias Input = Remote.Input
    public typealias Output = Remote.Output

    public let remote: Remote
    public let store: S
    public let policy: CachePolicy
    let key: @Sendable (Input) -> S.Key
    /// The store read through the policy's freshness, for `cacheFirst` and `cacheOnly`: made once,
    /// so a hit does not format a tier description.
    let cacheTier: StoreLoader<S, Input>?

    init(remote: Remote, store: S, policy: CachePolicy, key: @escaping @Sendable (Input) -> S.Key) {
        self.remote = remote
        self.store = store
        self.policy = policy
        self.key = key
        switch policy {
        case .cacheFirst(let freshness), .cacheOnly(let freshness):
            cacheTier = StoreLoader(store: store, policy: freshness, key: key)
        case .networkFirst, .networkOnly:
            cacheTier = nil
        }
    }

    public func load(_ input: Input) async throws -> Output {
        try await loadTryingImmediately(input)
    }

    /// Under `cacheFirst` and `cacheOnly`, the store's entry when it can be read at once and the
    /// freshness policy accepts it; `nil` under the policies that ask the network first.
    public func loadImmediately(_ input: Input, in context: LoadContext) -> Output? {
        cacheTier?.loadImmediately(input, in: context)
    }

    public func load(_ input: Input, in context: LoadContext) async throws -> Output {
        let key = key(input)
        let writeThrough = WritingThroughLoader(base: remote, store: store, key: { _ in key })
        switch policy {
        case .cacheFirst(let freshness):
            return try await StoreLoader<S, Input>(store: store, policy: freshness, key: { _ in key })
                .fallingBack(to: writeThrough)
                .load(input, in: context)
        case .networkFirst(let freshness):
            return try await ServingStaleOnErrorLoader(
                base: remote, store: store, key: { _ in key }, freshness: freshness
            ).load(input, in: context)
        case .cacheOnly(let freshness):
            return try await StoreLoader<S, Input>(store: store, policy: freshness, key: { _ in key })
                .load(input, in: context)
        case .networkOnly:
            return try await writeThrough.load(input, in: context)
        }
    }
}

extension CachedLoader: LoaderDescribing {
    public var loaderNode: LoaderNode {
        let inner = remote.chainNode
        let label = "\(policy) in \(store.storeDescription)"
        return LoaderNode(label: label, summary: "\(inner.summary) + \(label)", children: [inner])
    }
}

extension Loader {
    /// Combines this (remote) loader with `store` under a preset ``CachePolicy``.
    ///
    /// ```swift
    /// let feed = remote.cached(.cacheFirst(freshness: .maxAge(.seconds(24 * 3600))), in: store, key: "feed")
    /// let posts = remotePosts.cached(.networkFirst(freshness: .maxAge(.seconds(7 * 86_400))), in: store) { id in "post-\(id)" }
    /// ```
    public func cached<S: Store>(
        _ policy: CachePolicy, in store: S, key: S.Key
    ) -> CachedLoader<Self, S> where S.Value == Output {
        CachedLoader(remote: self, store: store, policy: policy, key: { _ in key })
    }

    /// Combines this (remote) loader with `store` under a preset ``CachePolicy``, keyed by input.
    public func cached<S: Store>(
        _ policy: CachePolicy, in store: S, key: @escaping @Sendable (Input) -> S.Key
    ) -> CachedLoader<Self, S> where S.Value == Output {
        CachedLoader(remote: self, store: store, policy: policy, key: key)
    }
}

