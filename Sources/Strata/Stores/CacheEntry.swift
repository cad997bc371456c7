import Foundation

/// A cached value with the metadata a cache needs to judge it.
public struct CacheEntry<Value: Sendable>: Sendable {
    /// The stored value.
    public var value: Value
    /// When the value was stored (wall-clock time from the injected `now`).
    public var storedAt: Date
    /// HTTP validators kept with the value so it can be revalidated with a conditional request.
    public var validators: CacheValidators

    public init(value: Value, storedAt: Date, validators: CacheValidators = .none) {
        self.value = value
        self.storedAt = storedAt
        self.validators = validators
    }
}

extension CacheEntry: Equatable where Value: Equatable {}

/// The former name of ``CacheEntry``: a stored value with its metadata, not the `cached(_:in:key:)`
/// operator.
@available(*, deprecated, renamed: "CacheEntry")
public typealias Cached<Value: Sendable> = CacheEntry<Value>
