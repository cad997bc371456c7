import Foundation
import Logging
@testable @_spi(StrataInternals) import Strata
// Every file of this target uses `Item`: imported once, for the whole target.
@_exported import StrataFixtures
import StrataTesting

