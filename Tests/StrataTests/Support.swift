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

/// A logger that drops everything (for tests that provoke warnings on purpose).
let quietLogger = Logger(label: "quiet", factory: { _ in SwiftLogNoOpLogHandler() })
