import Foundation
import Logging
@testable @_spi(StrataInternals) import Strata
// Every file of this target uses `Item`: imported once, for the whole target.
@_exported import StrataFixtures
import StrataTesting


/// Runs `first` and `second` at once on two new threads, not tasks, and returns when both have
/// ended, or at once when the calling task is cancelled (the threads go on). A race between a lock
/// and the runtime's lock of a task (a stream's reader cancelled while it is yielded to) deadlocks
/// threads: on threads, the concurrency pool stays free for the bound a test puts around it
/// (`withWaitTimeout`, which cancels this wait), and the test fails instead of hanging.
func raceOnThreads(_ first: @escaping @Sendable () -> Void, _ second: @escaping @Sendable () -> Void) async {
    // The threads still running, and the waiting continuation: taken under the lock, resumed after.
    let state = Locked<(running: Int, waiting: CheckedContinuation<Void, Never>?)>((2, nil))
    let release: @Sendable (_ ended: Bool) -> Void = { ended in
        let waiting = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if ended { state.running -= 1 }
            return ended && state.running > 0 ? nil : state.waiting.take()
        }
        waiting?.resume()
    }
    await withTaskCancellationHandler {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            state.withLock { $0.waiting = continuation }
            if Task.isCancelled { release(false) }
            Thread.detachNewThread { first(); release(true) }
            Thread.detachNewThread { second(); release(true) }
        }
    } onCancel: {
        release(false)
    }
}
