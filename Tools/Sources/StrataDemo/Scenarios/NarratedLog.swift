import Logging
@_spi(StrataInternals) import Strata

/// Collects what the demo's logging decorators write (info and above), so a scenario can narrate it.
///
/// Each event is kept as the line the narration prints — `info feed load succeeded count=3`, the
/// metadata sorted by key — and ``drain()`` hands over the lines written since the last call.
final class NarratedLog: Sendable {
    /// One logged event, already written out.
    struct Line: Sendable {
        let level: Logger.Level
        let message: String
        /// Level, message and metadata (sorted by key, without the omitted keys).
        let text: String
    }

    private let lines = Locked<[Line]>([])
    private let omitted: Set<String>

    /// A collector whose lines leave out the metadata keys in `omitting` (shown elsewhere).
    init(omitting: Set<String> = []) {
        self.omitted = omitting
    }

    /// A logger whose info-and-above events become lines here.
    var logger: Logger {
        Logger(label: "strata.demo.narrated") { _ in Handler(collector: self) }
    }

    /// The lines written since the last drain, oldest first; they are forgotten here.
    func drain() -> [Line] {
        lines.withLock { lines in
            defer { lines = [] }
            return lines
        }
    }

    private func append(_ level: Logger.Level, _ message: String, _ metadata: Logger.Metadata) {
        let fields = metadata.keys.sorted().filter { !omitted.contains($0) }.map { " \($0)=\(metadata[$0]!)" }
        let line = Line(level: level, message: message, text: "\(level) \(message)\(fields.joined())")
        lines.withLock { $0.append(line) }
    }

    private struct Handler: LogHandler {
        let collector: NarratedLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .info

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            collector.append(event.level, "\(event.message)", metadata.merging(event.metadata ?? [:]) { $1 })
        }
    }
}
