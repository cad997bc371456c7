import Foundation
@_spi(StrataInternals) import Strata
import StrataOutbox

/// The client's record for an inspector: the last loads, and the streams told of each change.
struct InspectionFeed: Sendable {
    /// How many loads the timeline keeps.
    static let capacity = 200
    /// The last loads, a ring: record number `n` is at `n % capacity` once the ring is full.
    private var ring: [QueryLoadRecord] = []
    /// The number the next record gets (records are numbered from 0, oldest first).
    private var nextNumber = 0
    /// The number of each running record, by query and flight.
    private var running: [UInt64: [Int: Int]] = [:]
    var subscribers: [UUID: AsyncStream<Void>.Continuation] = [:]
    /// Whether anything is recorded: while an inspector follows the client.
    var isOn: Bool { !subscribers.isEmpty }
    /// How many flights are tracked as possibly running.
    var runningCount: Int { running.values.reduce(0) { $0 + $1.count } }

    /// The loads kept, oldest first.
    var loads: [QueryLoadRecord] {
        guard ring.count == Self.capacity else { return ring }
        let oldest = nextNumber % Self.capacity
        return Array(ring[oldest...] + ring[..<oldest])
    }

    /// Where record `number` is in the ring, if it is still kept.
    private func slot(of number: Int) -> Int? {
        number < nextNumber && number >= nextNumber - ring.count ? number % Self.capacity : nil
    }

    private mutating func append(_ record: QueryLoadRecord) -> Int {
        if ring.count < Self.capacity { ring.append(record) } else { ring[nextNumber % Self.capacity] = record }
        nextNumber += 1
        // Running records the ring let go of (a load that never ended: its query went away).
        if running.count > Self.capacity {
            running = running.compactMapValues { flights in
                let kept = flights.filter { slot(of: $0.value) != nil }
                return kept.isEmpty ? nil : kept
            }
        }
        return nextNumber - 1
    }

    mutating func record(_ activity: QueryActivity) {
        switch activity {
        case .loadStarted(let key, let query, let flight, let reason, let at):
            if let number = running[query]?[flight], let slot = slot(of: number) {
                // A retry of the same load: running again, its last attempt's end forgotten.
                ring[slot].outcome = .running
                ring[slot].endedAt = nil
                ring[slot].error = nil
            } else {
                // One flight per query: a new one means the others were abandoned (a failed one
                // waiting for a retry that never came). None of them stays running, and a query
                // that keeps failing keeps one entry here, not one per flight.
                for (_, number) in running[query] ?? [:] {
                    if let slot = slot(of: number), ring[slot].outcome == .running {
                        ring[slot].outcome = .cancelled
                        ring[slot].endedAt = at
                    }
                }
                running[query] = [flight: append(
                    QueryLoadRecord(key: key.description, reason: reason.description, startedAt: at, outcome: .running))]
            }
        case .loadEnded(_, let query, let flight, let outcome, let tier, let error, let at):
            guard let number = running[query]?[flight], let slot = slot(of: number), ring[slot].outcome == .running else { return }
            ring[slot].endedAt = at
            ring[slot].outcome = outcome
            ring[slot].tier = tier.map { Redaction.redactingSecrets(in: $0) }
            ring[slot].error = error.map { Redaction.redactingSecrets(in: $0) }
            // A failed load may be retried (the same flight): its record stays findable until the
            // query starts another flight.
            if outcome != .failed {
                running[query]?[flight] = nil
                if running[query]?.isEmpty == true { running[query] = nil }
            }
        case .published:
            break
        }
    }
}
