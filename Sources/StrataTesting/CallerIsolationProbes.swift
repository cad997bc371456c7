import Dispatch
import Foundation
@_spi(StrataInternals) import Strata

/// Whether the caller runs on the main queue, the main actor's executor. In an app that is the main
/// thread; under `swift test` on Linux the test harness drains the main queue from another thread, so
/// `Thread.isMainThread` cannot tell, and the queue's own specific value does.
public enum MainQueue {
    private static let key = DispatchSpecificKey<Bool>()
    private static let marked: Bool = {
        DispatchQueue.main.setSpecific(key: key, value: true)
        return true
    }()

    /// `true` on the main queue.
    public static var isCurrent: Bool {
        precondition(marked)
        return DispatchQueue.getSpecific(key: key) == true
    }
}

/// Which executor each noted call was on (`true`: the main queue), in order.
public final class ThreadLog: Sendable {
    private let storage = Locked<[Bool]>([])

    public init() {}

    /// Notes whether the caller is on the main queue now.
    public func note() { storage.withLock { $0.append(MainQueue.isCurrent) } }

    /// Every note so far.
    public var notes: [Bool] { storage.withLock { $0 } }
}

/// JSON, noting in ``threads`` the executor each encode and decode runs on: a store's test checks
/// with it that a main-actor caller never encodes or decodes on the main actor.
///
/// ```swift
/// let codec = ThreadNotingCodec<Item>()
/// let store = SQLiteStore(path: file, codec: codec)
/// try await store.insert(item, for: "a", storedAt: Date())   // from a @MainActor test
/// #expect(codec.threads.notes == [false])
/// ```
public struct ThreadNotingCodec<Value: Codable & Sendable>: Codec {
    public let threads = ThreadLog()

    public init() {}

    public func encode(_ value: Value) throws -> Data {
        threads.note()
        return try JSONEncoder().encode(value)
    }

    public func decode(_ data: Data) throws -> Value {
        threads.note()
        return try JSONDecoder().decode(Value.self, from: data)
    }
}

extension Store {
    /// From the main actor: inserts `value` under `key`, reads it back, and reports what was read and
    /// whether both calls came back to the main actor. With a `ThreadNotingCodec` it tells whether a
    /// store encodes and decodes off the main actor when a view model calls it.
    @MainActor
    public func roundTripFromTheMainActor(
        _ value: Value, key: Key, storedAt: Date
    ) async throws -> (read: Value?, returnedToTheMainActor: Bool) {
        try await insert(value, for: key, storedAt: storedAt)
        let afterInsert = MainQueue.isCurrent
        let read = try await retrieve(key)?.value
        return (read, afterInsert && MainQueue.isCurrent)
    }
}
