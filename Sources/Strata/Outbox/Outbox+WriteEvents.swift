import Foundation

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

/// An observation made by ``Outbox/observeWrites(_:)``; ``cancel()`` ends it.
public struct OutboxWriteObservation: Sendable, Hashable {
    let id: UUID
    weak let outbox: Outbox?

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
    /// An event is reported by the call that made the change, before that call returns, unless
    /// another call is reporting at that moment: then that one reports it, right after its own. Keep
    /// `observer` short; it runs on the delivering task.
    public func observeWrites(_ observer: @escaping @Sendable (OutboxWriteEvent) -> Void) -> OutboxWriteObservation {
        let id = UUID()
        state.withLock { state in
            state.writeEvents.observers[id] = observer
            if state.machine.isLoaded {
                state.writeEvents.queue.append(.init(event: .loaded(state.machine.pendingEntries), to: id))
            }
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
        while let (event, observers) = state.withLock({ $0.writeEvents.next() }) {
            for observer in observers { observer(event) }
        }
    }
}

/// The outbox's write observers and the events not yet reported to them.
struct WriteEventFeed: Sendable {
    struct Queued: Sendable {
        var event: OutboxWriteEvent
        /// Only for this observer (its first `loaded`); `nil`: for every one.
        var to: UUID?
    }

    var observers: [UUID: @Sendable (OutboxWriteEvent) -> Void] = [:]
    var queue: [Queued] = []
    /// Whether a call is reporting the queue now.
    var isPublishing = false

    /// Queues `event` for every observer (nothing when there is none).
    mutating func append(_ event: OutboxWriteEvent) {
        guard !observers.isEmpty else { return }
        queue.append(Queued(event: event, to: nil))
    }

    mutating func removeObserver(_ id: UUID) {
        observers[id] = nil
        queue.removeAll { $0.to == id }
    }

    /// The next event with who gets it; `nil` (and no longer publishing) when the queue is empty.
    mutating func next() -> (OutboxWriteEvent, [@Sendable (OutboxWriteEvent) -> Void])? {
        while !queue.isEmpty {
            let first = queue.removeFirst()
            let observers = first.to.map { id in self.observers[id].map { [$0] } ?? [] } ?? Array(self.observers.values)
            if !observers.isEmpty { return (first.event, observers) }
        }
        isPublishing = false
        return nil
    }
}
