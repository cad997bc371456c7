import Logging
@_spi(StrataInternals) import Strata

/// Collects swift-log output in memory, so a test (or a narration) can see exactly what was logged.
///
/// ```swift
/// let logs = LogCapture()
/// let store = FileStore<[FeedItem]>(directory: dir, logger: logs.logger)
/// …
/// #expect(logs.entries.contains { $0.level == .warning && $0.metadata["key"] == "feed" })
/// ```
public final class LogCapture: Sendable {
    /// One logged event: its level, message and metadata (the logger's own merged with the event's).
    public struct Entry: Equatable, Sendable {
        public var level: Logger.Level
        public var message: String
        public var metadata: Logger.Metadata

        public init(level: Logger.Level, message: String, metadata: Logger.Metadata = [:]) {
            self.level = level
            self.message = message
            self.metadata = metadata
        }

        /// The entry as one line, `info feed load succeeded count=3`, metadata sorted by key, leaving
        /// out the keys in `excluded`.
        public func line(excluding excluded: Set<String> = []) -> String {
            let fields = metadata.filter { !excluded.contains($0.key) }
                .sorted { $0.key < $1.key }
                .map { " \($0.key)=\($0.value)" }
            return "\(level) \(message)" + fields.joined()
        }
    }

    private let captured = Locked<[Entry]>([])
    private let level: Logger.Level

    /// A capture that keeps entries at `level` and above (everything by default).
    public init(level: Logger.Level = .trace) {
        self.level = level
    }

    /// A logger whose entries land in ``entries``.
    public var logger: Logger {
        Logger(label: "capture") { [self] _ in Handler(capture: self, logLevel: level) }
    }

    /// Everything logged so far, in order.
    public var entries: [Entry] { captured.withLock { $0 } }

    /// Forgets everything logged so far.
    public func removeAll() {
        captured.withLock { $0 = [] }
    }

    private struct Handler: LogHandler {
        let capture: LogCapture
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level

        init(capture: LogCapture, logLevel: Logger.Level) {
            self.capture = capture
            self.logLevel = logLevel
        }

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let merged = metadata.merging(event.metadata ?? [:]) { _, new in new }
            let entry = Entry(level: event.level, message: "\(event.message)", metadata: merged)
            capture.captured.withLock { $0.append(entry) }
        }
    }
}
