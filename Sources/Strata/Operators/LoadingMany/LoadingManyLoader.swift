import Foundation

/// Many keys in one go: one read of the store for all of them, and one call of the base loader (a
/// batch endpoint) for the keys the store could not answer fresh; built by
/// `loadingMany(in:freshness:)`.
///
/// - The store is read once, with ``Store/retrieveMany(_:)`` (one query on `PostgresStore`; the
///   memory tier, then one query, on ``TieredStore``). A store that fails is a miss for every key
///   (logged).
/// - The entries `freshness` accepts answer. The other keys (missing, or stale) go to the base
///   loader in one call, in the order they were asked for, without duplicates; it answers with the
///   values it has, and each is written to the store (a failed write is logged, never fails the
///   load).
/// - The result has an entry for each key asked for that the store or the base loader answered;
///   a key the base loader leaves out is absent. When the base loader fails, the load fails with
///   its error (the store's fresh entries are not returned on their own: ask for them with the
///   store's loader, or put `servingStaleOnError` around a chain of one key).
/// - When every key is answered by the store, the load is recorded as served by it, with the oldest
///   entry's store time.
public struct LoadingManyLoader<Base: Loader, S: Store>: Loader
where Base.Input == [S.Key], Base.Output == [S.Key: S.Value] {
    public typealias Input = [S.Key]
    public typealias Output = [S.Key: S.Value]

    public let base: Base
    public let store: S
    /// Which stored entries answer without a call of the base loader.
    public let freshness: FreshnessPolicy

    init(base: Base, store: S, freshness: FreshnessPolicy) {
        self.base = base
        self.store = store
        self.freshness = freshness
    }

    public func load(_ input: [S.Key]) async throws -> Output {
        try await load(input, in: .current)
    }

    public func load(_ keys: [S.Key], in context: LoadContext) async throws -> Output {
        var seen = Set<S.Key>()
        let unique = keys.filter { seen.insert($0).inserted }
        guard !unique.isEmpty else { return [:] }
        let environment = context.environment
        var stored: [S.Key: CacheEntry<S.Value>] = [:]
        do {
            stored = try await store.retrieveMany(unique)
        } catch {
            try rethrowIfCancelled(error)
            environment.logger.warning(
                "the store could not be read: every key goes to the remote",
                metadata: ["store": "\(store.storeDescription)", "keys": "\(unique.count)", "error": "\(error)"])
        }
        let now = environment.now()
        var answers: Output = [:]
        var oldest: Date?
        for (key, entry) in stored where freshness.accepts(entry, now: now) {
            answers[key] = entry.value
            oldest = min(oldest ?? entry.storedAt, entry.storedAt)
        }
        let misses = unique.filter { answers[$0] == nil }
        guard !misses.isEmpty else {
            context.record(.served(Provenance(
                origin: store.origin, tier: context.tierName(default: "\(store.storeDescription) [many]"),
                storedAt: oldest, age: oldest.map { max(.zero, .between($0, now)) })))
            return answers
        }
        try Task.checkCancellation()
        let loaded = try await base.load(misses, in: context)
        try Task.checkCancellation()
        for key in misses {
            guard let value = loaded[key] else { continue }
            await store.insertReportingFailure(value, for: key, in: context)
            answers[key] = value
        }
        return answers
    }
}

extension LoadingManyLoader: LoaderDescribing {
    public var loaderNode: LoaderNode {
        LoaderNode(label: "loadingMany(\(store.storeDescription), \(freshness))", children: [base.chainNode])
    }
}

extension Loader {
    /// Loads many keys with one read of `store` and one call of this loader (a batch endpoint) for
    /// the keys the store cannot answer fresh; the answers are written to `store`.
    ///
    /// ```swift
    /// let users = api.usersByID                      // Loader<[String], [String: User]>, one request
    ///     .loadingMany(in: cache, freshness: .maxAge(.seconds(10 * 60)))
    /// let team = try await users.load(["u1", "u2", "u7"])
    /// ```
    ///
    /// - Parameters:
    ///   - store: where the entries are read (``Store/retrieveMany(_:)``) and the answers written.
    ///   - freshness: which stored entries answer without a call.
    public func loadingMany<S: Store>(in store: S, freshness: FreshnessPolicy) -> LoadingManyLoader<Self, S>
    where Input == [S.Key], Output == [S.Key: S.Value] {
        LoadingManyLoader(base: self, store: store, freshness: freshness)
    }
}
