import Foundation
import Testing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

/// Refresh ahead with a real memory store and a manual clock: hits, the background refresh a late
/// hit starts (one per key), an expired copy loaded now, and the fail-safe quiet period.
@Suite("refreshingAhead(_:in:key:)", .timeLimit(.minutes(1)))
struct RefreshingAheadTests {
    let clock = ManualClock()

    /// A feed cached for 100 s, refreshed ahead from 80 s, over `remote`.
    func feed(_ remote: LoaderSpy<Void, String>, store: MemoryStore<String, String>) -> some Loader<Void, String> {
        remote.refreshingAhead(.maxAge(.seconds(100)), in: store, key: "feed").environment(clock.environment(logger: quietLogger))
    }

    func refreshing(_ remote: LoaderSpy<Void, String>, store: MemoryStore<String, String>) -> RefreshingAheadLoader<LoaderSpy<Void, String>, MemoryStore<String, String>> {
        remote.refreshingAhead(.maxAge(.seconds(100)), in: store, key: "feed")
    }

    @Test func aYoungCopy_isAHit_andTheRemoteIsNotCalled() async throws {
        let store = MemoryStore<String, String>()
        try await store.insert("cached", for: "feed", storedAt: clock.date)
        let remote = LoaderSpy<Void, String>(.success("fresh"))
        clock.advance(by: .seconds(79))
        let served = try await feed(remote, store: store).loadServed()
        #expect(served.value == "cached")
        #expect(served.provenance.age == .seconds(79))
        #expect(remote.loadCount == 0)
    }

    @Test func anExpiredCopy_isLoadedAnew_asOnePastMaxAge() async throws {
        let store = MemoryStore<String, String>()
        // Young by its age, but an invalidation ended its lifetime.
        try await store.insert("expired", for: "feed", storedAt: clock.date, validators: CacheValidators(maxAge: .zero))
        let remote = LoaderSpy<Void, String>(.success("fresh"))
        #expect(try await feed(remote, store: store).load() == "fresh")
        #expect(remote.loadCount == 1)
    }

    @Test func aLateCopy_answersAtOnce_andStartsOneBackgroundRefreshForManyReads() async throws {
        let store = MemoryStore<String, String>()
        try await store.insert("cached", for: "feed", storedAt: clock.date)
        let remote = LoaderSpy<Void, String>(.success("fresh"), holdsLoads: true)
        let loader = refreshing(remote, store: store)
        let environment = clock.environment(logger: quietLogger)
        clock.advance(by: .seconds(85))
        for _ in 0..<5 {
            // Answered at once with the copy, though the refresh is held.
            #expect(try await loader.environment(environment).load() == "cached")
        }
        try await remote.waitForLoads(count: 1)
        #expect(remote.loadCount == 1, "one background refresh for five reads")
        #expect(remote.complete(0, with: .success("fresh")))
        try await loader.waitForBackgroundRefreshes()
        let entry = try await store.retrieve("feed")
        #expect(entry?.value == "fresh")
        #expect(entry?.storedAt == clock.date, "stamped when it was refreshed: young again")
        #expect(try await loader.environment(environment).load() == "fresh")
        #expect(remote.loadCount == 1)
    }

    @Test func anExpiredCopy_orNone_isLoadedNow_andWritten() async throws {
        let store = MemoryStore<String, String>()
        let remote = LoaderSpy<Void, String>(.success("first"), .success("second"))
        #expect(try await feed(remote, store: store).load() == "first", "nothing cached")
        clock.advance(by: .seconds(100))
        let served = try await feed(remote, store: store).loadServed()
        #expect(served.value == "second", "exactly 100 s old is expired")
        #expect(served.provenance.origin != .memory)
        #expect(try await store.retrieve("feed")?.value == "second")
        #expect(remote.loadCount == 2)
    }

    @Test func afterAFailedRefresh_theKeyIsQuietForTheFailSafe_andTheCopyStillServes() async throws {
        let store = MemoryStore<String, String>()
        try await store.insert("cached", for: "feed", storedAt: clock.date)
        struct Down: Error {}
        let remote = LoaderSpy<Void, String>(.failure(Down()), .success("fresh"))
        let loader = refreshing(remote, store: store)
        let environment = clock.environment(logger: quietLogger)
        clock.advance(by: .seconds(81))
        #expect(try await loader.environment(environment).load() == "cached")
        try await loader.waitForBackgroundRefreshes()
        #expect(remote.loadCount == 1)

        // Quiet for 30 s: reads are hits, nothing is sent.
        clock.advance(by: .seconds(10))
        #expect(try await loader.environment(environment).load() == "cached")
        #expect(remote.loadCount == 1)
        clock.advance(by: .seconds(5))   // 96 s old, 15 s into the quiet period
        #expect(try await loader.environment(environment).load() == "cached")
        try await loader.waitForBackgroundRefreshes()
        #expect(remote.loadCount == 1)

        // The copy still expires at 100 s from when it was stored: the fail-safe never extends it.
        clock.advance(by: .seconds(4))
        #expect(try await loader.environment(environment).load() == "fresh")
        #expect(remote.loadCount == 2)
    }

    @Test func theChain_drawsTheOperator() {
        let loader = refreshing(LoaderSpy<Void, String>(.success("x")), store: MemoryStore())
        #expect(loader.description.hasPrefix("refreshingAhead("))
        #expect(loader.refreshAfter == .seconds(80))
    }
}

/// ``RefreshingAheadStateMachine`` alone: seeded random interleavings of reads at any age, refreshes
/// ending either way, and time passing, with the invariants checked after every step.
@Suite("refreshingAhead: its state machine")
struct RefreshAheadStateMachineTests {
    typealias Machine = RefreshingAheadStateMachine<Int>

    static let start = Date(timeIntervalSinceReferenceDate: 800_000_000)

    @Test func oneRefreshPerKey_andAFailureQuietsTheKey() {
        var machine = Machine()
        let now = Self.start
        #expect(machine.copyRead(1, age: .seconds(10), refreshAfter: .seconds(80), maxAge: .seconds(100), now: now) == .serve)
        #expect(machine.copyRead(1, age: .seconds(85), refreshAfter: .seconds(80), maxAge: .seconds(100), now: now) == .serveAndRefresh)
        #expect(machine.copyRead(1, age: .seconds(86), refreshAfter: .seconds(80), maxAge: .seconds(100), now: now) == .serve)
        #expect(machine.copyRead(2, age: .seconds(86), refreshAfter: .seconds(80), maxAge: .seconds(100), now: now) == .serveAndRefresh)
        #expect(machine.copyRead(1, age: .seconds(100), refreshAfter: .seconds(80), maxAge: .seconds(100), now: now) == .load)
        machine.refreshEnded(1, succeeded: false, now: now, failSafe: .seconds(30))
        #expect(machine.copyRead(1, age: .seconds(90), refreshAfter: .seconds(80), maxAge: .seconds(100), now: now.addingTimeInterval(29)) == .serve)
        #expect(machine.copyRead(1, age: .seconds(90), refreshAfter: .seconds(80), maxAge: .seconds(100), now: now.addingTimeInterval(30)) == .serveAndRefresh)
    }

    /// Seeds per run: 1,000 by default (CI); `STRATA_INTERLEAVING_SEEDS=20000` for a longer search.
    static let seeds = ProcessInfo.processInfo.environment["STRATA_INTERLEAVING_SEEDS"].flatMap { UInt64($0) } ?? 1_000

    struct Violation: Error, CustomStringConvertible {
        var description: String
    }

    @Test("random interleavings of reads, refresh ends and time keep one refresh per key, the quiet periods and the expiry")
    func randomInterleavings() async throws {
        let refreshAfter = Duration.seconds(80), maxAge = Duration.seconds(100), failSafe = Duration.seconds(30)
        for seed in 0..<Self.seeds {
            await Task.yield()  // between seeds: a long synchronous search would hold a cooperative thread
            var random = SplitMix64(seed: seed)
            var machine = Machine()
            var now = Self.start
            var running: Set<Int> = []
            var failedAt: [Int: Date] = [:]
            for step in 0..<200 {
                func fail(_ what: String) -> Violation { Violation(description: "seed \(seed), step \(step): \(what)") }
                now = now.addingTimeInterval(Double(random.next() % 8))
                let key = Int(random.next() % 3)
                if random.next() % 3 == 0, let ending = running.sorted().randomElement(using: &random) {
                    let succeeded = random.next() % 2 == 0
                    machine.refreshEnded(ending, succeeded: succeeded, now: now, failSafe: failSafe)
                    running.remove(ending)
                    failedAt[ending] = succeeded ? nil : now
                    continue
                }
                let age = Duration.seconds(Int(random.next() % 120))
                let decision = machine.copyRead(key, age: age, refreshAfter: refreshAfter, maxAge: maxAge, now: now)
                if age >= maxAge, decision != .load { throw fail("an expired copy was served") }
                if age < maxAge, decision == .load { throw fail("a fresh copy was loaded anew") }
                if age < refreshAfter, decision == .serveAndRefresh { throw fail("a young copy started a refresh") }
                if decision == .serveAndRefresh {
                    if running.contains(key) { throw fail("a second refresh of \(key)") }
                    if let failed = failedAt[key], now.timeIntervalSince(failed) < failSafe.seconds {
                        throw fail("\(key) refreshed \(now.timeIntervalSince(failed)) s after a failure")
                    }
                    running.insert(key)
                }
                // Progress: a late copy whose key is neither refreshing nor quiet starts a refresh.
                let quiet = failedAt[key].map { now.timeIntervalSince($0) < failSafe.seconds } ?? false
                if age >= refreshAfter, age < maxAge, !running.contains(key), !quiet, decision != .serveAndRefresh {
                    throw fail("a late copy of \(key) started no refresh")
                }
                if machine.refreshing != running { throw fail("the machine's refreshes and the model's disagree") }
            }
        }
    }
}
