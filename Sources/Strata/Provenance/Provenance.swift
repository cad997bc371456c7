import Foundation

/// Where a value came from and how old it is.
public struct Provenance: Sendable, Hashable, CustomStringConvertible {
    /// The kind of source that served the value.
    public var origin: Origin
    /// The loader (tier) that served it, as described in the chain.
    public var tier: String
    /// When the value was stored, for cached values; `nil` for values fetched or read from a bundle now.
    public var storedAt: Date?
    /// How old the value was when it was served: `now - storedAt` for cached values, zero for fresh ones,
    /// `nil` when unknown (bundled data).
    public var age: Duration?
    /// How many queued writes (an `Outbox`'s pending entries) were applied on top of the value by
    /// `overlayingPending(_:scope:apply:)`; 0 when it is the source's value as it is.
    public var pendingWrites: Int

    public init(origin: Origin, tier: String, storedAt: Date? = nil, age: Duration? = nil, pendingWrites: Int = 0) {
        self.origin = origin
        self.tier = tier
        self.storedAt = storedAt
        self.age = age
        self.pendingWrites = pendingWrites
    }

    public var description: String {
        var text = "\(origin) via \(tier)"
        if let age { text += ", age \(age.formattedAge)" }
        if pendingWrites > 0 { text += ", pending (\(pendingWrites))" }
        return text
    }
}

/// The tier that served the value: the last `.served` event after the last `.tierFailed` one. A tier
/// that reported `.served` and then failed (a response that did not decode) is not the one that served.
@usableFromInline
package func servingProvenance(in events: [LoadEvent]) -> Provenance? {
    for event in events.reversed() {
        switch event {
        case .served(let provenance): return provenance
        case .tierFailed: return nil
        case .cacheWritten, .cacheWriteFailed, .retrying, .timedOut, .breakerStateChanged, .breakerRejected, .coalesced, .revalidated,
             .refreshStarted, .servedStale, .waitedForFleetLock:
            continue
        }
    }
    return nil
}
