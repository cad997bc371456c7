import Logging

/// Records analytics events: here, the values a screen loaded.
///
/// `track(values:)` is `async`, a deliberate choice:
/// - a tracker can be an `actor`, keeping its state isolated without locks;
/// - ``AnalyticsDecorator`` awaits it, so when `loadItem()` returns the event has been recorded:
///   nothing is lost at shutdown and tests need no waiting.
///
/// The price is that a slow tracker slows the load it decorates. A tracker that sends events over
/// the network should queue them and return, not send inline. It cannot throw: analytics never fails
/// a load.
public protocol Tracker: Sendable {
    /// Records that `values` were loaded.
    func track(values: [String]) async
}

/// A tracker that forwards every event to each of its trackers, in order (the Composite pattern):
/// the decorated service still sees one ``Tracker``.
///
/// ```swift
/// let tracker = CompositeTracker([firebase, LoggingTracker(logger: logger)])
/// ```
public struct CompositeTracker: Tracker {
    /// The trackers every event goes to, in the order they receive it.
    public let trackers: [any Tracker]

    /// A tracker that fans out to `trackers`.
    public init(_ trackers: [any Tracker]) {
        self.trackers = trackers
    }

    public func track(values: [String]) async {
        for tracker in trackers {
            await tracker.track(values: values)
        }
    }
}

/// A tracker that writes each event to a swift-log `Logger` at `info`, with structured metadata
/// (`count`, `values`); the application chooses where logs go.
public struct LoggingTracker: Tracker {
    /// Where events are written.
    public let logger: Logger

    /// A tracker writing to `logger`.
    public init(logger: Logger = Logger(label: "strata.analytics")) {
        self.logger = logger
    }

    public func track(values: [String]) async {
        logger.info("items loaded", metadata: [
            "count": "\(values.count)",
            "values": .array(values.map { .string($0) }),
        ])
    }
}

/// A tracker that keeps every event in memory, in order: for previews, the demo and debugging.
public actor InMemoryTracker: Tracker {
    /// Every event so far, oldest first.
    public private(set) var events: [[String]] = []

    /// An empty tracker.
    public init() {}

    public func track(values: [String]) {
        events.append(values)
    }
}
