import Foundation
import Logging

/// A logger that drops everything: for tests that provoke warnings on purpose and keep the output of
/// the run for what fails.
public let quietLogger = Logger(label: "strata.quiet", factory: { _ in SwiftLogNoOpLogHandler() })

/// The wall-clock date tests start from, 2026-01-01T00:00:00Z: a fixed date keeps ages, expiries and
/// HTTP dates in expectations the same on every run.
public let referenceDate = Date(timeIntervalSince1970: 1_767_225_600)
