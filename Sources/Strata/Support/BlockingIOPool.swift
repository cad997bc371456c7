import Foundation
#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

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
@_spi(StrataInternals)
public final class BlockingIOPool: @unchecked Sendable {
    // @unchecked: every stored property below is either immutable (`maximumThreads`, `idleTimeout`,
    // `mutex`, `condition`) or is `state`, which is only read or written while `mutex` is held (in
    // `submit` and `work`). Jobs are `@Sendable` closures, so handing them to another thread is safe.

    /// The pool the stores use.
    public static let shared = BlockingIOPool(maximumThreads: 64, idleTimeout: .seconds(10))

    /// What the pool is doing, for tests and diagnostics.
    public struct Statistics: Sendable, Equatable {
        /// Threads alive now.
        public var threads: Int
        /// Threads waiting for a job now.
        public var idle: Int
        /// Jobs submitted and not yet started.
        public var queued: Int
        /// Threads started since the pool was created.
        public var threadsStarted: Int
        /// Most threads alive at once.
        public var peakThreads: Int
    }

    private struct State {
        var jobs: [@Sendable () -> Void] = []
        var head = 0
        var threads = 0
        /// Threads waiting on `condition` (counted until they hold the lock again after waking).
        var idle = 0
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
    public let maximumThreads: Int
    /// How long a thread with nothing to do waits before it ends.
    public let idleTimeout: Duration
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    private var state = State()

    /// Creates a pool that starts threads as jobs need them.
    /// - Parameters:
    ///   - maximumThreads: most threads at once; further jobs wait for one to finish.
    ///   - idleTimeout: how long an idle thread lives.
    public init(maximumThreads: Int, idleTimeout: Duration) {
        precondition(maximumThreads > 0, "maximumThreads must be positive")
        precondition(idleTimeout > .zero, "idleTimeout must be positive")
        self.maximumThreads = maximumThreads
        self.idleTimeout = idleTimeout
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        condition = .allocate(capacity: 1)
        condition.initialize(to: pthread_cond_t())
        #if canImport(Darwin)
        pthread_cond_init(condition, nil)
        #else
        // Timed waits measure the monotonic clock, so a change of wall-clock time cannot end or
        // extend them.
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
        #endif
    }

    deinit {
        // Threads hold a strong reference to the pool while they run, so none is left here.
        pthread_cond_destroy(condition)
        condition.deinitialize(count: 1)
        condition.deallocate()
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Runs `body` on one of the pool's threads; the calling task suspends until it returns.
    ///
    /// `body` runs to the end even when the calling task is cancelled meanwhile: a file write is
    /// never abandoned halfway. Check for cancellation before calling, if it matters.
    public func run<Result: Sendable, Failure: Error>(
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
    public var statistics: Statistics {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return Statistics(
            threads: state.threads, idle: state.idle, queued: state.queued,
            threadsStarted: state.threadsStarted, peakThreads: state.peakThreads)
    }

    private func submit(_ job: @escaping @Sendable () -> Void) {
        pthread_mutex_lock(mutex)
        state.jobs.append(job)
        // Every thread looks at the queue before it waits, and idle threads look again when woken, so
        // a signal that finds no waiter loses nothing. More queued jobs than idle threads to take
        // them: start a thread rather than let this job wait behind a running one.
        if state.idle > 0 { pthread_cond_signal(condition) }
        let startThread = state.queued > state.idle && state.threads < maximumThreads
        if startThread {
            state.threads += 1
            state.threadsStarted += 1
            state.peakThreads = max(state.peakThreads, state.threads)
        }
        pthread_mutex_unlock(mutex)
        if startThread {
            let thread = Thread { [self] in work() }
            thread.name = "strata.blocking-io"
            thread.start()
        }
    }

    private func work() {
        pthread_mutex_lock(mutex)
        while true {
            if let job = state.dequeue() {
                pthread_mutex_unlock(mutex)
                job()
                pthread_mutex_lock(mutex)
                continue
            }
            state.idle += 1
            let timedOut = waitForSignal()
            state.idle -= 1
            // A job queued meanwhile is taken even after a timeout: no job is left without a thread.
            if timedOut, state.queued == 0 {
                state.threads -= 1
                pthread_mutex_unlock(mutex)
                return
            }
        }
    }

    /// Waits (with `mutex` held) for a signal or `idleTimeout`; `true` when the time ran out.
    private func waitForSignal() -> Bool {
        let (seconds, attoseconds) = idleTimeout.components
        var deadline = timespec()
        #if canImport(Darwin)
        deadline.tv_sec = Int(seconds)
        deadline.tv_nsec = Int(attoseconds / 1_000_000_000)
        return pthread_cond_timedwait_relative_np(condition, mutex, &deadline) == ETIMEDOUT
        #else
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        var nanoseconds = Int(deadline.tv_nsec) + Int(attoseconds / 1_000_000_000)
        deadline.tv_sec += Int(seconds) + nanoseconds / 1_000_000_000
        nanoseconds %= 1_000_000_000
        deadline.tv_nsec = nanoseconds
        return pthread_cond_timedwait(condition, mutex, &deadline) == ETIMEDOUT
        #endif
    }
}
