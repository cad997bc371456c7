import Foundation

/// The feed-caching example's caching decorator: fresh data when the base loader succeeds (and saved), the cached copy
/// when it fails, and the base loader's **original** error when there is no usable copy; built by
/// ``Loader/servingStaleOnError(in:key:maxStale:)``.
/// Entries are stamped and aged with the ``LoadEnvironment``'s `now`.
///
/// Unlike `writingThrough(in:key:).fallingBack(to: store.loader(key:))`, which reports every tier in a
/// ``FallbackError``, this decorator is invisible on failure: callers see exactly the error they
/// would have seen without a cache. A failing or unreadable cache is never the error shown.
public struct ServingStaleOnErrorLoader<Base: Loader, S: Store>: Loader where S.Value == Base.Output {
    public typealias Input = Base.Input
    public typealias Output = Base.Output

    public let base: Base
    public let store: S
    /// Which cached copy may be served after a failure; `.any` (the default) serves a copy of any age.
    public let freshness: FreshnessPolicy
    let key: @Sendable (Input) -> S.Key

    init(base: Base, store: S, key: @escaping @Sendable (Input) -> S.Key, freshness: FreshnessPolicy) {
        self.base = base
        self.store = store
        self.key = key
        self.freshness = freshness
    }

    public func load(_ input: Input) async throws -> Output {
        try await load(input, in: .current)
    }

    public func load(_ input: Input, in context: LoadContext) async throws -> Output {
        let key = key(input)
        let value: Output
        do {
            value = try await base.load(input, in: context)
        } catch {
            try rethrowIfCancelled(error)
            context.record(.tierFailed(tier: base.chainSummary, error: error))
            let cached: CacheEntry<Output>?
            do {
                cached = try await store.retrieve(key)
            } catch {
                // An unreadable cache is never the error shown, but cancellation still is.
                try rethrowIfCancelled(error)
                cached = nil
            }
            try Task.checkCancellation()
            guard let cached else { throw error }
            let now = context.environment.now()
            guard freshness.isFresh(storedAt: cached.storedAt, now: now) else { throw error }
            let tier = context.tierName(default: "\(store.storeDescription) [stale if error]")
            context.record(.servedStale(tier: tier, reason: .loadFailed))
            context.record(.served(Provenance(
                origin: store.origin, tier: tier, storedAt: cached.storedAt, age: max(.zero, .between(cached.storedAt, now)))))
            return cached.value
        }
        try Task.checkCancellation()
        await store.insertReportingFailure(value, for: key, in: context)
        return value
    }
}

extension ServingStaleOnErrorLoader: LoaderDescribing {
    public var loaderNode: LoaderNode {
        let inner = base.chainNode
        let label = "servingStaleOnError(\(store.storeDescription), \(freshness))"
        return LoaderNode(label: label, summary: "\(inner.summary) + \(label)", children: [inner])
    }
}

extension Loader {
    /// Saves fresh values to `store`, serves the saved copy when this loader fails, and rethrows the
    /// original error when there is no usable copy.
    ///
    /// - Parameters:
    ///   - store: where fresh values are saved and stale ones read.
    ///   - key: the key the value is saved under.
    ///   - maxStale: the oldest copy that may be served after a failure (RFC 5861 `stale-if-error`),
    ///     for example `.seconds(7 * 86_400)`; `nil` (the default) serves a copy of any age.
    public func servingStaleOnError<S: Store>(
        in store: S, key: S.Key, maxStale: Duration? = nil
    ) -> ServingStaleOnErrorLoader<Self, S> where S.Value == Output {
        ServingStaleOnErrorLoader(base: self, store: store, key: { _ in key }, freshness: .staleness(maxStale))
    }

    /// The keyed form of `servingStaleOnError(in:key:maxStale:)`: the cache key comes from the input.
    public func servingStaleOnError<S: Store>(
        in store: S, maxStale: Duration? = nil, key: @escaping @Sendable (Input) -> S.Key
    ) -> ServingStaleOnErrorLoader<Self, S> where S.Value == Output {
        ServingStaleOnErrorLoader(base: self, store: store, key: key, freshness: .staleness(maxStale))
    }

    /// The former spelling of `servingStaleOnError(in:key:maxStale:)`, whose `freshness:` bounded the
    /// staleness of the copy served.
    @available(*, deprecated, message: "use servingStaleOnError(in:key:maxStale:)")
    public func servingStaleOnError<S: Store>(
        from store: S, key: S.Key, freshness: FreshnessPolicy = .any
    ) -> ServingStaleOnErrorLoader<Self, S> where S.Value == Output {
        ServingStaleOnErrorLoader(base: self, store: store, key: { _ in key }, freshness: freshness)
    }

    /// The former spelling of the keyed `servingStaleOnError(in:maxStale:key:)`.
    @available(*, deprecated, message: "use servingStaleOnError(in:maxStale:key:)")
    public func servingStaleOnError<S: Store>(
        from store: S, freshness: FreshnessPolicy = .any, key: @escaping @Sendable (Input) -> S.Key
    ) -> ServingStaleOnErrorLoader<Self, S> where S.Value == Output {
        ServingStaleOnErrorLoader(base: self, store: store, key: key, freshness: freshness)
    }
}
