import Foundation

/// One operation of a partition run, as its client saw it: what it asked, of which node, when it
/// started and ended (seconds since the run began, on the client's clock), and what came back.
/// A history is these in the order they ended; `PartitionChecker` judges it.
struct PartitionOperation: Codable, Sendable, Equatable {
    enum Kind: String, Codable, Sendable { case read, write }

    enum Outcome: String, Codable, Sendable {
        /// A read answered with a value; a write acknowledged (2xx).
        case ok
        /// A read that got no value (an error status, a timeout, a closed connection).
        case failed
        /// A write that was not acknowledged: it may have reached the origin, or not.
        case unknown
    }

    var process: Int
    var kind: Kind
    var key: String
    var node: String
    /// A write: the version it sets. A read that is `.ok`: the version it returned.
    var version: Int?
    var start: Double
    var end: Double
    var outcome: Outcome
    /// A read's `X-Cache` (`HIT`, `MISS`, `STALE`, ...), for the figures.
    var cache: String?
    /// Why a read failed or a write is unknown.
    var detail: String?
}

/// A fault the nemesis injected, for the figures and the history's file.
struct PartitionFault: Codable, Sendable, Equatable {
    var kind: String
    var target: String
    var start: Double
    var end: Double
}

/// What a partition run promises, checked on its history alone (Jepsen's way: from what the
/// clients saw, never from the servers' own account).
///
/// The model: each key has one writer, whose writes do not overlap and each name the version
/// they set (1 is every key's value before the run). A write takes effect at one moment within
/// its operation, or never when it was not acknowledged. So version `v` is current from some
/// moment in its write's interval until, at the latest, the end of the first *acknowledged*
/// write after it.
///
/// - **Bounded staleness.** A read that returned `v` returned a value current at some moment no
///   earlier than the read's start minus `window`: `v`'s write started before the read ended, and
///   the first acknowledged write after it ended later than `start - window`.
/// - **No acknowledged write is lost.** A read that starts more than `window` after a write was
///   acknowledged returns it or a later one (the rule above); and the origin ends the run holding
///   the last acknowledged version, or one a later unacknowledged write set.
struct PartitionChecker: Sendable {
    /// How far back from its start a read may see: for `strata proxy`, the response's lifetime
    /// plus how long past it a stale response may be served (`--max-stale`), plus a margin for the
    /// processes' clocks and the rounding of ages.
    var window: Double

    struct Violation: Sendable, Equatable, CustomStringConvertible {
        var key: String
        var operation: PartitionOperation?
        var reason: String
        var description: String {
            guard let operation else { return "\(key): \(reason)" }
            return "\(key): \(reason) [\(operation.kind.rawValue) by process \(operation.process) via \(operation.node), "
                + "\(String(format: "%.3f", operation.start))–\(String(format: "%.3f", operation.end)) s, cache \(operation.cache ?? "-")]"
        }
    }

    /// Every violation in `history`; `originVersions` are the origin's versions read directly once
    /// the run ended (a key absent from it is not checked there).
    func check(_ history: [PartitionOperation], originVersions: [String: Int] = [:]) -> [Violation] {
        var violations: [Violation] = []
        let byKey = Dictionary(grouping: history, by: \.key)
        for key in byKey.keys.sorted() {
            let operations = byKey[key] ?? []
            let writes = operations.filter { $0.kind == .write }.sorted { $0.start < $1.start }
            // The model's premise: one writer per key, one write at a time, each its own version.
            for (earlier, later) in zip(writes, writes.dropFirst()) where later.start < earlier.end {
                violations.append(Violation(key: key, operation: later, reason: "writes of one key overlap: the checker cannot order them"))
            }
            var index: [Int: Int] = [:]
            for (position, write) in writes.enumerated() {
                guard let version = write.version, version > 1, index[version] == nil else {
                    violations.append(Violation(key: key, operation: write, reason: "a write must set a version above 1 that no other write sets"))
                    continue
                }
                index[version] = position
            }
            /// When the version written at `position` (nil: the initial one) was replaced at the
            /// latest: the end of the first acknowledged write after it.
            func replacedBy(after position: Int?) -> PartitionOperation? {
                writes[(position.map { $0 + 1 } ?? 0)...].first { $0.outcome == .ok }
            }
            for read in operations where read.kind == .read && read.outcome == .ok {
                guard let version = read.version else {
                    violations.append(Violation(key: key, operation: read, reason: "a read answered without a version"))
                    continue
                }
                var position: Int?
                if version != 1 {
                    guard let found = index[version] else {
                        violations.append(Violation(key: key, operation: read, reason: "read version \(version), which no write set"))
                        continue
                    }
                    position = found
                    if writes[found].start > read.end {
                        violations.append(Violation(
                            key: key, operation: read,
                            reason: "read version \(version) before its write began (at \(String(format: "%.3f", writes[found].start)) s)"))
                        continue
                    }
                }
                if let replacing = replacedBy(after: position), replacing.end < read.start - window {
                    violations.append(Violation(
                        key: key, operation: read,
                        reason: "read version \(version), replaced by version \(replacing.version ?? 0) acknowledged at "
                            + "\(String(format: "%.3f", replacing.end)) s, more than \(window) s before the read began"))
                }
            }
            if let held = originVersions[key] {
                let lastAcknowledged = writes.lastIndex { $0.outcome == .ok }
                let allowed = Set([lastAcknowledged.flatMap { writes[$0].version } ?? 1]
                    + writes[(lastAcknowledged.map { $0 + 1 } ?? 0)...].compactMap(\.version))
                if !allowed.contains(held) {
                    violations.append(Violation(
                        key: key, operation: nil,
                        reason: "the origin ended with version \(held); the last acknowledged write set \(lastAcknowledged.flatMap { writes[$0].version } ?? 1) (an acknowledged write was lost)"))
                }
            }
        }
        return violations
    }
}

extension PartitionChecker {
    /// For every answered read of a version an acknowledged write had replaced before the read
    /// began: how long before (seconds). How stale the fleet's reads were, against the window.
    func staleness(_ history: [PartitionOperation]) -> [Double] {
        let writes = Dictionary(grouping: history.filter { $0.kind == .write }, by: \.key).mapValues { $0.sorted { $0.start < $1.start } }
        return history.compactMap { read -> Double? in
            guard read.kind == .read, read.outcome == .ok, let version = read.version else { return nil }
            let ofKey = writes[read.key] ?? []
            let after = version == 1 ? 0 : (ofKey.firstIndex { $0.version == version }).map { $0 + 1 } ?? ofKey.count
            guard let replacing = ofKey[after...].first(where: { $0.outcome == .ok }), replacing.end < read.start else { return nil }
            return read.start - replacing.end
        }
    }
}

/// What a run did, in figures.
struct PartitionFigures: Sendable, CustomStringConvertible {
    var seed: UInt64
    var seconds: Double
    var history: [PartitionOperation]
    var faults: [PartitionFault]
    var violations: Int
    /// ``PartitionChecker/staleness(_:)`` of the history.
    var staleness: [Double]

    static func percentile(_ values: [Double], _ fraction: Double) -> Double {
        guard !values.isEmpty else { return 0 }
        let sorted = values.sorted()
        return sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))]
    }

    var description: String {
        let reads = history.filter { $0.kind == .read }
        let writes = history.filter { $0.kind == .write }
        let caches = Dictionary(grouping: reads.filter { $0.outcome == .ok }, by: { $0.cache ?? "-" })
            .map { "\($0.key) \($0.value.count)" }.sorted().joined(separator: ", ")
        let faultKinds = Dictionary(grouping: faults, by: \.kind).map { "\($0.key) \($0.value.count)" }.sorted().joined(separator: ", ")
        return """
            partitions: seed \(seed), \(String(format: "%.1f", seconds)) s, \(history.count) operations: \
            \(reads.count) reads (\(reads.filter { $0.outcome == .ok }.count) answered: \(caches); \
            \(reads.filter { $0.outcome == .failed }.count) failed), \
            \(writes.count) writes (\(writes.filter { $0.outcome == .ok }.count) acknowledged, \
            \(writes.filter { $0.outcome == .unknown }.count) unknown); \(faults.count) faults (\(faultKinds)); \
            \(staleness.count) reads of a replaced version, at most \(String(format: "%.2f", staleness.max() ?? 0)) s after \
            the replacing write was acknowledged (p99 \(String(format: "%.2f", Self.percentile(staleness, 0.99))) s); \
            violations \(violations)
            """
    }
}
