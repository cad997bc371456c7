import Dispatch
import Foundation

/// Threads for work that blocks in the kernel: `open`, `read`, `write`, `fsync`, `rename`, and
/// `flock` waiting for another process.
///
/// Swift concurrency runs every task of a process on a cooperative pool with one thread per core. A
/// task blocked in a system call keeps its thread: on a two-core machine, two `fsync`s on a busy disk
/// stall every other task of the process (timers, network reads, a server's requests) for as long as
/// the disk takes. The file stores therefore hand their file-system work to this pool and suspend.
///
/// The pool grows on demand, one thread per job that finds no idle thread, up to `maximumThreads`
/// (beyond it jobs queue, first in first out), and a thread that stays idle for `idleTimeout` ends.
/// A job never waits behind another job while the pool is below its maximum, so a `flock` held by
/// another process delays only the operations that need that lock.
package final class BlockingIOPool: Sendable {
    /// The pool the stores use.
    package static let shared = BlockingIOPool(maximumThreads: 64, idleTimeout: .seconds(10))

    /// What the pool is doing, for tests and diagnostics.
    package struct Statistics: Sendable, Equatable {
        /// Threads alive now.
        package var threads: Int
        /// Threads waiting for a job now.
        package var idle: Int
        /// Jobs submitted and not yet started.
        package var queued: Int
        /// Threads started since the pool was created.
        package var threadsStarted: Int
        /// Most threads alive at once.
        package var peakThreads: Int
    }

    private struct State: Sendable {
        var jobs: [@Sendable () -> Void] = []
        var head = 0
        var threads = 0
        /// One semaphore per idle thread, which waits on it; a submit takes one and signals it.
        var idle: [DispatchSemaphore] = []
        var threadsStarted = 0
        var peakThreads = 0

        var queued: Int { jobs.count - head }

        mutating func dequeue() -> (@Sendable () -> Void)? {
            guard head < jobs.count else { return nil }
            let job = jobs[head]
            head += 1
            if head == jobs.count {
                jobs.removeAll(keepingCapacity: true)
                head = 0
            } else if head >= 64, head * 2 >= jobs.count {
                jobs.removeFirst(head)
                head = 0
            }
            return job
        }
    }

    /// Most threads the pool runs at once.
    package let maximumThreads: Int
    /// How long a thread with nothing to do waits before it ends.
    package let idleTimeout: Duration
    private let state = Locked(State())

    /// Creates a pool that starts threads as jobs need them.
    /// - Parameters:
    ///   - maximumThreads: most threads at once; further jobs wait for one to finish.
    ///   - idleTimeout: how long an idle thread lives.
    package init(maximumThreads: Int, idleTimeout: Duration) {
        precondition(maximumThreads > 0, "maximumThreads must be positive")
        precondition(idleTimeout > .zero, "idleTimeout must be positive")
        self.maximumThreads = maximumThreads
        self.idleTimeout = idleTimeout
    }

    /// Runs `body` on one of the pool's threads; the calling task suspends until it returns.
    ///
    /// `body` runs to the end even when the calling task is cancelled meanwhile: a file write is
    /// never abandoned halfway. Check for cancellation before calling, if it matters.
    package func run<Result: Sendable, Failure: Error>(
        _ body: @escaping @Sendable () throws(Failure) -> Result
    ) async throws(Failure) -> Result {
        let outcome: Swift.Result<Result, Failure> = await withCheckedContinuation { continuation in
            submit {
                do throws(Failure) {
                    continuation.resume(returning: .success(try body()))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        }
        return try outcome.get()
    }

    /// What the pool is doing now.
    package var statistics: Statistics {
        state.withLock { state in
            Statistics(
                threads: state.threads, idle: state.idle.count, queued: state.queued,
                threadsStarted: state.threadsStarted, peakThreads: state.peakThreads)
        }
    }

    /// Queues `job` and wakes an idle thread for it, or starts one when none is idle and the pool
    /// is below its maximum; at the maximum, a busy thread takes it when it finishes.
    func submit(_ job: @escaping @Sendable () -> Void) {
        let (wake, startThread) = state.withLock { state -> (DispatchSemaphore?, Bool) in
            state.jobs.append(job)
            if let idle = state.idle.popLast() { return (idle, false) }
            guard state.threads < maximumThreads else { return (nil, false) }
            state.threads += 1
            state.threadsStarted += 1
            state.peakThreads = max(state.peakThreads, state.threads)
            return (nil, true)
        }
        wake?.signal()
        if startThread {
            let thread = Thread { [self] in work() }
            thread.name = "strata.blocking-io"
            thread.start()
        }
    }

    private enum Next {
        case run(@Sendable () -> Void)
        case wait
    }

    /// A thread's life: run queued jobs; with none, wait on a semaphore of its own for a submit to
    /// signal it, and end after `idleTimeout` without one.
    private func work() {
        let wakeUp = DispatchSemaphore(value: 0)
        while true {
            let next = state.withLock { state -> Next in
                if let job = state.dequeue() { return .run(job) }
                state.idle.append(wakeUp)
                return .wait
            }
            if case .run(let job) = next {
                job()
                continue
            }
            if wakeUp.wait(timeout: .now() + idleTimeout / .seconds(1)) == .success { continue }
            let ends = state.withLock { state -> Bool? in
                // Still listed as idle: nobody chose this thread, so it may end (unless a job came in
                // meanwhile). Not listed: a submit took its semaphore and is about to signal it.
                guard let index = state.idle.firstIndex(where: { $0 === wakeUp }) else { return nil }
                state.idle.remove(at: index)
                guard state.queued == 0 else { return false }
                state.threads -= 1
                return true
            }
            switch ends {
            case true?: return
            case false?: continue
            case nil: wakeUp.wait()  // the signal is on its way; take it so the semaphore starts at 0 again
            }
        }
    }
}
