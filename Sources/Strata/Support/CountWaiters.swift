/// Tasks waiting for a count (requests received, loads started, sleepers registered) to reach a
/// threshold: the test kit's way to wait for "something happened" without sleeping.
///
/// Keep it inside the state a ``Locked`` guards: call ``wait(for:current:continuation:)`` and
/// ``resumeReached(_:)`` with the lock held; both resume continuations, which never blocks.
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
