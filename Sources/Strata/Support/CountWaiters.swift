/// Tasks waiting for a count (requests received, tasks at a gate) to reach a threshold, without
/// sleeping.
///
/// Keep it inside the state a ``Locked`` guards: call ``wait(for:current:continuation:)`` and
/// ``resumeReached(_:)`` with the lock held; both resume continuations, which never blocks.
///
/// A waiter here ignores its task's cancellation and has no time bound. The test kit's waits
/// (`ManualClock`, `LoaderSpy`, ``LoadsInFlight``) use ``ConditionWaiters`` with
/// ``waitCancellably(register:withdraw:)`` and ``withWaitTimeout(_:_:timedOut:)`` instead.
@_spi(StrataInternals)
public struct CountWaiters: Sendable {
    private var waiting: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []

    public init() {}

    /// Whether nobody waits.
    public var isEmpty: Bool { waiting.isEmpty }

    /// Resumes `continuation` now if `current` has reached `count`, otherwise when a later
    /// ``resumeReached(_:)`` reports a count that has.
    public mutating func wait(for count: Int, current: Int, continuation: CheckedContinuation<Void, Never>) {
        if current >= count {
            continuation.resume()
        } else {
            waiting.append((count, continuation))
        }
    }

    /// Resumes every waiter whose count `current` has reached.
    public mutating func resumeReached(_ current: Int) {
        waiting.removeAll { waiter in
            guard waiter.count <= current else { return false }
            waiter.continuation.resume()
            return true
        }
    }
}
