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

