/// Receives a ``LoadReport`` after every load of a ``Loader/tracked(by:)`` loader — the analytics seam
/// of the cross-cutting example's `Tracker`, fed with Strata's event vocabulary. The report's strings (loader, tiers, stores,
/// keys, its `description`) are redacted like log lines; its errors are the original values.
///
/// `track` is called on the loading task after the load ends and before its caller resumes: keep it
/// fast and hand slow work (network, disk) to a queue or task of your own.
public protocol LoadTracker: Sendable {
    /// Records one finished load.
    func track(_ report: LoadReport)
}

/// Reports each load of its base loader to a ``LoadTracker``; built by ``Loader/tracked(by:)``.
public struct TrackedLoader<Base: Loader, Tracker: LoadTracker>: Loader {
    public typealias Input = Base.Input
    public typealias Output = Base.Output

    public let base: Base
    public let tracker: Tracker
    /// The chain's summary, made once when the operator is built.
    let summary: String

    init(base: Base, tracker: Tracker) {
        self.base = base
        self.tracker = tracker
        self.summary = base.chainSummary
    }

    /// Loads through the base and hands the tracker the report with its strings redacted
    /// (``Redaction``); errors in it are the original values.
    public func load(_ input: Input) async throws -> Output {
        try await loadTryingImmediately(input)
    }

    public func load(_ input: Input, in context: LoadContext) async throws -> Output {
        let (result, report) = await observeLoad(base, input, in: context, loader: summary, clock: ContinuousClock())
        tracker.track(report.redactingStrings())
        return try result.get()
    }

    /// The base's immediate answer, reported to the tracker as a load.
    public func loadImmediately(_ input: Input, in context: LoadContext) -> Output? {
        guard let (value, report) = observeImmediately(base, input, in: context, loader: summary) else { return nil }
        context.afterImmediateAnswer { [tracker] in tracker.track(report.redactingStrings()) }
        return value
    }
}

extension TrackedLoader: LoaderDescribing {
    public var loaderNode: LoaderNode {
        LoaderNode(label: "tracked(by: \(Tracker.self))", children: [base.chainNode]).observing()
    }
}

extension Loader {
    /// Reports every load — outcome, provenance, duration, events — to `tracker`.
    ///
    /// ```swift
    /// struct FeedAnalytics: LoadTracker {
    ///     func track(_ report: LoadReport) { analytics.send("feed_load", ["hit": report.isCacheHit]) }
    /// }
    /// let feed = chain.tracked(by: FeedAnalytics())
    /// ```
    public func tracked<Tracker: LoadTracker>(by tracker: Tracker) -> TrackedLoader<Self, Tracker> {
        TrackedLoader(base: self, tracker: tracker)
    }
}
