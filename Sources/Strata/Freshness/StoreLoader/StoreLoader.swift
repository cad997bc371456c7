import Foundation

/// Why a cache tier could not serve a value.
public enum CacheLoadError: Error, Sendable, CustomStringConvertible {
    /// Nothing is stored for the key (the offline-first example's `emptyCache`).
    case empty(store: String, key: String)
    /// An entry exists but the policy rejects it (the offline-first example's `expiredCache`).
    case expired(store: String, key: String, storedAt: Date, age: Duration, policy: String)
    /// The store failed to read (an I/O or permission error, not a corrupt entry).
    case unreadable(store: String, key: String, underlying: any Error)

    public var description: String {
        switch self {
        case .empty(let store, let key):
            "\(store): nothing cached for '\(key)'"
        case .expired(let store, let key, _, let age, let policy) where age < .zero:
            "\(store): entry for '\(key)' is stamped \((.zero - age).formattedAge) in the future, so policy '\(policy)' cannot age it"
        case .expired(let store, let key, _, let age, let policy):
            "\(store): entry for '\(key)' is \(age.formattedAge) old, outside policy '\(policy)'"
        case .unreadable(let store, let key, let underlying):
            "\(store): could not read '\(key)': \(underlying)"
        }
    }
}

/// Reads a store through a ``FreshnessPolicy``; built by ``Store/loader(key:freshness:)``.
///
/// Entries are aged against the `now` of the load's ``LoadEnvironment``.
///
/// Serves the stored value when the policy accepts its age; otherwise throws ``CacheLoadError``
/// (`empty`, `expired`, `unreadable`), which a ``Loader/fallingBack(to:)`` after it turns into the next tier.
public struct StoreLoader<S: Store, Input: Sendable>: Loader {
    public typealias Output = S.Value

    public let store: S
    public let policy: FreshnessPolicy
    @usableFromInline let key: KeySource<Input, S.Key>
    /// The tier as a chain shows it (`MemoryStore [max age 1d]`), made once: a recorded load names
    /// its tier with it, and formatting it per load would cost more than the memory hit.
    public let description: String

    init(store: S, policy: FreshnessPolicy, keySource key: KeySource<Input, S.Key>) {
        self.store = store
        self.policy = policy
        self.key = key
        self.description = "\(store.storeDescription) [\(policy)]"
    }

    init(store: S, policy: FreshnessPolicy, key: @escaping @Sendable (Input) -> S.Key) {
        self.init(store: store, policy: policy, keySource: .derived(key))
    }

    @inlinable @inline(__always)
    public func load(_ input: Input) async throws -> S.Value {
        try await loadTryingImmediately(input)
    }

    /// The store's entry when it can be read without suspending (``Store/immediateEntry(for:)``, a
    /// ``MemoryStore``) and the policy accepts it, recorded as the load records a hit;
    /// `nil` otherwise, with nothing recorded (the load then reads, judges and reports it).
    @inlinable
    public func loadImmediately(_ input: Input, in context: LoadContext) -> S.Value? {
        let key = key(input)
        guard let cached = store.immediateEntry(for: key) else { return nil }
        if policy.acceptsAnyAge, !context.isRecording { return cached.value }
        let now = context.environment.now()
        guard policy.acceptsAnyAge || isFresh(cached, now: now, in: context) else { return nil }
        record(cached, now: now, in: context)
        return cached.value
    }

    /// A hit the policy accepts without the clock (``FreshnessPolicy/any``), with nobody recording,
    /// is served inline: `@inlinable`, so a chain specialises it with the store's own (inlinable)
    /// lookup. Every other path (a miss, an age to judge, an event to record) is `serve(_:key:in:)`.
    @inlinable
    public func load(_ input: Input, in context: LoadContext) async throws -> S.Value {
        let key = key(input)
        // Descriptions are built only on the paths that report them, never on a plain hit.
        let cached: CacheEntry<S.Value>?
        do {
            cached = try await store.retrieve(key)
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw unreadable(key, error)
        }
        guard let cached else { throw empty(key) }
        if policy.acceptsAnyAge, !context.isRecording { return cached.value }
        return try serve(cached, key: key, in: context)
    }

    @usableFromInline
    func unreadable(_ key: S.Key, _ error: any Error) -> CacheLoadError {
        CacheLoadError.unreadable(store: store.storeDescription, key: "\(key)", underlying: error)
    }

    @usableFromInline
    func empty(_ key: S.Key) -> CacheLoadError {
        CacheLoadError.empty(store: store.storeDescription, key: "\(key)")
    }

    /// Judges `cached`'s age (unless the policy accepts any) and records what served it.
    /// `@inlinable` so a chain specialises it: unspecialised, it would look up `CacheEntry`'s metadata
    /// and copy the entry through value witnesses on every recorded hit.
    @inlinable
    func serve(_ cached: CacheEntry<S.Value>, key: S.Key, in context: LoadContext) throws -> S.Value {
        let now = context.environment.now()
        if !policy.acceptsAnyAge, !isFresh(cached, now: now, in: context) {
            throw CacheLoadError.expired(
                store: store.storeDescription, key: "\(key)", storedAt: cached.storedAt,
                age: Duration.between(cached.storedAt, now), policy: policy.description)
        }
        record(cached, now: now, in: context)
        return cached.value
    }

    /// Whether the policy accepts `cached` at `now`, it was stored after the context's
    /// ``LoadContext/revalidatingSince``, and no invalidation expired it (``CacheEntry/isExpired``).
    @inlinable
    func isFresh(_ cached: CacheEntry<S.Value>, now: Date, in context: LoadContext) -> Bool {
        if let since = context.revalidatingSince, cached.storedAt <= since { return false }
        return !cached.isExpired && policy.isFresh(storedAt: cached.storedAt, now: now)
    }

    /// Records that `cached` served the load, aged at `now`.
    @inlinable
    func record(_ cached: CacheEntry<S.Value>, now: Date, in context: LoadContext) {
        context.record(.served(Provenance(
            origin: store.origin, tier: context.tierName(default: description), storedAt: cached.storedAt,
            age: max(.zero, Duration.between(cached.storedAt, now)))))
    }
}

extension StoreLoader: CustomStringConvertible {}

extension Store {
    /// A loader that serves the entry for `key` while `policy` accepts it.
    ///
    /// ```swift
    /// let freshLocal = store.loader(key: "feed", freshness: .maxAge(.seconds(24 * 3600)))
    /// let anyLocal = store.loader(key: "feed", freshness: .any)
    /// ```
    public func loader(key: Key, freshness policy: FreshnessPolicy = .any) -> StoreLoader<Self, Void> {
        StoreLoader(store: self, policy: policy, keySource: .constant(key))
    }

    /// A keyed loader: `load(key)` serves the entry for that key while `policy` accepts it.
    public func loader(freshness policy: FreshnessPolicy = .any) -> StoreLoader<Self, Key> {
        StoreLoader(store: self, policy: policy, key: { $0 })
    }
}

extension Store {
    /// The value stored for `key` when `policy` accepts it, or `nil` when nothing acceptable is stored.
    ///
    /// Ages the entry against the current task's ``LoadEnvironment`` (`environment.bound { … }` sets
    /// it). Reads through ``loader(key:freshness:)``, so a value served from here reports its origin and
    /// age to ``Loader/loadServed(_:)`` like any tier; for repositories and adapters of your own that
    /// need "the cached value, if any" rather than a loader that throws on a miss. A store that fails
    /// to read throws its own error (not ``CacheLoadError``).
    public func value(for key: Key, freshness policy: FreshnessPolicy = .any) async throws -> Value? {
        do {
            return try await loader(key: key, freshness: policy).load()
        } catch CacheLoadError.empty, CacheLoadError.expired {
            return nil
        } catch CacheLoadError.unreadable(_, _, let underlying) {
            throw underlying
        }
    }
}

extension Store {
    /// This store's description for errors and chain trees: its `description` when it has one,
    /// otherwise its type name.
    public var storeDescription: String {
        (self as? any CustomStringConvertible)?.description ?? String(describing: type(of: self))
    }
}
