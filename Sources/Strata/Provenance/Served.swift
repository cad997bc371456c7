import Foundation

/// A value together with where it came from and what happened while loading it.
public struct Served<Value: Sendable>: Sendable {
    /// The loaded value.
    public var value: Value
    /// The tier that served it; `origin == .unknown` when no loader in the chain reports one. It is the
    /// last tier to report serving after the last tier failure, so a tier that produced a response and
    /// then failed (an undecodable body) is never named as the source.
    public var provenance: Provenance
    /// Every event recorded during the load, in order: tiers that failed, the tier that served,
    /// cache writes that failed.
    public var events: [LoadEvent]

    public init(value: Value, provenance: Provenance, events: [LoadEvent]) {
        self.value = value
        self.provenance = provenance
        self.events = events
    }
}
