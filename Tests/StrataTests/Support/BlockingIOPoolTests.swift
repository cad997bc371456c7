import Foundation
@testable @_spi(StrataInternals) import Strata
import StrataTesting
import Testing
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@Suite("BlockingIOPool: blocking work off the cooperative pool")
struct BlockingIOPoolTests {
    /// Far more jobs than cores, each blocked until the test lets them go: a pool fit for blocking
    /// system calls starts a thread for every one of them (a fixed-size pool, or one that queues a job
    /// behind a busy thread, does not). No job can finish before the gate opens, so no thread is
    /// idle and the count is exact.
    @Test func jobsThatBlockEachGetAThreadOfTheirOwn() async {
        let pool = BlockingIOPool(maximumThreads: 16, idleTimeout: .seconds(60))
        let gate = DispatchSemaphore(value: 0)
        let (finished, finish) = AsyncStream.makeStream(of: Void.self)
        let jobs = 12
        for _ in 0..<jobs {
            pool.submit {
                gate.wait()
                finish.yield()
            }
        }
        let whileBlocked = pool.statistics
        for _ in 0..<jobs { gate.signal() }
        var done = 0
        for await _ in finished {
            done += 1
            if done == jobs { break }
        }
        #expect(whileBlocked.threads == jobs)
        #expect(whileBlocked.threadsStarted == jobs)
        #expect(done == jobs)
    }

    @Test func beyondItsMaximumJobsQueueAndEveryOneRuns() async throws {
        let pool = BlockingIOPool(maximumThreads: 2, idleTimeout: .seconds(10))
        let running = Locked((now: 0, peak: 0))
        let results = await withTaskGroup(of: Int.self) { group in
            for number in 0..<40 {
                group.addTask {
                    await pool.run {
                        running.withLock { $0.now += 1; $0.peak = max($0.peak, $0.now) }
                        defer { running.withLock { $0.now -= 1 } }
                        return number * number
                    }
                }
            }
            return await group.reduce(into: Set<Int>()) { $0.insert($1) }
        }
        #expect(results == Set((0..<40).map { $0 * $0 }))
        #expect(running.withLock { $0.peak } <= 2)
        #expect(pool.statistics.peakThreads <= 2)
        #expect(pool.statistics.queued == 0)
    }

    @Test func aThrownErrorReachesTheCallerTyped() async {
        struct Refused: Error, Equatable {}
        let pool = BlockingIOPool(maximumThreads: 1, idleTimeout: .seconds(10))
        await #expect(throws: Refused()) {
            try await pool.run { () throws(Refused) -> Int in throw Refused() }
        }
        #expect(await pool.run { 42 } == 42)
    }

    @Test func oneCallerAtATimeReusesOneThread() async {
        let pool = BlockingIOPool(maximumThreads: 8, idleTimeout: .seconds(60))
        for number in 0..<200 {
            #expect(await pool.run { number } == number)
        }
        // A caller can submit its next job before the thread that ran the last one waits again, so
        // a second thread may start; never one per job.
        #expect(pool.statistics.threadsStarted <= 3)
    }

    /// The real case: another process holds a limited `FileStore`'s index lock (`flock`). Inserts
    /// wait for it, more of them than there are cores; the rest of the process must go on meanwhile.
    /// Were the inserts blocked on the cooperative pool, the probe below could not run until the lock
    /// was released, and the holder releases it only when the probe has run (or after 30 s: a failure).
    @Test func insertsWaitingForAnotherProcessesLockLeaveTheCooperativePoolFree() async throws {
        let directory = try TemporaryDirectory(prefix: "strata-blocking")
        let store = FileStore<String>(directory: directory.url, countLimit: 100)
        try await store.insert("before", for: "warm-up", storedAt: Date(timeIntervalSince1970: 1))

        // Another open file description conflicts with the store's own, as another process's would.
        let lockFD = open(directory.appending(".strata-index.lock").path, O_RDWR | O_CLOEXEC)
        #expect(lockFD >= 0)
        defer { close(lockFD) }
        #expect(flock(lockFD, LOCK_EX | LOCK_NB) == 0)

        let probeRan = DispatchSemaphore(value: 0)
        let released = Locked(false)
        let releasedInTime = Locked(false)
        Thread.detachNewThread {
            let inTime = probeRan.wait(timeout: .now() + .seconds(30)) == .success
            releasedInTime.withLock { $0 = inTime }
            released.withLock { $0 = true }
            flock(lockFD, LOCK_UN)
        }

        let writers = 2 * ProcessInfo.processInfo.activeProcessorCount + 2
        let inserts = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for writer in 0..<writers {
                    group.addTask {
                        try await store.insert("value \(writer)", for: "key-\(writer)", storedAt: Date(timeIntervalSince1970: 2))
                    }
                }
                try await group.waitForAll()
            }
        }
        // Work that needs the cooperative pool, run while the writers wait for the lock.
        let probe = await withTaskGroup(of: Int.self) { group in
            for number in 1...100 { group.addTask { number } }
            return await group.reduce(0, +)
        }
        let writersStillWaiting = !released.withLock { $0 }
        probeRan.signal()
        try await inserts.value

        #expect(probe == 5050)
        #expect(writersStillWaiting, "the lock was released (after 30 s) before the probe could run")
        #expect(releasedInTime.withLock { $0 })
        for writer in 0..<writers {
            #expect(try await store.retrieve("key-\(writer)")?.value == "value \(writer)")
        }
    }
}
