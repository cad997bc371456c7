import Foundation

/// The S0 caching decorator: fresh data when the base loader succeeds (and saved), the cached copy
/// when it fails, and the base loader's **original** error when there is no usable copy; built by
/// ``Loader/servingStaleOnError(from:key:maxStale:)``.
/// Entries are stamped and aged with the ``LoadEnvironment``'s `now`.
///
/// Unlike `writingThrough(to:key:).fallingBack(to: store.loader(key:))`, which reports every tier in a
/// ``FallbackError``, this decorator is invisible on failure: callers see exactly the error they
/// would have seen without a cache. A failing or unreadable cache is never the error shown.
public struct ServingStaleOnErrorLoader<Base: Loader, S: Store>: Loader where S.Value == Base.Output {
    public typealias Input = Base.Input
    public typealias Output = Base.Output

    public let base: Base
    public let store: S
    /// The oldest cached copy served after a failure; `nil` (the default) serves a copy of any age.
    public let maxStale: Duration?
    let acceptable: FreshnessPolicy
    let key: @Sendable (Input) -> S.Key

    init(base: Base, store: S, key: @escaping @Sendable (Input) -> S.Key, maxStale: Duration?) {
        self.base = base
        self.store = store
        self.key = key
        self.maxStale = maxStale
        self.acceptable = maxStale.map { .maxAge($0) } ?? .any
    }

    public func load(_ input: Input) async throws -> Output {
        let key = key(input)
        let value: Output
        do {
            value = try await base.load(input)
        } catch {
            try rethrowIfCancelled(error)
            LoadRecorder.record(.tierFailed(tier: base.chainSummary, error: error))
            let cached: Cached<Output>?
            do {
                cached = try await store.retrieve(key)
            } catch {
                // An unreadable cache is never the error shown, but cancellation still is.
                try rethrowIfCancelled(error)
                cached = nil
            }
            try Task.checkCancellation()
            guard let cached else { throw error }
            let now = LoadEnvironment.current.now()
            guard acceptable.isFresh(storedAt: cached.storedAt, now: now) else { throw error }
            LoadRecorder.record(.served(Provenance(
                origin: store.origin, tier: LoadRecorder.tierName(default: "\(store.storeDescription) [stale if error]"), storedAt: cached.storedAt,
                age: max(.zero, .between(cached.storedAt, now)))))
            return cached.value
        }
        try Task.checkCancellation()
        await store.insertReportingFailure(value, for: key)
        return value
    }
}

extension ServingStaleOnErrorLoader: LoaderDescribing {
    public var loaderNode: LoaderNode {
        let inner = base.chainNode
        let label = "servingStaleOnError(\(store.storeDescription), \(acceptable))"
        return LoaderNode(label: label, summary: "\(inner.summary) + \(label)", children: [inner])
    }
}

extension Loader {
    /// Saves fresh values to `store`, serves the saved copy when this loader fails, and rethrows the
    /// original error when there is no usable copy (S0's `CachingFeedRepository`).
    ///
    /// - Parameters:
    ///   - store: where fresh values are saved and stale ones read.
    ///   - key: the key the value is saved under.
    ///   - maxStale: the oldest copy served after a failure (RFC 5861 `stale-if-error`), for example
    ///     `.days(7)`; `nil` (the default) serves a copy of any age.
    public func servingStaleOnError<S: Store>(
        from store: S, key: S.Key, maxStale: Duration? = nil
    ) -> ServingStaleOnErrorLoader<Self, S> where S.Value == Output {
        ServingStaleOnErrorLoader(base: self, store: store, key: { _ in key }, maxStale: maxStale)
    }

    /// The keyed form of ``servingStaleOnError(from:key:maxStale:)``: the cache key comes from the input.
    public func servingStaleOnError<S: Store>(
        from store: S, maxStale: Duration? = nil, key: @escaping @Sendable (Input) -> S.Key
    ) -> ServingStaleOnErrorLoader<Self, S> where S.Value == Output {
        ServingStaleOnErrorLoader(base: self, store: store, key: key, maxStale: maxStale)
    }
}
