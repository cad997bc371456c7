import Foundation
import Testing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

/// The soft timeout on a manual clock, with a real memory store: a slow load answered with the
/// stale copy (and the callers joined to it at the same moment), the load going on to update the
/// store, the hard timeout, and the staleness bound measured from the copy's own store time.
@Suite("servingStaleAfter(_:in:key:maxStale:hardTimeout:)", .timeLimit(.minutes(1)))
struct ServingStaleAfterTests {
    let clock = ManualClock()
    let store = MemoryStore<String, String>()

    func soft(_ remote: LoaderSpy<Void, String>) -> ServingStaleAfterLoader<LoaderSpy<Void, String>, MemoryStore<String, String>> {
        remote.servingStaleAfter(
            .milliseconds(200), in: store, key: "feed", maxStale: .seconds(3600), hardTimeout: .seconds(5))
    }

    func call(_ loader: ServingStaleAfterLoader<LoaderSpy<Void, String>, MemoryStore<String, String>>) -> Task<Served<String>, any Error> {
        let environment = clock.environment(logger: quietLogger)
        return Task { try await loader.environment(environment).loadServed() }
    }

    /// A copy stored ten minutes ago (expired for the chain, usable here).
    func storeCopy() async throws -> Date {
        let storedAt = clock.date
        try await store.insert("copy", for: "feed", storedAt: storedAt)
        clock.advance(by: .seconds(600))
        return storedAt
    }

    @Test func aLoadFasterThanTheSoftTimeout_answers_andIsWritten() async throws {
        _ = try await storeCopy()
        let remote = LoaderSpy<Void, String>(.success("fresh"))
        let served = try await call(soft(remote)).value
        #expect(served.value == "fresh")
        #expect(try await store.retrieve("feed")?.value == "fresh")
    }

    @Test func aSlowLoad_answersTheCopyAfterTheSoftTimeout_andUpdatesTheStoreWhenItEnds() async throws {
        let storedAt = try await storeCopy()
        let remote = LoaderSpy<Void, String>(.success("fresh"), holdsLoads: true)
        let loader = soft(remote)
        let caller = call(loader)
        try await remote.waitForLoads(count: 1)
        try await clock.waitForSleepers(count: 2)  // the soft and the hard timeout
        clock.advance(by: .milliseconds(200))
        let served = try await caller.value
        #expect(served.value == "copy")
        #expect(served.provenance.tier.contains("stale after soft timeout"), "\(served.provenance.tier)")
        #expect(served.provenance.storedAt == storedAt)
        #expect(served.provenance.age == .between(storedAt, clock.date), "its age, from its own store time")
        #expect(remote.complete(0, with: .success("fresh")))
        try await loader.waitForBackgroundLoads()
        #expect(try await store.retrieve("feed")?.value == "fresh", "the load went on and updated the store")
    }

    @Test func callersJoinedToTheLoad_getTheEarlyAnswerAtTheSameMoment_andLaterOnesAtOnce() async throws {
        _ = try await storeCopy()
        let remote = LoaderSpy<Void, String>(.success("fresh"), holdsLoads: true)
        let loader = soft(remote)
        let first = call(loader)
        try await clock.waitForSleepers(count: 2)
        clock.advance(by: .milliseconds(150))
        let second = call(loader)
        // Both wait on the one load; 50 ms later the soft timeout answers both.
        try await loader.waitForWaitingCallers(2)
        #expect(remote.loadCount == 1)
        clock.advance(by: .milliseconds(50))
        #expect(try await first.value.value == "copy")
        #expect(try await second.value.value == "copy")
        #expect(try await call(loader).value.value == "copy", "after the soft timeout: at once")
        #expect(remote.loadCount == 1)
        #expect(remote.complete(0, with: .success("fresh")))
        try await loader.waitForBackgroundLoads()
    }

    @Test func withoutAUsableCopy_aCallerWaitsForTheLoad() async throws {
        let remote = LoaderSpy<Void, String>(.success("fresh"), holdsLoads: true)
        let loader = soft(remote)
        let caller = call(loader)
        try await clock.waitForSleepers(count: 2)
        clock.advance(by: .seconds(1))  // past the soft timeout: no copy to answer with
        #expect(remote.complete(0, with: .success("fresh")))
        #expect(try await caller.value.value == "fresh")
    }

    @Test func aCopyPastTheStalenessBound_isNoCopy_andNothingReStampsIt() async throws {
        let storedAt = try await storeCopy()
        let remote = LoaderSpy<Void, String>(.failure(URLError(.notConnectedToInternet)), holdsLoads: true)
        let loader = soft(remote)
        let early = call(loader)
        try await clock.waitForSleepers(count: 2)
        clock.advance(by: .milliseconds(200))
        #expect(try await early.value.value == "copy")
        #expect(remote.complete(0, with: .failure(URLError(.notConnectedToInternet))))
        try await loader.waitForBackgroundLoads()
        #expect(try await store.retrieve("feed")?.storedAt == storedAt, "served and failed: still its own store time")
        // An hour after it was stored, the copy is past the bound: a caller waits, and gets the error.
        clock.advance(by: .seconds(3000))
        let late = call(loader)
        try await remote.waitForLoads(count: 2)
        try await clock.waitForSleepers(count: 2)
        clock.advance(by: .milliseconds(200))
        #expect(remote.complete(1, with: .failure(URLError(.notConnectedToInternet))))
        await #expect(throws: URLError.self) { try await late.value }
    }

    @Test func pastTheHardTimeout_theWaitingCallersGetATimeout_andTheLoadIsCancelled() async throws {
        let remote = LoaderSpy<Void, String>(.success("fresh"), holdsLoads: true)
        let loader = soft(remote)
        let caller = call(loader)
        try await remote.waitForLoads(count: 1)
        try await clock.waitForSleepers(count: 2)
        clock.advance(by: .seconds(5))
        let error = await #expect(throws: TimeoutError.self) { try await caller.value }
        #expect(error?.timeout == .seconds(5))
        try await loader.waitForBackgroundLoads()
        #expect(remote.cancelledLoadCount == 1)
    }

    @Test func aCancelledCaller_stopsWaiting_andTheLoadGoesOn() async throws {
        let remote = LoaderSpy<Void, String>(.success("fresh"), holdsLoads: true)
        let loader = soft(remote)
        let caller = call(loader)
        try await remote.waitForLoads(count: 1)
        caller.cancel()
        await #expect(throws: CancellationError.self) { try await caller.value }
        #expect(remote.complete(0, with: .success("fresh")))
        try await loader.waitForBackgroundLoads()
        #expect(try await store.retrieve("feed")?.value == "fresh")
    }
}

/// `ServingStaleAfterFlights` alone: seeded random interleavings of arrivals (with a copy or not), soft
/// timeouts, ends and cancellations, checking after every step that every caller is answered at
/// most once, never early without a copy, and that none is left waiting once its flight ended.
@Suite("ServingStaleAfterFlights: one load per key, every caller answered once")
struct ServingStaleAfterFlightsTests {
    static let seeds = ProcessInfo.processInfo.environment["STRATA_INTERLEAVING_SEEDS"].flatMap { UInt64($0) } ?? 1_000

    struct Violation: Error, CustomStringConvertible { var description: String }

    @Test("random interleavings answer every caller exactly once")
    func randomInterleavings() async throws {
        for seed in 0..<Self.seeds {
            await Task.yield()  // between seeds: a long synchronous search would hold a cooperative thread
            var random = SplitMix64(seed: seed)
            var machine = ServingStaleAfterFlights<String>()
            var waiting: [UInt64: (key: String, flight: UInt64, hasCopy: Bool)] = [:]
            var answered: Set<UInt64> = []
            var running: [String: UInt64] = [:]
            func answer(_ waiter: UInt64, early: Bool, step: Int) throws {
                guard waiting[waiter] != nil, !answered.contains(waiter) else {
                    throw Violation(description: "seed \(seed) step \(step): waiter \(waiter) answered twice or unknown")
                }
                if early, waiting[waiter]?.hasCopy == false {
                    throw Violation(description: "seed \(seed) step \(step): waiter \(waiter) answered early without a copy")
                }
                waiting[waiter] = nil
                answered.insert(waiter)
            }
            for step in 0..<300 {
                let key = ["a", "b"][Int(random.next() % 2)]
                switch random.next() % 5 {
                case 0, 1:
                    let waiter = machine.nextWaiter()
                    let hasCopy = random.next() % 2 == 0
                    switch machine.arrived(key, waiter: waiter, hasCopy: hasCopy) {
                    case .start(let id):
                        if running[key] != nil { throw Violation(description: "seed \(seed) step \(step): a second flight of \(key)") }
                        running[key] = id
                        waiting[waiter] = (key, id, hasCopy)
                    case .join(let id):
                        if running[key] != id { throw Violation(description: "seed \(seed) step \(step): joined a flight not running") }
                        waiting[waiter] = (key, id, hasCopy)
                    case .answerCopy:
                        if !hasCopy { throw Violation(description: "seed \(seed) step \(step): a copy answer without a copy") }
                        answered.insert(waiter)
                    }
                case 2:
                    if let id = running[key] {
                        for waiter in machine.softTimeoutPassed(key, flight: id) { try answer(waiter, early: true, step: step) }
                    }
                case 3:
                    if let id = running[key] {
                        for waiter in machine.ended(key, flight: id) { try answer(waiter, early: false, step: step) }
                        running[key] = nil
                    }
                default:
                    if !waiting.isEmpty {
                        let waiter = waiting.keys.sorted()[Int(random.next() % UInt64(waiting.count))]
                        let info = waiting[waiter]!
                        if machine.withdrawn(info.key, flight: info.flight, waiter: waiter) { try answer(waiter, early: false, step: step) }
                    }
                }
                // Every caller still waiting belongs to its key's running flight.
                for (waiter, info) in waiting where running[info.key] != info.flight {
                    throw Violation(description: "seed \(seed) step \(step): waiter \(waiter) waits on a flight that ended")
                }
            }
        }
    }
}
