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
        if let served = loadServedImmediately(input, in: context) { return served }
        let recorder = context.recorder()
        let value = try await load(input, in: context.recording(into: recorder))
        let events = recorder.events
        return served(value, events: events)
    }

    /// The value a load of `input` would produce at once, with where it came from and how old it
    /// is, or `nil` when the load has to run (see ``loadImmediately(_:in:)``): what a screen draws
    /// in its first frame.
    ///
    /// ```swift
    /// if let cached = feed.loadServedImmediately(()) {
    ///     show(cached.value, badge: cached.provenance)   // "memory via fresh local, age 2m"
    /// }
    /// ```
    public func loadServedImmediately(_ input: Input, in context: LoadContext = .current) -> Served<Output>? {
        let held = LoadRecorder(parent: nil, environment: context.environment)
        guard let value = loadImmediately(input, in: context.recording(into: held)) else { return nil }
        let events = held.events
        context.replay(events)
        return served(value, events: events)
    }

    func served(_ value: Output, events: [LoadEvent]) -> Served<Output> {
        Served(value: value, provenance: servingProvenance(in: events) ?? Provenance(origin: .unknown, tier: chainSummary), events: events)
    }
}

extension Loader where Input == Void {
    /// Loads the resource and reports where the value came from and how old it is.
    public func loadServed() async throws -> Served<Output> {
        try await loadServed(())
    }
}
