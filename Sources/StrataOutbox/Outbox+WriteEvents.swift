import Foundation
@_spi(StrataInternals) import Strata

/// What happened to the writes of an ``Outbox``, as ``Outbox/observeWrites(_:)`` reports it: what a
/// read that shows pending writes (a live query's overlay, an inspector) needs to stay current.
public enum OutboxWriteEvent: Sendable, Hashable {
    /// The outbox read its storage: these writes wait for delivery (every scope, oldest first per
    /// scope). Reported once, or first to an observer that comes later.
    case loaded([OutboxEntry])
    /// A write waits for delivery: queued, retried from the dead letters, or changed (rewritten after
    /// the write before it was delivered). The entry is as it is now.
    case queued(OutboxEntry)
    /// The server has the write; it left the outbox.
    case delivered(OutboxEntry)
    /// The server refused the write for good: parked as a dead letter, or dropped because the
    /// server's version won a conflict. A read shows it no more (it rolls back).
    case refused(OutboxEntry)
    /// A parked write was discarded (it was no longer shown).
    case discarded(OutboxEntry)
}

/// An observation made by ``Outbox/observeWrites(_:)``; `cancel()` ends it.
public struct OutboxWriteObservation: Sendable, Hashable {
    let id: UUID
    weak let outbox: Outbox?

    /// An observation `id` of `outbox` (`nil`: a placeholder that observes nothing).
    package init(id: UUID, outbox: Outbox?) {
        self.id = id
        self.outbox = outbox
    }

    /// Stops the reports (one being delivered now still arrives).
    public func cancel() {
        outbox?.state.withLock { $0.writeEvents.removeObserver(id) }
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.id == rhs.id }
    public func hash(into hasher: inout Hasher) { hasher.combine(id) }
}

extension Outbox {
    /// Calls `observer` with every change to the outbox's writes, in the order the outbox made them
    /// (one call at a time, never under the outbox's lock, so the observer may call back into it):
    /// first ``OutboxWriteEvent/loaded(_:)`` with the writes waiting now, if the outbox has read its
    /// storage, then each change.
    ///
    /// An event is reported before the call that made the change returns (`enqueue`, a drain, a
    /// retry): by that call, or by one that was reporting at that moment, which that call waits
    /// for. An observer gets only the changes made after it registered. Keep `observer` short; it
    /// runs on the reporting task.
    public func observeWrites(_ observer: @escaping @Sendable (OutboxWriteEvent) -> Void) -> OutboxWriteObservation {
        let id = UUID()
        state.withLock { state in
            state.writeEvents.register(id, observer)
            if state.machine.isLoaded { state.writeEvents.append(.loaded(state.machine.pendingEntries), to: id) }
        }
        publishWriteEvents()
        return OutboxWriteObservation(id: id, outbox: self)
    }

    /// Reports the write events queued so far, one at a time and in order: the first caller to find
    /// events and nobody reporting reports them all, including those queued while it does.
    func publishWriteEvents() {
        let claimed = state.withLock { state -> Bool in
            guard !state.writeEvents.isPublishing, !state.writeEvents.queue.isEmpty else { return false }
            state.writeEvents.isPublishing = true
            return true
        }
        guard claimed else { return }
        while let (event, serial, observers) = state.withLock({ $0.writeEvents.next() }) {
            for observer in observers { observer(event) }
            state.withLock { state in
                state.writeEvents.reported = serial
                state.writeEvents.reportedWaiters.resumeSatisfied(by: serial)
            }
        }
    }

    /// Reports the events queued so far, and returns once they have been reported, by this call or
    /// by the one reporting now (so a change is shown before the call that made it returns).
    func reportWriteEvents() async {
        publishWriteEvents()
        let (target, reported) = state.withLock { ($0.writeEvents.lastQueued, $0.writeEvents.reported) }
        // Reported (by this call, usually): no wait.
        guard reported < target else { return }
        // Another call reports them now. Waited for even by a cancelled caller (a drain ending at
        // shutdown): the wait is short (that call's observers running), the change is already
        // made, and its report must come before this call returns. A task of its own, which the
        // caller's cancellation does not reach.
        let state = self.state
        await Task {
            try? await state.wait(in: \.writeEvents.reportedWaiters, current: { $0.writeEvents.reported }, until: { $0 >= target })
        }.value
    }
}

/// The outbox's write observers and the events not yet reported to them.
struct WriteEventFeed: Sendable {
    struct Queued: Sendable {
        var event: OutboxWriteEvent
        /// Its number: events are numbered in the order they were queued, from 1.
        var serial: UInt64
        /// Only for this observer (its first `loaded`); `nil`: for every one.
        var to: UUID?
    }

    struct Observer: Sendable {
        var report: @Sendable (OutboxWriteEvent) -> Void
        /// The first event it gets (the ones queued before it registered are not its).
        var since: UInt64
    }

    var observers: [UUID: Observer] = [:]
    var queue: [Queued] = []
    /// Whether a call is reporting the queue now.
    var isPublishing = false
    /// The number of the last event queued, and of the last one reported.
    var lastQueued: UInt64 = 0
    var reported: UInt64 = 0
    /// Calls waiting for an event of theirs to be reported.
    var reportedWaiters = ConditionWaiters<UInt64>()

    mutating func register(_ id: UUID, _ report: @escaping @Sendable (OutboxWriteEvent) -> Void) {
        observers[id] = Observer(report: report, since: lastQueued + 1)
    }

    /// Queues `event` for every observer, or only for `observer` (nothing when there is none).
    mutating func append(_ event: OutboxWriteEvent, to observer: UUID? = nil) {
        guard !observers.isEmpty else { return }
        lastQueued += 1
        queue.append(Queued(event: event, serial: lastQueued, to: observer))
    }

    mutating func removeObserver(_ id: UUID) {
        observers[id] = nil
    }

    /// The next event with its number and who gets it; `nil` (and no longer publishing) when the
    /// queue is empty. An event nobody gets counts as reported.
    mutating func next() -> (OutboxWriteEvent, UInt64, [@Sendable (OutboxWriteEvent) -> Void])? {
        while !queue.isEmpty {
            let first = queue.removeFirst()
            let observers: [@Sendable (OutboxWriteEvent) -> Void] = if let to = first.to {
                self.observers[to].map { [$0.report] } ?? []
            } else {
                self.observers.values.filter { $0.since <= first.serial }.map(\.report)
            }
            if !observers.isEmpty { return (first.event, first.serial, observers) }
            reported = first.serial
            reportedWaiters.resumeSatisfied(by: reported)
        }
        isPublishing = false
        return nil
    }
}
