import Foundation
@_spi(StrataInternals) import Strata

/// Wraps a store, records every message sent to it, and fails operations on demand — so a test can
/// assert the exact sequence of side effects (`[.retrieve("feed"), .insert("feed", entry)]`) and
/// inject read, write, delete and refresh failures.
///
/// It answers no immediate read (``Store/immediateEntry(for:)`` is `nil`, whatever its base holds):
/// every read goes through `retrieve`, where it is recorded and its faults apply.
public final class StoreSpy<Base: Store>: Store, Sendable {
    public typealias Key = Base.Key
    public typealias Value = Base.Value

    /// A message received by the store.
    public enum Message: Sendable {
        case retrieve(Key)
        /// One ``Store/retrieveMany(_:)`` call, with its keys.
        case retrieveMany([Key])
        case insert(Key, CacheEntry<Value>)
        case delete(Key)
        case refresh(Key, storedAt: Date, validators: CacheValidators)
        case removeAll
    }

    /// Failures to inject, per operation; `nil` lets the operation through to the base store.
    public struct Faults: Sendable {
        public var retrieve: (any Error)?
        public var insert: (any Error)?
        public var delete: (any Error)?
        public var refresh: (any Error)?
        public var removeAll: (any Error)?
        public init(
            retrieve: (any Error)? = nil, insert: (any Error)? = nil, delete: (any Error)? = nil, refresh: (any Error)? = nil,
            removeAll: (any Error)? = nil
        ) {
            self.removeAll = removeAll
            self.retrieve = retrieve
            self.insert = insert
            self.delete = delete
            self.refresh = refresh
        }
    }

    private struct State: Sendable {
        var messages: [Message] = [] {
            didSet { messageWaiters.resumeSatisfied(by: messages.count) }
        }
        var faults = Faults()
        var messageWaiters = ConditionWaiters<Int>()
    }

    public let base: Base
    private let state = Locked(State())

    public init(_ base: Base) { self.base = base }

    /// Every message so far, in order.
    public var messages: [Message] { state.withLock { $0.messages } }

    /// Returns once the store has been called at least `count` times in all (the calls arrived;
    /// they may still run).
    /// - Throws: `CancellationError` as soon as the waiting task is cancelled.
    public func waitForMessages(atLeast count: Int) async throws {
        try await state.wait(in: \.messageWaiters, current: { $0.messages.count }, until: { $0 >= count })
    }

    /// The failures injected now.
    public var faults: Faults {
        get { state.withLock { $0.faults } }
        set { state.withLock { $0.faults = newValue } }
    }

    public var origin: Origin { base.origin }

    public func retrieve(_ key: Key) async throws -> CacheEntry<Value>? {
        let fault = state.withLock { state -> (any Error)? in
            state.messages.append(.retrieve(key))
            return state.faults.retrieve
        }
        if let fault { throw fault }
        return try await base.retrieve(key)
    }

    /// Records the call and forwards it to the base store's own `retrieveMany` (one call, however
    /// many keys), or throws the injected `retrieve` fault.
    public func retrieveMany(_ keys: [Key]) async throws -> [Key: CacheEntry<Value>] {
        let fault = state.withLock { state -> (any Error)? in
            state.messages.append(.retrieveMany(keys))
            return state.faults.retrieve
        }
        if let fault { throw fault }
        return try await base.retrieveMany(keys)
    }

    public func insert(_ entry: CacheEntry<Value>, for key: Key) async throws {
        let fault = state.withLock { state -> (any Error)? in
            state.messages.append(.insert(key, entry))
            return state.faults.insert
        }
        if let fault { throw fault }
        try await base.insert(entry, for: key)
    }

    public func delete(_ key: Key) async throws {
        let fault = state.withLock { state -> (any Error)? in
            state.messages.append(.delete(key))
            return state.faults.delete
        }
        if let fault { throw fault }
        try await base.delete(key)
    }

    /// Records the message, then forwards to the base store's own `refresh` (so a store's in-place
    /// override is what runs, not the default read-and-insert).
    public func refresh(_ key: Key, storedAt: Date, validators: CacheValidators) async throws -> Bool {
        let fault = state.withLock { state -> (any Error)? in
            state.messages.append(.refresh(key, storedAt: storedAt, validators: validators))
            return state.faults.refresh
        }
        if let fault { throw fault }
        return try await base.refresh(key, storedAt: storedAt, validators: validators)
    }

    /// Records the message, then forwards to the base store's `removeAll`.
    public func removeAll() async throws {
        let fault = state.withLock { state -> (any Error)? in
            state.messages.append(.removeAll)
            return state.faults.removeAll
        }
        if let fault { throw fault }
        try await base.removeAll()
    }
}

extension StoreSpy.Message: Equatable where Base.Value: Equatable {}

extension StoreSpy: CustomStringConvertible {
    public var description: String {
        (base as? CustomStringConvertible)?.description ?? "StoreSpy"
    }
}
