import Foundation
@_spi(StrataInternals) import Strata

extension Outbox {
    /// What the outbox holds and does now.
    public var status: OutboxStatus { state.withLock { $0.machine.status } }

    /// The status now, then after every change (queued, delivered, parked, draining, connectivity),
    /// newest first when the reader falls behind. Ends when the reader's task is cancelled.
    public func statusUpdates() -> AsyncStream<OutboxStatus> {
        let (stream, continuation) = AsyncStream.makeStream(of: OutboxStatus.self, bufferingPolicy: .bufferingNewest(1))
        let token = UUID()
        let current = state.withLock { state -> OutboxStatus in
            state.observers[token] = continuation
            return state.machine.status
        }
        continuation.yield(current)
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.observers.removeValue(forKey: token) }
        }
        return stream
    }

    /// Publishes the status to every observer and the gauges.
    func changed() {
        let (status, observers) = state.withLock { ($0.machine.status, Array($0.observers.values)) }
        metrics.pending.record(status.pending)
        metrics.parkedNow.record(status.parked)
        for observer in observers { observer.yield(status) }
    }
}

/// What one ``Outbox/drain()`` did.
public struct OutboxDrainReport: Sendable, Hashable {
    /// Writes delivered.
    public var delivered = 0
    /// Writes parked as dead letters.
    public var parked = 0
    /// Writes removed because the server's version won a conflict.
    public var discarded = 0
    /// Writes that failed and wait for a retry.
    public var deferred = 0
    /// Scopes left alone because another process sharing the storage drains them.
    public var heldElsewhere = 0

    /// A report of nothing done yet.
    public init() {}

    mutating func record(_ outcome: Outbox.Outcome) {
        switch outcome {
        case .delivered: delivered += 1
        case .parked: parked += 1
        case .discarded: discarded += 1
        case .deferred: deferred += 1
        case .stopped, .settled: break
        }
    }

    mutating func add(_ other: OutboxDrainReport) {
        delivered += other.delivered
        parked += other.parked
        discarded += other.discarded
        deferred += other.deferred
        heldElsewhere += other.heldElsewhere
    }
}

/// What an ``Outbox`` holds and does.
public struct OutboxStatus: Sendable, Hashable {
    /// Writes waiting for delivery, per scope (scopes with none are absent).
    public var pendingByScope: [String: Int]
    /// Parked writes (dead letters).
    public var parked: Int
    /// Whether a drain is running.
    public var isDraining: Bool
    /// What ``Outbox/connectivityChanged(isOnline:)`` last said (`true` until it says otherwise).
    public var isOnline: Bool
    /// The last failed attempt, of any write.
    public var lastFailure: OutboxFailure?
    /// Whether the entries have been read from the storage yet (before that, the counts are zero).
    public var isLoaded: Bool

    /// Writes waiting for delivery, in all scopes.
    public var pending: Int { pendingByScope.values.reduce(0, +) }
}

