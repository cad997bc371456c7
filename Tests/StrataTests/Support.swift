import Foundation
import Logging
@testable @_spi(StrataInternals) import Strata
import StrataTesting

/// A small Codable value for store and operator tests.
struct Item: Codable, Equatable, Hashable, Sendable {
    var id: Int
    var name: String
}

let itemA = Item(id: 1, name: "a")
let itemB = Item(id: 2, name: "b")

/// A fixed date for tests: 2026-01-01T00:00:00Z.
let referenceDate = Date(timeIntervalSince1970: 1_767_225_600)

/// Collects swift-log output in memory, so tests can assert what was logged.
final class LogCapture: Sendable {
    struct Entry: Sendable {
        var level: Logger.Level
        var message: String
        var metadata: Logger.Metadata
    }

    private let entries = Locked<[Entry]>([])

    var logger: Logger {
        Logger(label: "test") { _ in Handler(capture: self) }
    }

    var messages: [Entry] { entries.withLock { $0 } }

    struct Handler: LogHandler {
        let capture: LogCapture
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            let entry = Entry(level: event.level, message: event.message.description, metadata: event.metadata ?? [:])
            capture.entries.withLock { $0.append(entry) }
        }
    }
}

/// A logger that drops everything (for tests that provoke warnings on purpose).
let quietLogger = Logger(label: "quiet", factory: { _ in SwiftLogNoOpLogHandler() })
