import Foundation

/// Cache-and-network (stale-while-revalidate): the cached value at once, then the fresh one; built by
/// ``Loader/staleWhileRevalidating(in:key:freshness:)``.
///
/// ``values(_:)`` is an `AsyncSequence` of ``Served`` values, each tagged with its origin and age:
/// 1. the cached entry, if `freshness` accepts it (any age by default);
/// 2. the value from the remote loader, which is also written to the store.
///
/// When the remote load fails after a cached value was delivered, the sequence ends by throwing that
/// error: the caller already shows the cached value and learns it could not be refreshed. With no
/// cached value, the error is the remote's. Stopping the iteration (or cancelling its task) cancels
/// the remote load.
///
/// It is not a ``Loader`` (it yields twice), so ``Loader/environment(_:)`` cannot wrap it: it reads the
/// ``LoadEnvironment`` of the task that calls ``values(_:)``, or the one given to ``environment(_:)``.
public struct StaleWhileRevalidatingSource<Remote: Loader, S: Store>: Sendable where S.Value == Remote.Output {
    public let remote: Remote
    public let store: S
    /// Which cached value is worth showing first; `.any` for any age.
    public let freshness: FreshnessPolicy
    let key: @Sendable (Remote.Input) -> S.Key
    /// The environment both tiers run in; `nil` reads the calling task's.
    var environment: LoadEnvironment?

    init(remote: Remote, store: S, freshness: FreshnessPolicy, key: @escaping @Sendable (Remote.Input) -> S.Key) {
        self.remote = remote
        self.store = store
        self.freshness = freshness
        self.key = key
    }

    /// The same loader, running its tiers in `environment` (time, logging) wherever `values` is called.
    public func environment(_ environment: LoadEnvironment) -> Self {
        var copy = self
        copy.environment = environment
        return copy
    }

    /// The cached value (if any), then the fresh one.
    public func values(_ input: Remote.Input) -> AsyncThrowingStream<Served<Remote.Output>, any Error> {
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: Served<Remote.Output>.self)
        let key = key(input)
        let cachedTier = StoreLoader<S, Remote.Input>(
            store: store, policy: freshness, key: { _ in key })
        let freshTier = WritingThroughLoader(base: remote, store: store, key: { _ in key })
        let context = environment.map { LoadContext.current.with($0) } ?? LoadContext.current
        let task = Task {
            do {
                if let cached = try? await cachedTier.loadServed(input, in: context) {
                    continuation.yield(cached)
                }
                try Task.checkCancellation()
                continuation.yield(try await freshTier.loadServed(input, in: context))
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }
}

extension StaleWhileRevalidatingSource where Remote.Input == Void {
    /// The cached value (if any), then the fresh one.
    public func values() -> AsyncThrowingStream<Served<Remote.Output>, any Error> {
        values(())
    }
}

extension StaleWhileRevalidatingSource: CustomStringConvertible {
    public var description: String {
        LoaderNode(
            label: "staleWhileRevalidating(\(store.storeDescription), \(freshness))",
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
        in store: S, key: S.Key, freshness: FreshnessPolicy = .any
    ) -> StaleWhileRevalidatingSource<Self, S> where S.Value == Output {
        StaleWhileRevalidatingSource(remote: self, store: store, freshness: freshness, key: { _ in key })
    }

    /// Stale-while-revalidate for keyed loads: `values(input)` yields the cached value for
    /// `key(input)` first, then the fresh one.
    public func staleWhileRevalidating<S: Store>(
        in store: S, freshness: FreshnessPolicy = .any, key: @escaping @Sendable (Input) -> S.Key
    ) -> StaleWhileRevalidatingSource<Self, S> where S.Value == Output {
        StaleWhileRevalidatingSource(remote: self, store: store, freshness: freshness, key: key)
    }
}

/// The former name of ``StaleWhileRevalidatingSource``, which is a source of values, not a ``Loader``.
@available(*, deprecated, renamed: "StaleWhileRevalidatingSource")
public typealias StaleWhileRevalidatingLoader<Remote: Loader, S: Store> = StaleWhileRevalidatingSource<Remote, S>
    where S.Value == Remote.Output
