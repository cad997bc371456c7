import Foundation

/// A store operation that failed for a reason the store cannot hide.
public struct StoreError: Error, Sendable, CustomStringConvertible {
    /// The operation that failed.
    public enum Operation: String, Sendable {
        case retrieve, insert, delete, refresh, open
    }

    /// The store, as described in the chain (for example `FileStore(/var/cache/app)`).
    public var store: String
    /// The operation that failed.
    public var operation: Operation
    /// The key involved, when there is one.
    public var key: String?
    /// Why it failed, in words.
    public var reason: String
    /// The underlying error, when there is one.
    public var underlying: (any Error)?

    public init(store: String, operation: Operation, key: String?, reason: String, underlying: (any Error)? = nil) {
        self.store = store
        self.operation = operation
        self.key = key
        self.reason = reason
        self.underlying = underlying
    }

    public var description: String {
        let keyText = key.map { " key '\($0)'" } ?? ""
        return "\(store): \(operation.rawValue)\(keyText) failed: \(reason)"
    }
}
