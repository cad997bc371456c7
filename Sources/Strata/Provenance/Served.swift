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

extension Loader {
    /// Loads `input` and reports where the value came from and how old it is.
    ///
    /// ```swift
    /// let served = try await feed.loadServed()
    /// print(served.provenance)   // "disk via fresh local, age 2h 0m"
    /// ```
    public func loadServed(_ input: Input) async throws -> Served<Output> {
        let recorder = LoadRecorder(parent: LoadRecorder.current)
        let value = try await LoadRecorder.recording(into: recorder) { try await load(input) }
        let events = recorder.events
        return Served(value: value, provenance: servingProvenance(in: events) ?? Provenance(origin: .unknown, tier: self.chainSummary), events: events)
    }
}

extension Loader where Input == Void {
    /// Loads the resource and reports where the value came from and how old it is.
    public func loadServed() async throws -> Served<Output> {
        try await loadServed(())
    }
}
