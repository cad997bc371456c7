extension Loader {
    /// Loads `input` and reports where the value came from and how old it is.
    ///
    /// ```swift
    /// let served = try await feed.loadServed()
    /// print(served.provenance)   // "disk via fresh local, age 2h 0m"
    /// ```
    public func loadServed(_ input: Input) async throws -> Served<Output> {
        try await loadServed(input, in: .current)
    }

    /// Loads `input` within `context` and reports where the value came from and how old it is.
    public func loadServed(_ input: Input, in context: LoadContext) async throws -> Served<Output> {
        let recorder = context.recorder()
        let value = try await load(input, in: context.recording(into: recorder))
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
