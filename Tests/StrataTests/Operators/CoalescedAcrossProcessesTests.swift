import Foundation
import Testing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

/// Several "processes" (loaders sharing one store and one in-memory lock) missing one key at once,
/// on a manual clock: one loads, the others serve its answer from the store.
@Suite("coalescedAcrossProcesses(in:key:freshness:lock:timeout:pollInterval:)", .timeLimit(.minutes(1)))
struct CoalescedAcrossProcessesTests {
    let clock = ManualClock()
    let store = MemoryStore<String, String>()
    let lock = InMemoryFleetLock()

    /// One process's way to the remote.
    func process(_ remote: LoaderSpy<Void, String>, timeout: Duration = .milliseconds(200)) -> some Loader<Void, String> {
        remote
            .coalescedAcrossProcesses(in: store, key: "feed", freshness: .maxAge(.seconds(60)), lock: lock, timeout: timeout)
            .environment(clock.environment(logger: quietLogger))
    }

    @Test func theHolderLoadsAndWrites_andAWaiterServesItsAnswerFromTheStore() async throws {
        let remote = LoaderSpy<Void, String>(.success("fresh"), holdsLoads: true)
        let a = Task { try await process(remote).loadServed() }
        try await remote.waitForLoads(count: 1)
        #expect(lock.heldKeys == ["feed"])
        let b = Task { try await process(remote).loadServed() }
        try await clock.waitForSleepers(count: 1)  // B missed the lock and the store: it waits
        #expect(remote.complete(0, with: .success("fresh")))
        let servedA = try await a.value
        #expect(servedA.value == "fresh")
        #expect(lock.heldKeys.isEmpty, "released once written")
        clock.advance(by: .milliseconds(50))
        let servedB = try await b.value
        #expect(servedB.value == "fresh")
        #expect(servedB.provenance.tier.contains("coalesced across processes"), "\(servedB.provenance.tier)")
        #expect(remote.loadCount == 1, "one remote call for both processes")
        #expect(lock.grants == 1)
    }

    @Test func theHolderReadsTheStoreAgain_andAFreshEntryThereAnswersWithoutALoad() async throws {
        try await store.insert("written just before", for: "feed", storedAt: clock.date)
        let remote = LoaderSpy<Void, String>(.success("fresh"))
        #expect(try await process(remote).load() == "written just before")
        #expect(remote.loadCount == 0)
        #expect(lock.heldKeys.isEmpty)
    }

    @Test func aStaleEntry_doesNotAnswer_theHolderLoads() async throws {
        try await store.insert("old", for: "feed", storedAt: clock.date)
        clock.advance(by: .seconds(61))
        let remote = LoaderSpy<Void, String>(.success("fresh"))
        #expect(try await process(remote).load() == "fresh")
        #expect(try await store.retrieve("feed")?.value == "fresh")
        #expect(remote.loadCount == 1)
    }

    @Test func aHolderWhoseLockDied_cannotReleaseTheNextHolders() async throws {
        let remote = LoaderSpy<Void, String>(.success("fresh"), holdsLoads: true)
        let a = Task { try await process(remote).load() }
        try await remote.waitForLoads(count: 1)
        lock.breakHolds()  // A's connection died: its lock with it
        let b = Task { try await process(remote).load() }
        try await remote.waitForLoads(count: 2)  // B took the free lock and loads
        #expect(remote.complete(0, with: .success("from A")))
        #expect(try await a.value == "from A")
        #expect(lock.heldKeys == ["feed"], "A's late release leaves B's lock alone")
        #expect(remote.complete(1, with: .success("from B")))
        #expect(try await b.value == "from B")
        #expect(lock.heldKeys.isEmpty)
    }

    @Test func pastTheTimeout_aWaiterLoadsAnyway() async throws {
        let remote = LoaderSpy<Void, String>(.success("fresh"), holdsLoads: true)
        let a = Task { try await process(remote).load() }
        try await remote.waitForLoads(count: 1)
        let b = Task { try await process(remote, timeout: .milliseconds(120)).load() }
        // Reads the store and tries the lock at 50, 100 and (the rest of the timeout) 120 ms, then loads.
        for _ in 0..<3 {
            try await clock.waitForSleepers(count: 1)
            clock.advance(by: .milliseconds(50))
        }
        try await remote.waitForLoads(count: 2)
        #expect(lock.attempts == 5, "A's try, B's first, and one per poll of B's")
        #expect(remote.complete(1, with: .success("from B")))
        #expect(try await b.value == "from B")
        #expect(remote.complete(0, with: .success("from A")))
        #expect(try await a.value == "from A")
    }

    @Test func anUnavailableLock_isALoadWithoutIt() async throws {
        lock.isUnavailable = true
        let remote = LoaderSpy<Void, String>(.success("fresh"))
        #expect(try await process(remote).load() == "fresh")
        #expect(remote.loadCount == 1)
        #expect(try await store.retrieve("feed")?.value == "fresh", "written all the same")
    }

    @Test func aFailedLoad_releasesTheLock_andTheErrorPassesThrough() async throws {
        struct Down: Error {}
        let remote = LoaderSpy<Void, String>(.failure(Down()))
        await #expect(throws: Down.self) { try await process(remote).load() }
        #expect(lock.heldKeys.isEmpty)
        #expect(try await store.retrieve("feed") == nil)
    }

    @Test func aCancelledWaiter_stopsWaiting() async throws {
        let remote = LoaderSpy<Void, String>(.success("fresh"), holdsLoads: true)
        let a = Task { try await process(remote).load() }
        try await remote.waitForLoads(count: 1)
        let b = Task { try await process(remote).load() }
        try await clock.waitForSleepers(count: 1)
        b.cancel()
        await #expect(throws: CancellationError.self) { try await b.value }
        #expect(remote.loadCount == 1)
        #expect(remote.complete(0, with: .success("fresh")))
        _ = try await a.value
    }

    @Test func aCancelledHolder_releasesTheLock() async throws {
        let remote = LoaderSpy<Void, String>(.success("fresh"), holdsLoads: true)
        let a = Task { try await process(remote).load() }
        try await remote.waitForLoads(count: 1)
        a.cancel()
        await #expect(throws: CancellationError.self) { try await a.value }
        #expect(lock.heldKeys.isEmpty)
    }
}
