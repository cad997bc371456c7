import Foundation
import Logging

/// The common ways to combine a remote source with a cache, in the vocabulary of Apollo and Store:
/// each preset is built from Strata's own operators, so it behaves exactly like the chain it names.
///
/// | preset | reads | on a remote failure | chain it stands for |
/// |---|---|---|---|
/// | ``cacheFirst(maxAge:)`` | the cache while younger than `maxAge`, else the remote (and caches it) | a ``FallbackError`` naming both tiers | `store.loader(freshness: .maxAge(m)).fallingBack(to: remote.writingThrough(to: store))` |
/// | ``networkFirst(maxStale:)`` | the remote (and caches it) | the cached copy if younger than `maxStale` (RFC 5861 stale-if-error), else the original error | `remote.servingStaleOnError(from: store, maxStale: s)` |
/// | ``cacheOnly(maxAge:)`` | the cache only | — | `store.loader(freshness:)` |
/// | ``networkOnly`` | the remote (and caches it) | the error | `remote.writingThrough(to: store)` |
///
/// For cache-and-network (stale-while-revalidate), see ``Loader/staleWhileRevalidating(in:key:maxStale:now:logger:)``.
public enum CachePolicy: Sendable, CustomStringConvertible {
    /// Serve the cached value while it is younger than `maxAge`; otherwise load, cache and serve.
    case cacheFirst(maxAge: Duration)
    /// Load, cache and serve; when the load fails, serve a cached copy younger than `maxStale`.
    case networkFirst(maxStale: Duration?)
    /// Serve only cached values (younger than `maxAge` when given); never load.
    case cacheOnly(maxAge: Duration?)
    /// Always load (and cache what was loaded); never serve from the cache.
    case networkOnly

    public var description: String {
        switch self {
        case .cacheFirst(let maxAge): "cache-first(max-age \(maxAge.formattedAge))"
        case .networkFirst(let maxStale): "network-first(max-stale \(maxStale.map(\.formattedAge) ?? "any"))"
        case .cacheOnly(let maxAge): "cache-only(max-age \(maxAge.map(\.formattedAge) ?? "any"))"
        case .networkOnly: "network-only"
        }
    }
}

/// A remote loader and a store combined by a ``CachePolicy``; built by
/// ``Loader/cached(_:in:key:now:logger:)``.
public struct CachePolicyLoader<Remote: Loader, S: Store>: Loader where S.Value == Remote.Output {
    public typealias Input = Remote.Input
    public typealias Output = Remote.Output

    public let remote: Remote
    public let store: S
    public let policy: CachePolicy
    let key: @Sendable (Input) -> S.Key
    let now: @Sendable () -> Date
    let logger: Logger

    public func load(_ input: Input) async throws -> Output {
        let key = key(input)
        let writeThrough = WriteThroughLoader(base: remote, store: store, key: { _ in key }, now: now, logger: logger)
        switch policy {
        case .cacheFirst(let maxAge):
            return try await StoreLoader<S, Input>(store: store, policy: .maxAge(maxAge), now: now, key: { _ in key })
                .fallingBack(to: writeThrough)
                .load(input)
        case .networkFirst(let maxStale):
            return try await StaleIfErrorLoader(
                base: remote, store: store, key: { _ in key }, maxStale: maxStale,
                now: now, logger: logger
            ).load(input)
        case .cacheOnly(let maxAge):
            return try await StoreLoader<S, Input>(store: store, policy: maxAge.map { .maxAge($0) } ?? .any, now: now, key: { _ in key })
                .load(input)
        case .networkOnly:
            return try await writeThrough.load(input)
        }
    }
}

extension CachePolicyLoader: LoaderDescribing {
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
    /// let feed = remote.cached(.cacheFirst(maxAge: .seconds(24 * 3600)), in: store, key: "feed")
    /// let posts = remotePosts.cached(.networkFirst(maxStale: .seconds(7 * 86_400)), in: store) { id in "post-\(id)" }
    /// ```
    public func cached<S: Store>(
        _ policy: CachePolicy, in store: S, key: S.Key,
        now: @escaping @Sendable () -> Date = { Date() }, logger: Logger = Logger(label: "strata.cache")
    ) -> CachePolicyLoader<Self, S> where S.Value == Output {
        CachePolicyLoader(remote: self, store: store, policy: policy, key: { _ in key }, now: now, logger: logger)
    }

    /// Combines this (remote) loader with `store` under a preset ``CachePolicy``, keyed by input.
    public func cached<S: Store>(
        _ policy: CachePolicy, in store: S,
        now: @escaping @Sendable () -> Date = { Date() }, logger: Logger = Logger(label: "strata.cache"),
        key: @escaping @Sendable (Input) -> S.Key
    ) -> CachePolicyLoader<Self, S> where S.Value == Output {
        CachePolicyLoader(remote: self, store: store, policy: policy, key: key, now: now, logger: logger)
    }
}

/// Cache-and-network (stale-while-revalidate): the cached value at once, then the fresh one; built by
/// ``Loader/staleWhileRevalidating(in:key:maxStale:now:logger:)``.
///
/// ``values(_:)`` is an `AsyncSequence` of ``Served`` values, each tagged with its origin and age:
/// 1. the cached entry, if there is one younger than `maxStale` (any age by default);
/// 2. the value from the remote loader, which is also written to the store.
///
/// When the remote load fails after a cached value was delivered, the sequence ends by throwing that
/// error: the caller already shows the cached value and learns it could not be refreshed. With no
/// cached value, the error is the remote's. Stopping the iteration (or cancelling its task) cancels
/// the remote load.
public struct StaleWhileRevalidatingLoader<Remote: Loader, S: Store>: Sendable where S.Value == Remote.Output {
    public let remote: Remote
    public let store: S
    /// The oldest cached value worth showing first; `nil` for any age.
    public let maxStale: Duration?
    let key: @Sendable (Remote.Input) -> S.Key
    let now: @Sendable () -> Date
    let logger: Logger

    /// The cached value (if any), then the fresh one.
    public func values(_ input: Remote.Input) -> AsyncThrowingStream<Served<Remote.Output>, any Error> {
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: Served<Remote.Output>.self)
        let key = key(input)
        let cachedTier = StoreLoader<S, Remote.Input>(
            store: store, policy: maxStale.map { .maxAge($0) } ?? .any, now: now, key: { _ in key })
        let freshTier = WriteThroughLoader(base: remote, store: store, key: { _ in key }, now: now, logger: logger)
        let task = Task {
            do {
                if let cached = try? await cachedTier.loadServed(input) {
                    continuation.yield(cached)
                }
                try Task.checkCancellation()
                continuation.yield(try await freshTier.loadServed(input))
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }
}

extension StaleWhileRevalidatingLoader where Remote.Input == Void {
    /// The cached value (if any), then the fresh one.
    public func values() -> AsyncThrowingStream<Served<Remote.Output>, any Error> {
        values(())
    }
}

extension StaleWhileRevalidatingLoader: CustomStringConvertible {
    public var description: String {
        LoaderNode(
            label: "cache-and-network(\(store.storeDescription), max-stale \(maxStale.map(\.formattedAge) ?? "any"))",
            children: [remote.chainNode]
        ).tree
    }
}

extension Loader {
    /// Stale-while-revalidate as an `AsyncSequence`: the cached value first, then the fresh one.
    ///
    /// ```swift
    /// for try await served in remote.staleWhileRevalidating(in: store, key: "feed").values() {
    ///     show(served.value, from: served.provenance)   // disk, 3h old … then remote, age 0s
    /// }
    /// ```
    public func staleWhileRevalidating<S: Store>(
        in store: S, key: S.Key, maxStale: Duration? = nil,
        now: @escaping @Sendable () -> Date = { Date() }, logger: Logger = Logger(label: "strata.cache")
    ) -> StaleWhileRevalidatingLoader<Self, S> where S.Value == Output {
        StaleWhileRevalidatingLoader(remote: self, store: store, maxStale: maxStale, key: { _ in key }, now: now, logger: logger)
    }

    /// Stale-while-revalidate for keyed loads: `values(input)` yields the cached value for
    /// `key(input)` first, then the fresh one.
    public func staleWhileRevalidating<S: Store>(
        in store: S, maxStale: Duration? = nil,
        now: @escaping @Sendable () -> Date = { Date() }, logger: Logger = Logger(label: "strata.cache"),
        key: @escaping @Sendable (Input) -> S.Key
    ) -> StaleWhileRevalidatingLoader<Self, S> where S.Value == Output {
        StaleWhileRevalidatingLoader(remote: self, store: store, maxStale: maxStale, key: key, now: now, logger: logger)
    }
}
