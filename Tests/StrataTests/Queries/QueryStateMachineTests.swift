import Foundation
import Testing
@testable @_spi(StrataInternals) import Strata
@testable import StrataOutbox
@testable import StrataQueries
import StrataTesting

@Suite("QueryStateMachine: a live query's decisions, without tasks")
struct QueryStateMachineTests {
    typealias Machine = QueryStateMachine<Int>
    static let start = Date(timeIntervalSince1970: 1_000_000)

    /// A value stored by its tier `age` before `now`.
    static func served(_ value: Int, storedAt: Date, tier: String = "remote") -> Served<Int> {
        Served(value: value, provenance: Provenance(origin: .remote, tier: tier, storedAt: storedAt, age: .zero), events: [])
    }

    var now = start

    func machine(_ policy: QueryPolicy = QueryPolicy(staleAfter: .seconds(60)), online: Bool = true) -> Machine {
        Machine(configuration: policy, online: online)
    }

    @Test func theFirstObserverLoads_andAnAnswerShowsTheValue() {
        var sut = machine()
        #expect(sut.handle(.observerAdded, now: now) == [.publish, .startLoad(flight: 1, reason: .firstObserver), .publish])
        #expect(sut.phase == .fetching(.firstObserver))
        #expect(sut.snapshot(now: now).status == .empty)
        #expect(sut.handle(.loadSucceeded(flight: 1, Self.served(7, storedAt: now)), now: now) == [.publish])
        let snapshot = sut.snapshot(now: now)
        #expect(snapshot.value == 7 && snapshot.status == .value && snapshot.phase == .idle && !snapshot.isStale)
        #expect(snapshot.lastFetchReason == .firstObserver)
    }

    @Test func triggersJoinTheRunningLoad_oneFlightPerQuery() {
        var sut = machine()
        _ = sut.handle(.observerAdded, now: now)
        var starts = 0
        for event in [Machine.Event.observerAdded, .observerAdded, .foreground, .connectivity(online: false), .connectivity(online: true), .intervalElapsed, .refetchRequested] {
            starts += sut.handle(event, now: now).filter { if case .startLoad = $0 { true } else { false } }.count
        }
        #expect(starts == 0)
        #expect(sut.observers == 3)
        #expect(sut.runningFlight == 1)
    }

    @Test func aFreshValue_isNotRefetchedByObserversForegroundOrReconnect() {
        var sut = machine()
        _ = sut.handle(.observerAdded, now: now)
        _ = sut.handle(.loadSucceeded(flight: 1, Self.served(1, storedAt: now)), now: now)
        let later = now.addingTimeInterval(30)
        for event in [Machine.Event.observerAdded, .foreground, .connectivity(online: false), .connectivity(online: true), .intervalElapsed] {
            #expect(!sut.handle(event, now: later).contains { if case .startLoad = $0 { true } else { false } })
        }
        // Past `staleAfter` the next trigger refetches.
        let stale = now.addingTimeInterval(61)
        #expect(sut.handle(.foreground, now: stale).contains(.startLoad(flight: 2, reason: .foreground)))
    }

    @Test func aValueFromAnOldCacheEntry_isStaleAtOnce() {
        var sut = machine()
        _ = sut.handle(.seeded(Self.served(1, storedAt: now.addingTimeInterval(-2 * 86_400), tier: "disk")), now: now)
        #expect(sut.snapshot(now: now).isStale)
        #expect(sut.handle(.observerAdded, now: now).contains(.startLoad(flight: 1, reason: .firstObserver)))
    }

    @Test func theForegroundSignal_isThrottled() {
        var sut = machine(QueryPolicy(staleAfter: .zero, foregroundThrottle: .seconds(30)))
        _ = sut.handle(.observerAdded, now: now)
        _ = sut.handle(.loadSucceeded(flight: 1, Self.served(1, storedAt: now)), now: now)
        #expect(sut.handle(.foreground, now: now.addingTimeInterval(1)).contains(.startLoad(flight: 2, reason: .foreground)))
        _ = sut.handle(.loadSucceeded(flight: 2, Self.served(2, storedAt: now.addingTimeInterval(1))), now: now.addingTimeInterval(1))
        #expect(sut.handle(.foreground, now: now.addingTimeInterval(20)).isEmpty)
        #expect(sut.handle(.foreground, now: now.addingTimeInterval(32)).contains(.startLoad(flight: 3, reason: .foreground)))
    }

    @Test func offline_anOnlineQueryPausesWithoutARequest_andContinuesOnReconnect() {
        var sut = machine(QueryPolicy(networkMode: .online), online: false)
        let actions = sut.handle(.observerAdded, now: now)
        #expect(!actions.contains { if case .startLoad = $0 { true } else { false } })
        #expect(sut.phase == .paused(.offline))
        // The same flight goes on, with the reason it had.
        #expect(sut.handle(.connectivity(online: true), now: now) == [.startLoad(flight: 1, reason: .firstObserver), .publish])
        #expect(sut.phase == .fetching(.firstObserver))
    }

    @Test func offlineFirst_runsTheFirstLoad_thenPausesAFailureAndEveryRefetch() {
        var sut = machine(QueryPolicy(staleAfter: .zero), online: false)
        #expect(sut.handle(.observerAdded, now: now).contains(.startLoad(flight: 1, reason: .firstObserver)))
        _ = sut.handle(.loadFailed(flight: 1, QueryError(URLError(.notConnectedToInternet))), now: now)
        #expect(sut.phase == .paused(.offline))
        #expect(sut.snapshot(now: now).status == .failed)
        #expect(sut.snapshot(now: now).failureCount == 1)
        // Back online, the failed load continues (the same flight) — not a second one.
        #expect(sut.handle(.connectivity(online: true), now: now) == [.startLoad(flight: 1, reason: .firstObserver), .publish])
        _ = sut.handle(.loadSucceeded(flight: 1, Self.served(5, storedAt: now)), now: now)
        // Offline again: a refetch pauses without a request.
        _ = sut.handle(.connectivity(online: false), now: now)
        #expect(sut.handle(.refetchRequested, now: now) == [.publish])
        #expect(sut.phase == .paused(.offline))
    }

    @Test func aFailedRefresh_keepsTheValueAndRecordsTheError() {
        var sut = machine(QueryPolicy(staleAfter: .zero))
        _ = sut.handle(.observerAdded, now: now)
        _ = sut.handle(.loadSucceeded(flight: 1, Self.served(1, storedAt: now)), now: now)
        _ = sut.handle(.refetchRequested, now: now)
        _ = sut.handle(.loadFailed(flight: 2, QueryError(TestError())), now: now)
        let snapshot = sut.snapshot(now: now)
        #expect(snapshot.value == 1 && snapshot.status == .value)
        #expect(snapshot.lastError == QueryError(TestError()))
        #expect(snapshot.failureCount == 1 && snapshot.phase == .idle)
    }

    @Test func retries_backOff_thenRunTheSameFlight() {
        var sut = machine(QueryPolicy(retry: RetryPolicy(maxAttempts: 3, initialDelay: .seconds(2), multiplier: 1, jitter: 0, shouldRetry: { _ in true })))
        _ = sut.handle(.observerAdded, now: now)
        #expect(sut.handle(.loadFailed(flight: 1, QueryError(TestError())), now: now) == [.publish, .scheduleRetry(flight: 1, after: .seconds(2))])
        #expect(sut.phase == .paused(.backingOff))
        #expect(!sut.isSettled)
        #expect(sut.handle(.retryDue(flight: 1), now: now) == [.startLoad(flight: 1, reason: .firstObserver), .publish])
        _ = sut.handle(.loadFailed(flight: 1, QueryError(TestError())), now: now)
        _ = sut.handle(.retryDue(flight: 1), now: now)
        // The third attempt is the last.
        #expect(sut.handle(.loadFailed(flight: 1, QueryError(TestError())), now: now) == [.publish])
        #expect(sut.snapshot(now: now).failureCount == 3)
        #expect(sut.phase == .idle && sut.isSettled)
    }

    @Test func invalidation_restartsARunningLoad_andMarksAnUnobservedQueryStale() {
        var sut = machine(QueryPolicy(staleAfter: .seconds(60)))
        _ = sut.handle(.observerAdded, now: now)
        #expect(sut.handle(.invalidated, now: now) == [.cancelLoad(flight: 1), .startLoad(flight: 2, reason: .invalidated), .publish])
        // The abandoned flight's answer is ignored.
        #expect(sut.handle(.loadSucceeded(flight: 1, Self.served(1, storedAt: now)), now: now).isEmpty)
        _ = sut.handle(.loadSucceeded(flight: 2, Self.served(2, storedAt: now)), now: now)
        #expect(!sut.snapshot(now: now).isStale)

        var unobserved = machine()
        _ = unobserved.handle(.seeded(Self.served(1, storedAt: now)), now: now)
        #expect(!unobserved.snapshot(now: now).isStale)
        #expect(unobserved.handle(.invalidated, now: now) == [.publish])
        #expect(unobserved.snapshot(now: now).isStale)
        #expect(unobserved.handle(.observerAdded, now: now).contains(.startLoad(flight: 1, reason: .firstObserver)))
    }

    @Test func anOlderAnswer_neverReplacesTheValueShown() {
        var sut = machine(QueryPolicy(staleAfter: .zero))
        _ = sut.handle(.seeded(Self.served(2, storedAt: now)), now: now)
        _ = sut.handle(.observerAdded, now: now)
        _ = sut.handle(.loadSucceeded(flight: 1, Self.served(1, storedAt: now.addingTimeInterval(-3600), tier: "stale local")), now: now)
        #expect(sut.snapshot(now: now).value == 2)
        #expect(sut.snapshot(now: now).lastError == nil)
    }

    @Test func theLastObserverLeaving_cancelsItsLoad_andSchedulesTheDrop() {
        var sut = machine(QueryPolicy(dropAfter: .seconds(300)))
        _ = sut.handle(.observerAdded, now: now)
        _ = sut.handle(.observerAdded, now: now)
        #expect(sut.handle(.observerRemoved, now: now) == [.publish])
        #expect(sut.handle(.observerRemoved, now: now) == [.cancelLoad(flight: 1), .publish, .scheduleDrop(after: .seconds(300))])
        #expect(sut.phase == .idle)
        // Published as it goes: the snapshot kept holds no value either.
        #expect(sut.handle(.dropDue, now: now) == [.publish, .drop])
        #expect(sut.isDropped)
    }

    @Test func aQueryNeverObserved_isDroppedToo_andALoadRunningPostponesTheDrop() {
        var sut = machine(QueryPolicy(dropAfter: .seconds(300)))
        #expect(sut.handle(.created, now: now) == [.scheduleDrop(after: .seconds(300))])
        #expect(sut.handle(.refetchRequested, now: now) == [.startLoad(flight: 1, reason: .refetch), .publish])
        // Due while the prefetch runs: not now, and again once it has answered.
        #expect(sut.handle(.dropDue, now: now).isEmpty)
        #expect(sut.handle(.loadSucceeded(flight: 1, Self.served(1, storedAt: now)), now: now) == [.publish, .scheduleDrop(after: .seconds(300))])
        #expect(sut.handle(.dropDue, now: now) == [.publish, .drop])
        #expect(sut.snapshot(now: now).value == nil)
    }

    @Test func aDroppedQueryUsedAgain_wakesWithoutItsValue_andLoads() {
        var sut = machine()
        _ = sut.handle(.seeded(Self.served(1, storedAt: now)), now: now)
        _ = sut.handle(.dropDue, now: now)
        #expect(sut.isDropped)
        #expect(sut.handle(.observerAdded, now: now) == [.revive, .publish, .startLoad(flight: 1, reason: .firstObserver), .publish])
        #expect(!sut.isDropped)
    }

    @Test func invalidatingAnUnobservedQuery_restartsItsRunningPrefetch() {
        var sut = machine()
        _ = sut.handle(.refetchRequested, now: now)
        #expect(sut.handle(.invalidated, now: now) == [.cancelLoad(flight: 1), .startLoad(flight: 2, reason: .invalidated), .publish])
        // The prefetch's answer, from before the invalidation, is ignored.
        #expect(sut.handle(.loadSucceeded(flight: 1, Self.served(1, storedAt: now)), now: now).isEmpty)
        #expect(sut.snapshot(now: now).isStale)
    }

    @Test func aDropDue_afterANewObserverCame_isIgnored() {
        var sut = machine()
        _ = sut.handle(.observerAdded, now: now)
        _ = sut.handle(.observerRemoved, now: now)
        _ = sut.handle(.observerAdded, now: now)
        #expect(sut.handle(.dropDue, now: now).isEmpty)
        #expect(!sut.isDropped)
    }

    @Test func aDisabledQuery_isPausedDisabled_andNeverFetching() {
        var sut = Machine(configuration: QueryPolicy(), enabled: false)
        #expect(sut.handle(.observerAdded, now: now) == [.publish])
        for event in [Machine.Event.foreground, .invalidated, .refetchRequested, .intervalElapsed, .connectivity(online: false), .connectivity(online: true)] {
            _ = sut.handle(event, now: now)
            #expect(sut.phase == .paused(.disabled))
        }
        #expect(sut.handle(.enabled(true), now: now) == [.publish, .startLoad(flight: 1, reason: .firstObserver), .publish])
        #expect(sut.handle(.enabled(false), now: now) == [.cancelLoad(flight: 1), .publish])
        #expect(sut.phase == .paused(.disabled))
    }

    static func write(_ sequence: UInt64) -> OutboxEntry {
        OutboxEntry(
            id: UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, UInt8(sequence))), sequence: sequence,
            scope: "posts", kind: "post", payload: Data(), createdAt: start)
    }

    @Test func aWrite_isShownWhileQueued_goesWhenRefused_andADeliveredOneStaysUntilALaterLoadAnswers() {
        var sut = machine()
        _ = sut.handle(.observerAdded, now: now)
        _ = sut.handle(.loadSucceeded(flight: 1, Self.served(1, storedAt: now)), now: now)
        let (first, second) = (Self.write(1), Self.write(2))
        #expect(sut.handle(.writeQueued(second), now: now) == [.publish])
        #expect(sut.handle(.writeQueued(first), now: now) == [.publish])
        #expect(sut.shownWrites.map(\.sequence) == [1, 2])   // the outbox's order, whatever the report order
        #expect(sut.handle(.writeQueued(first), now: now) == [])   // the same write again: no change

        #expect(sut.handle(.writeRefused(second.id), now: now) == [.publish])
        #expect(sut.shownWrites == [first])

        // Delivered while flight 2 runs: flight 2 was asked before the delivery, so its answer
        // does not clear it; flight 3's does.
        _ = sut.handle(.refetchRequested, now: now)
        #expect(sut.handle(.writeDelivered(first.id), now: now) == [])
        #expect(sut.handle(.writesPending([]), now: now) == [])   // the outbox's list no longer has it
        _ = sut.handle(.loadSucceeded(flight: 2, Self.served(2, storedAt: now)), now: now)
        #expect(sut.shownWrites == [first])
        _ = sut.handle(.invalidated, now: now)
        _ = sut.handle(.loadSucceeded(flight: 3, Self.served(3, storedAt: now)), now: now)
        #expect(sut.shownWrites.isEmpty)
    }

    @Test func aWriteDeliveredWhileTheLoadIsPausedOffline_goesWithTheAnswerOfThatLoadContinued() {
        var sut = machine(QueryPolicy(staleAfter: .seconds(60), networkMode: .online))
        _ = sut.handle(.observerAdded, now: now)
        _ = sut.handle(.loadSucceeded(flight: 1, Self.served(1, storedAt: now)), now: now)
        let write = Self.write(1)
        _ = sut.handle(.writeQueued(write), now: now)
        _ = sut.handle(.connectivity(online: false), now: now)
        _ = sut.handle(.refetchRequested, now: now)
        #expect(sut.phase == .paused(.offline))
        // The outbox got through before the query's network came back; the delivery's
        // invalidation joins the paused load.
        _ = sut.handle(.writeDelivered(write.id), now: now)
        _ = sut.handle(.invalidated, now: now)
        #expect(sut.handle(.connectivity(online: true), now: now).contains(.startLoad(flight: 2, reason: .refetch)))
        _ = sut.handle(.loadSucceeded(flight: 2, Self.served(2, storedAt: now)), now: now)
        #expect(sut.shownWrites.isEmpty, "the continued load started after the delivery: its answer has the write")
        #expect(!sut.isStale(now: now))
    }

    @Test func aNextPage_leavesAnInvalidationStanding() {
        var sut = machine()
        _ = sut.handle(.observerAdded, now: now)
        _ = sut.handle(.loadSucceeded(flight: 1, Self.served(1, storedAt: now)), now: now)
        _ = sut.handle(.observerRemoved, now: now)
        _ = sut.handle(.invalidated, now: now)
        _ = sut.handle(.observerAdded, now: now)   // loads: invalidated
        _ = sut.handle(.loadFailed(flight: 2, QueryError(TestError())), now: now)
        _ = sut.handle(.nextPageRequested, now: now)
        _ = sut.handle(.loadSucceeded(flight: 3, Self.served(2, storedAt: now)), now: now)
        #expect(sut.isStale(now: now), "the first page was never reloaded after the invalidation")
    }

    @Test func aStaleAnswer_neverUndoesADeliveredWriteOrAnInvalidation() {
        var sut = machine()
        _ = sut.handle(.observerAdded, now: now)
        _ = sut.handle(.loadSucceeded(flight: 1, Self.served(1, storedAt: now)), now: now)
        let later = now.addingTimeInterval(5)
        _ = sut.handle(.writeQueued(Self.write(1)), now: later)
        _ = sut.handle(.writeDelivered(Self.write(1).id), now: later)
        _ = sut.handle(.invalidated, now: later)
        // The refetch falls back to the copy stored before the delivery: as old as the value shown.
        _ = sut.handle(.loadSucceeded(flight: 2, Self.served(1, storedAt: now, tier: "stale local")), now: later)
        #expect(sut.shownWrites.map(\.id) == [Self.write(1).id], "the delivered write stays shown")
        #expect(sut.isStale(now: later), "the invalidation stands")
        // An answer rejected as older than the value shown undoes nothing either.
        _ = sut.handle(.refetchRequested, now: later)
        _ = sut.handle(.loadSucceeded(flight: 3, Self.served(0, storedAt: now.addingTimeInterval(-60))), now: later)
        #expect(sut.shownWrites.count == 1 && sut.isInvalidated)
        // The server's copy, stored after both: they go.
        _ = sut.handle(.refetchRequested, now: later)
        _ = sut.handle(.loadSucceeded(flight: 4, Self.served(2, storedAt: later)), now: later)
        #expect(sut.shownWrites.isEmpty && !sut.isInvalidated)
    }

    @Test func aLateAnswer_orRetry_neverWakesADroppedQuery() {
        var sut = machine(QueryPolicy(dropAfter: .seconds(1)))
        _ = sut.handle(.observerAdded, now: now)
        _ = sut.handle(.observerRemoved, now: now)
        _ = sut.handle(.dropDue, now: now)
        #expect(sut.isDropped)
        for event: Machine.Event in [
            .loadSucceeded(flight: 1, Self.served(1, storedAt: now)), .loadFailed(flight: 1, QueryError(TestError())),
            .retryDue(flight: 1), .connectivity(online: false), .reconfigured(QueryPolicy(), enabled: true),
        ] {
            #expect(sut.handle(event, now: now).isEmpty, "\(event)")
            #expect(sut.isDropped && sut.snapshot(now: now).value == nil)
        }
        #expect(!sut.isOnline, "the network's state is kept for when it wakes")
    }

    @Test func aBackoff_isCutShortByRefetchReconnectAndInvalidation() {
        let retry = RetryPolicy(maxAttempts: 5, initialDelay: .seconds(600), jitter: 0, shouldRetry: { _ in true })
        var sut = machine(QueryPolicy(networkMode: .always, retry: retry))
        _ = sut.handle(.observerAdded, now: now)
        _ = sut.handle(.loadFailed(flight: 1, QueryError(TestError())), now: now)
        #expect(sut.phase == .paused(.backingOff))
        #expect(sut.handle(.refetchRequested, now: now) == [.cancelRetry(flight: 1), .startLoad(flight: 2, reason: .refetch), .publish])
        _ = sut.handle(.loadFailed(flight: 2, QueryError(TestError())), now: now)
        _ = sut.handle(.connectivity(online: false), now: now)
        #expect(sut.handle(.connectivity(online: true), now: now) == [.cancelRetry(flight: 2), .startLoad(flight: 2, reason: .refetch), .publish])
        _ = sut.handle(.loadFailed(flight: 2, QueryError(TestError())), now: now)
        #expect(sut.handle(.invalidated, now: now) == [.cancelRetry(flight: 2), .startLoad(flight: 3, reason: .invalidated), .publish])
        // Other triggers wait for the retry.
        _ = sut.handle(.loadFailed(flight: 3, QueryError(TestError())), now: now)
        #expect(sut.handle(.foreground, now: now).isEmpty)
    }

    @Test func offlineFirst_loadsWhileNothingIsShown_evenAfterAnAttempt() {
        var sut = machine(QueryPolicy(networkMode: .offlineFirst), online: false)
        _ = sut.handle(.observerAdded, now: now)
        _ = sut.handle(.loadFailed(flight: 1, QueryError(TestError())), now: now)
        #expect(sut.phase == .paused(.offline))
        _ = sut.handle(.observerRemoved, now: now)
        // Observed again with nothing shown: its local tiers may answer, so it runs.
        #expect(sut.handle(.observerAdded, now: now).contains(.startLoad(flight: 2, reason: .firstObserver)))
        _ = sut.handle(.loadSucceeded(flight: 2, Self.served(1, storedAt: now)), now: now)
        // A refetch of the value shown needs the network: it waits.
        _ = sut.handle(.refetchRequested, now: now)
        #expect(sut.phase == .paused(.offline))
    }

    // MARK: Random interleavings

    /// Seeds per run: 1,000 by default (CI); `STRATA_INTERLEAVING_SEEDS=20000` for a longer search.
    static let seeds = ProcessInfo.processInfo.environment["STRATA_INTERLEAVING_SEEDS"].flatMap { UInt64($0) } ?? 1_000

    @Test("random interleavings of observers, triggers, answers, cancellations and invalidations keep every invariant",
          arguments: [NetworkMode.online, .offlineFirst, .always])
    func randomInterleavings(mode: NetworkMode) async throws {
        for seed in 0..<Self.seeds {
            await Task.yield()  // between seeds: a long synchronous search would hold a cooperative thread
            var world = QueryWorld(seed: seed, mode: mode)
            try world.run(steps: 200)
        }
    }
}

/// One query over time: the machine, the loads it started (answered in any order), timers due, the
/// clock; the invariants are checked after every step.
struct QueryWorld {
    typealias Machine = QueryStateMachine<Int>

    var random: SplitMix64
    let seed: UInt64
    var machine: Machine
    var now = QueryStateMachineTests.start
    /// Flights the query asked to run and has not cancelled.
    var running: Set<Int> = []
    var retriesDue: Set<Int> = []
    var dropScheduled = false
    var nextValue = 0
    /// The time the shown value was stored, as the machine last showed it.
    var shownStoredAt: Date?
    /// The outbox's writes as the query was told of them.
    var writes: [UUID: ModelWrite] = [:]
    var nextWriteSequence: UInt64 = 1
    /// `startLoad` actions so far, and the count when each flight's latest attempt started.
    var starts = 0
    var lastStart: [Int: Int] = [:]
    /// The flight whose answer the last step's machine took, if any.
    var acceptedFlight: Int?
    /// Why each flight started.
    var reasons: [Int: FetchReason] = [:]

    struct ModelWrite {
        var entry: OutboxEntry
        /// `starts` when it was delivered; `nil`: pending.
        var deliveredAfter: Int?
        /// When it was delivered.
        var deliveredAt: Date?
    }
    /// When the invalidation standing came, if one stands: only an accepted answer stored after it
    /// (not a next page's) clears it.
    var invalidatedAt: Date?
    /// When the value the last step's accepted answer carried was stored.
    var acceptedStoredAt: Date?

    init(seed: UInt64, mode: NetworkMode) {
        self.seed = seed
        random = SplitMix64(seed: seed)
        let retry = RetryPolicy(maxAttempts: 3, initialDelay: .seconds(1), jitter: 0, shouldRetry: { _ in true })
        machine = Machine(
            configuration: QueryPolicy(staleAfter: .seconds(10), networkMode: mode, foregroundThrottle: .seconds(5), retry: retry),
            enabled: true, online: true)
    }

    /// Whether the client lists the query, as `Query.send` keeps it: registered when an event
    /// wakes it (before the event runs), unregistered by its `drop` action.
    var registered = true

    /// What each value set could be restored to (as `Query.setValue` returns it).
    var restorePoints: [QueryRestorePoint<Int>] = []
    /// The value stamp before the last step, and the fetches waiting before it.
    var stampBefore: UInt64 = 0
    var fetchersBefore = 0
    var staleBefore = false
    /// Whether the step's restore point could be restored before it ran.
    var restorable = false

    mutating func run(steps: Int) throws {
        for step in 0..<steps {
            let event = nextEvent()
            let wasRunning = machine.runningFlight
            if machine.isDropped, Machine.wakes(event) { registered = true }
            stampBefore = machine.valueStamp
            fetchersBefore = machine.fetchers
            staleBefore = machine.isStale(now: now)
            var point = machine.restorePoint()
            restorable = { if case .restored(let p) = event { machine.canRestore(p) } else { false } }()
            let actions = machine.handle(event, now: now)
            if case .valueSet = event {
                point.stamp = machine.valueStamp
                restorePoints.append(point)
            }
            try apply(actions, event: event, wasRunning: wasRunning, step: step)
            try checkInvariants(step: step, event: event)
            try checkDayTwo(step: step, event: event, actions: actions)
        }
    }

    /// The promises of per-observer `enabled`, fetches, values set by code and their restores, and
    /// the interval.
    mutating func checkDayTwo(step: Int, event: Machine.Event, actions: [Machine.Action]) throws {
        let seed = seed
        func fail(_ what: String) -> QueryInvariantViolation { QueryInvariantViolation(seed: seed, step: step, what: "\(what) after \(event)") }
        let starts = actions.contains { if case .startLoad = $0 { true } else { false } }
        let cancels = actions.contains { if case .cancelLoad = $0 { true } else { false } }
        if machine.disabledObservers > machine.observers || machine.disabledObservers < 0 { throw fail("disabled observers out of range") }
        switch event {
        case .disabledObserverAdded, .disabledObserverRemoved, .observerEnabled(false):
            if starts { throw fail("an observer that wants no load started one") }
        case .observerRemoved where fetchersBefore > 0:
            if cancels { throw fail("a load a fetch waits for was abandoned as its observers left") }
        case .valueSet(let served):
            guard !machine.isDropped, machine.shown?.value == served.value, machine.shown?.provenance.isSetLocally == true else {
                throw fail("the value set is not shown as set")
            }
            if machine.runningFlight != nil { throw fail("a load asked for before the value was set still runs") }
        case .restored(let point):
            if restorable {
                if machine.shown?.value != point.value || machine.storedAt != point.storedAt { throw fail("a restore did not put back what was held") }
            } else if machine.valueStamp != stampBefore {
                throw fail("a restore changed a value set or loaded after its set")
            }
        case .intervalElapsed:
            if starts, !machine.isInForeground { throw fail("an interval tick loaded in the background") }
            if starts, !staleBefore, !machine.configuration.refetchIntervalWhenFresh { throw fail("an interval tick loaded a fresh value") }
        default:
            break
        }
    }

    mutating func nextEvent() -> Machine.Event {
        now = now.addingTimeInterval(Double(random.next() % 4))
        let roll = random.next() % 33
        switch roll {
        case 23: return .disabledObserverAdded
        case 24: return .disabledObserverRemoved
        case 25: return .observerEnabled(random.next() % 2 == 0)
        case 26: return .fetchStarted(force: random.next() % 2 == 0)
        case 27 where machine.fetchers > 0: return .fetchEnded
        case 28: return .prefetchRequested
        case 29:
            nextValue += 1
            return .valueSet(Served(value: nextValue, provenance: .setLocally, events: []))
        case 30 where !restorePoints.isEmpty:
            return .restored(restorePoints.randomElement(using: &random)!)
        case 31: return .previousPageRequested
        case 32: return random.next() % 2 == 0 ? .background : .foreground
        case 22:
            // A newer caller's options.
            let retry = RetryPolicy(maxAttempts: 3, initialDelay: .seconds(1), jitter: 0, shouldRetry: { _ in true })
            let policy = QueryPolicy(
                staleAfter: .seconds(Int64(random.next() % 20)), networkMode: machine.configuration.networkMode,
                foregroundThrottle: .seconds(5), refetchIntervalWhenFresh: random.next() % 2 == 0, retry: retry)
            return .reconfigured(policy, enabled: random.next() % 4 != 0)
        case 16:
            let entry = OutboxEntry(
                id: UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, UInt8(nextWriteSequence % 256))),
                sequence: nextWriteSequence, scope: "s", kind: "k", payload: Data(), createdAt: now)
            nextWriteSequence += 1
            return .writeQueued(entry)
        case 17 where writes.values.contains { $0.deliveredAfter == nil }:
            return .writeDelivered(pendingWrite())
        case 18 where writes.values.contains { $0.deliveredAfter == nil }:
            return .writeRefused(pendingWrite())
        case 20:
            return .nextPageRequested
        case 21:
            return .staleDue
        case 19:
            return .writesPending(writes.values.filter { $0.deliveredAfter == nil }.map(\.entry).sorted { $0.sequence < $1.sequence })
        case 0: return .observerAdded
        case 1: return .observerRemoved
        case 2: return .foreground
        case 3: return .intervalElapsed
        case 4: return .invalidated
        case 5: return .refetchRequested
        case 6: return .connectivity(online: random.next() % 2 == 0)
        case 7: return .enabled(random.next() % 4 != 0)
        case 8: return .seeded(served(storedAt: now.addingTimeInterval(-Double(random.next() % 30))))
        case 9 where dropScheduled: return .dropDue
        case 10 where !retriesDue.isEmpty: return .retryDue(flight: retriesDue.sorted().randomElement(using: &random)!)
        default:
            // An answer from a flight, possibly one the machine abandoned (its answer comes anyway).
            // Sorted: a Set's order changes with the process's hash seed, and a seed must replay.
            guard let flight = running.sorted().randomElement(using: &random) ?? (random.next() % 3 == 0 ? Int(random.next() % 5) : nil) else {
                return .observerAdded
            }
            if random.next() % 3 == 0 { return .loadFailed(flight: flight, QueryError(TestError())) }
            return .loadSucceeded(flight: flight, served(storedAt: now.addingTimeInterval(-Double(random.next() % 20))))
        }
    }

    /// A write waiting for delivery, chosen by the seed.
    mutating func pendingWrite() -> UUID {
        writes.values.filter { $0.deliveredAfter == nil }.map(\.entry).sorted { $0.sequence < $1.sequence }
            .randomElement(using: &random)!.id
    }

    mutating func served(storedAt: Date) -> Served<Int> {
        nextValue += 1
        return Served(value: nextValue, provenance: Provenance(origin: .remote, tier: "t", storedAt: storedAt), events: [])
    }

    /// Whether the last step's actions started a load (checked after an invalidation).
    var actionsStartedAfterInvalidation = false

    mutating func apply(_ actions: [Machine.Action], event: Machine.Event, wasRunning: Int?, step: Int) throws {
        var cancelled: Set<Int> = []
        actionsStartedAfterInvalidation = actions.contains { if case .startLoad = $0 { true } else { false } }
        acceptedFlight = nil
        acceptedStoredAt = nil
        if case .loadSucceeded(let flight, let served) = event, wasRunning == flight {
            // Taken, unless older than the value shown (then it undoes nothing).
            let storedAt = served.provenance.storedAt!
            if shownStoredAt.map({ storedAt >= $0 }) ?? true {
                acceptedFlight = flight
                acceptedStoredAt = storedAt
                if !(reasons[flight]?.isPage ?? false), let invalidated = invalidatedAt, storedAt >= invalidated { invalidatedAt = nil }
            }
        }
        switch event {
        case .loadSucceeded(let flight, _), .loadFailed(let flight, _):
            running.remove(flight)
        case .retryDue(let flight):
            retriesDue.remove(flight)
        case .dropDue:
            dropScheduled = false
        case .writeQueued(let entry):
            writes[entry.id] = ModelWrite(entry: entry)
        case .writeDelivered(let id):
            writes[id]?.deliveredAfter = starts
            writes[id]?.deliveredAt = now
        case .invalidated:
            invalidatedAt = now
        case .restored(let point) where restorable:
            // Put back: the value may be older than the one set, and an invalidation it held stands again.
            shownStoredAt = point.storedAt
            if invalidatedAt == nil, let held = point.invalidatedAt { invalidatedAt = held }
        case .writeRefused(let id):
            writes[id] = nil
        default:
            break
        }
        for action in actions {
            switch action {
            case .startLoad(let flight, let reason):
                // One flight per query: a start while another runs needs that one cancelled first.
                if let other = machine.runningFlight, other != flight {
                    throw QueryInvariantViolation(seed: seed, step: step, what: "started \(flight) while \(other) runs")
                }
                if let wasRunning, wasRunning != flight, !cancelled.contains(wasRunning), running.contains(wasRunning) {
                    throw QueryInvariantViolation(seed: seed, step: step, what: "started \(flight) while \(wasRunning) ran, without cancelling it")
                }
                running.insert(flight)
                starts += 1
                lastStart[flight] = starts
                reasons[flight] = reason
            case .cancelLoad(let flight):
                cancelled.insert(flight)
                running.remove(flight)
            case .scheduleRetry(let flight, _):
                retriesDue.insert(flight)
            case .cancelRetry(let flight):
                retriesDue.remove(flight)
            case .scheduleDrop:
                dropScheduled = true
            case .drop:
                dropScheduled = false
                registered = false
                // Its value is released: what it shows when woken starts afresh, and the client
                // tells it the writes waiting then; delivered ones it keeps.
                shownStoredAt = nil
                writes = writes.filter { $0.value.deliveredAfter != nil }
            case .publish, .revive:
                break
            }
        }
    }

    mutating func checkInvariants(step: Int, event: Machine.Event) throws {
        func fail(_ what: String) -> QueryInvariantViolation { QueryInvariantViolation(seed: seed, step: step, what: "\(what) after \(event)") }
        let snapshot = machine.snapshot(now: now)
        if case .fetching = snapshot.phase {
            guard let flight = machine.runningFlight, running.contains(flight) else { throw fail("fetching without a running load") }
            guard machine.isEnabled else { throw fail("fetching while disabled") }
        }
        if !machine.isEnabled, snapshot.phase != .paused(.disabled) { throw fail("disabled but \(snapshot.phase)") }
        if machine.runningFlight != nil, !snapshot.isFetching { throw fail("a load runs but the phase says \(snapshot.phase)") }
        if machine.runningFlight.map({ running.contains($0) }) == false { throw fail("the running flight was never started") }
        if let storedAt = snapshot.storedAt {
            if let shownStoredAt, storedAt < shownStoredAt { throw fail("an older value replaced a newer one") }
            shownStoredAt = storedAt
        }
        if snapshot.status == .value, snapshot.value == nil { throw fail("status value without a value") }
        if machine.observers == 0, machine.fetchers == 0, machine.flight == nil, !machine.isDropped, !machine.isDropScheduled {
            throw fail("an unobserved idle query without a drop scheduled")
        }
        if machine.isDropped, snapshot.value != nil { throw fail("a dropped query keeps its value") }
        // The client invariant: every awake query is in its client's list, no dropped one is.
        if registered == machine.isDropped { throw fail(registered ? "a dropped query is still registered" : "an awake query is not registered") }
        if case .invalidated = event, machine.runningFlight != nil, !actionsStartedAfterInvalidation {
            throw fail("an invalidated query kept a load that started before the invalidation")
        }
        if machine.observers < 0 { throw fail("negative observers") }
        // An invalidation stands until an accepted answer stored after it: a stale answer (older
        // than the value shown, or a stale tier's copy from before it) leaves it standing.
        if machine.isInvalidated != (invalidatedAt != nil) {
            throw fail(machine.isInvalidated ? "an invalidation stands that an answer should have cleared" : "a stale answer cleared an invalidation")
        }
        if machine.isDropped, !machine.shownWrites.allSatisfy({ writes[$0.id]?.deliveredAfter != nil }) {
            throw fail("a dropped query holds a pending write")
        }
        // A next page never absorbs another trigger, running or waiting.
        switch event {
        case .invalidated where machine.activeObservers > 0 || machine.fetchers > 0, .refetchRequested:
            if machine.isEnabled, machine.flight?.reason.isPage == true { throw fail("a page absorbed the trigger") }
        default:
            break
        }
        try checkWrites(step: step, event: event)
    }

    /// A write is shown from when it is queued until it is refused, or until a load that started
    /// after its delivery answers; never in any other order than the outbox's.
    mutating func checkWrites(step: Int, event: Machine.Event) throws {
        let seed = seed
        func fail(_ what: String) -> QueryInvariantViolation { QueryInvariantViolation(seed: seed, step: step, what: "\(what) after \(event)") }
        let shown = machine.shownWrites
        if shown.map(\.sequence) != shown.map(\.sequence).sorted() { throw fail("writes shown out of order") }
        let shownIDs = Set(shown.map(\.id))
        for id in shownIDs where writes[id] == nil { throw fail("a refused or unknown write is shown") }
        let known = writes
        for (id, write) in known where !shownIDs.contains(id) {
            guard let deliveredAfter = write.deliveredAfter else { throw fail("a pending write is not shown") }
            // It may go only with the accepted answer of a load started after its delivery, stored
            // after it, and not a next page's (it reloads none of the pages the write is shown on).
            guard case .loadSucceeded(let flight, _) = event, acceptedFlight == flight, let started = lastStart[flight], started > deliveredAfter,
                  let storedAt = acceptedStoredAt, let deliveredAt = write.deliveredAt, storedAt >= deliveredAt else {
                throw fail("a delivered write left before a load started after its delivery answered with a copy stored after it")
            }
            if reasons[flight]?.isPage == true { throw fail("a page's answer took a delivered write away") }
            writes[id] = nil
        }
        // And it does go then: an answer to an attempt started after the delivery takes it away.
        if let flight = acceptedFlight, reasons[flight]?.isPage != true, let started = lastStart[flight], let storedAt = acceptedStoredAt {
            for (id, write) in writes where (write.deliveredAfter.map { $0 < started } ?? false) && (write.deliveredAt.map { storedAt >= $0 } ?? false)
                && shownIDs.contains(id) {
                throw fail("a delivered write outlived the answer of a load started after its delivery")
            }
        }
    }
}

struct QueryInvariantViolation: Error, CustomStringConvertible {
    var seed: UInt64
    var step: Int
    var what: String
    var description: String { "seed \(seed), step \(step): \(what)" }
}

/// The machine's day-two decisions, one at a time: per-observer `enabled`, fetches, values set by
/// code and their restores, intervals in the background, previous pages, structural sharing.
@Suite("QueryStateMachine: select, fetch, setValue, intervals, pages both ways")
struct QueryStateMachineDayTwoTests {
    typealias Machine = QueryStateMachine<Int>
    let now = QueryStateMachineTests.start

    func starts(_ actions: [Machine.Action]) -> Int {
        actions.filter { if case .startLoad = $0 { true } else { false } }.count
    }

    @Test func aDisabledObserverSeesSnapshots_butStartsNoLoad_untilEnabled() {
        var sut = Machine(configuration: QueryPolicy(staleAfter: .seconds(60)))
        let added = sut.handle(.disabledObserverAdded, now: now)
        #expect(starts(added) == 0)
        #expect(added.contains(.publish))
        #expect(sut.snapshot(now: now).phase == .idle)
        #expect(starts(sut.handle(.foreground, now: now)) == 0)
        #expect(starts(sut.handle(.observerEnabled(true), now: now)) == 1)
        // Disabled again: its load is abandoned (nobody else wants it).
        #expect(sut.handle(.observerEnabled(false), now: now).contains(.cancelLoad(flight: 1)))
    }

    @Test func aFetch_keepsItsLoadWhenTheObserversLeave_andAFreshValueNeedsNoLoad() {
        var sut = Machine(configuration: QueryPolicy(staleAfter: .seconds(60)))
        _ = sut.handle(.observerAdded, now: now)
        #expect(sut.runningFlight == 1)
        _ = sut.handle(.fetchStarted(force: false), now: now)  // joins
        #expect(!sut.handle(.observerRemoved, now: now).contains(.cancelLoad(flight: 1)))
        _ = sut.handle(.loadSucceeded(flight: 1, QueryStateMachineTests.served(1, storedAt: now)), now: now)
        _ = sut.handle(.fetchEnded, now: now)
        // Fresh: ensureValue loads nothing; fetch (forced) does.
        #expect(starts(sut.handle(.fetchStarted(force: false), now: now)) == 0)
        _ = sut.handle(.fetchEnded, now: now)
        #expect(starts(sut.handle(.fetchStarted(force: true), now: now)) == 1)
    }

    @Test func aPrefetch_loadsOnlyAStaleValue() {
        var sut = Machine(configuration: QueryPolicy(staleAfter: .seconds(60)))
        #expect(starts(sut.handle(.prefetchRequested, now: now)) == 1)
        _ = sut.handle(.loadSucceeded(flight: 1, QueryStateMachineTests.served(1, storedAt: now)), now: now)
        #expect(starts(sut.handle(.prefetchRequested, now: now)) == 0)
        #expect(starts(sut.handle(.prefetchRequested, now: now.addingTimeInterval(61))) == 1)
    }

    @Test func aValueSet_isShownAsSetLocally_abandonsTheLoadRunning_andAnInvalidationStands() {
        var sut = Machine(configuration: QueryPolicy(staleAfter: .seconds(60)))
        _ = sut.handle(.observerAdded, now: now)
        _ = sut.handle(.loadSucceeded(flight: 1, QueryStateMachineTests.served(1, storedAt: now)), now: now)
        _ = sut.handle(.invalidated, now: now)
        #expect(sut.runningFlight == 2)
        var point = sut.restorePoint()
        let actions = sut.handle(.valueSet(Served(value: 7, provenance: .setLocally, events: [])), now: now.addingTimeInterval(1))
        point.stamp = sut.valueStamp
        #expect(actions.contains(.cancelLoad(flight: 2)))
        let snapshot = sut.snapshot(now: now.addingTimeInterval(1))
        #expect(snapshot.value == 7)
        #expect(snapshot.provenance?.isSetLocally == true)
        #expect(snapshot.storedAt == now.addingTimeInterval(1))
        #expect(snapshot.isStale)  // the invalidation stands: only the source's answer clears it
        // The late answer of the abandoned load is ignored.
        _ = sut.handle(.loadSucceeded(flight: 2, QueryStateMachineTests.served(9, storedAt: now.addingTimeInterval(2))), now: now.addingTimeInterval(2))
        #expect(sut.snapshot(now: now).value == 7)
        // Rolled back: exactly what it held.
        _ = sut.handle(.restored(point), now: now.addingTimeInterval(3))
        #expect(sut.snapshot(now: now).value == 1)
        #expect(sut.snapshot(now: now).provenance?.tier == "remote")
        #expect(sut.storedAt == now)
    }

    @Test func aRestore_neverUndoesANewerValue() {
        var sut = Machine(configuration: QueryPolicy(staleAfter: .seconds(60)))
        _ = sut.handle(.observerAdded, now: now)
        _ = sut.handle(.loadSucceeded(flight: 1, QueryStateMachineTests.served(1, storedAt: now)), now: now)
        var point = sut.restorePoint()
        _ = sut.handle(.valueSet(Served(value: 7, provenance: .setLocally, events: [])), now: now)
        point.stamp = sut.valueStamp
        _ = sut.handle(.refetchRequested, now: now)
        _ = sut.handle(.loadSucceeded(flight: 2, QueryStateMachineTests.served(8, storedAt: now.addingTimeInterval(5))), now: now.addingTimeInterval(5))
        #expect(sut.handle(.restored(point), now: now.addingTimeInterval(6)).isEmpty)
        #expect(sut.snapshot(now: now).value == 8)
    }

    @Test func valuesSetOneOnAnother_comeOffWhole_whenRestoredInReverse_andTheFirstAloneIsRefused() {
        var sut = Machine(configuration: QueryPolicy(staleAfter: .seconds(60)))
        _ = sut.handle(.observerAdded, now: now)
        _ = sut.handle(.loadSucceeded(flight: 1, QueryStateMachineTests.served(1, storedAt: now)), now: now)
        func set(_ value: Int) -> QueryRestorePoint<Int> {
            var point = sut.restorePoint()
            _ = sut.handle(.valueSet(Served(value: value, provenance: .setLocally, events: [])), now: now)
            point.stamp = sut.valueStamp
            return point
        }
        let first = set(2)
        let second = set(3)
        // Forward: the first sits under the second, so it cannot come off first.
        #expect(!sut.canRestore(first))
        _ = sut.handle(.restored(second), now: now)
        #expect(sut.snapshot(now: now).value == 2)
        #expect(sut.canRestore(first))
        _ = sut.handle(.restored(first), now: now)
        #expect(sut.snapshot(now: now).value == 1)
        #expect(!sut.canRestore(second) && !sut.canRestore(first), "a point restores once")
    }

    @Test func aRestoredStaleValue_isLoadedAgain_whenObserved() {
        var sut = Machine(configuration: QueryPolicy(staleAfter: .seconds(60)))
        _ = sut.handle(.observerAdded, now: now)
        _ = sut.handle(.loadSucceeded(flight: 1, QueryStateMachineTests.served(1, storedAt: now.addingTimeInterval(-120))), now: now)
        _ = sut.handle(.refetchRequested, now: now)
        var point = sut.restorePoint()
        #expect(sut.handle(.valueSet(Served(value: 7, provenance: .setLocally, events: [])), now: now).contains(.cancelLoad(flight: 2)))
        point.stamp = sut.valueStamp
        let restored = sut.handle(.restored(point), now: now)
        #expect(restored.contains { if case .startLoad = $0 { true } else { false } }, "the abandoned load is asked for again")
    }

    @Test func disablingTheLastObserver_publishesTheAbandonedLoad() {
        var sut = Machine(configuration: QueryPolicy(staleAfter: .seconds(60)))
        _ = sut.handle(.observerAdded, now: now)
        let actions = sut.handle(.observerEnabled(false), now: now)
        #expect(actions.contains(.cancelLoad(flight: 1)) && actions.contains(.publish))
        #expect(sut.snapshot(now: now).phase == .idle)
    }

    @Test func anIntervalTick_neverCutsAPageShort() {
        var sut = Machine(configuration: QueryPolicy(staleAfter: .seconds(600), refetchInterval: .seconds(2), refetchIntervalWhenFresh: true))
        _ = sut.handle(.observerAdded, now: now)
        _ = sut.handle(.loadSucceeded(flight: 1, QueryStateMachineTests.served(1, storedAt: now)), now: now)
        _ = sut.handle(.nextPageRequested, now: now)
        #expect(sut.handle(.intervalElapsed, now: now.addingTimeInterval(2)).isEmpty)
        #expect(sut.runningFlight == 2)
    }

    @Test func theInterval_firesWhateverTheStalenessWhenAskedTo_andPausesInTheBackground() {
        var sut = Machine(configuration: QueryPolicy(staleAfter: .seconds(600), refetchInterval: .seconds(10), refetchIntervalWhenFresh: true))
        _ = sut.handle(.observerAdded, now: now)
        _ = sut.handle(.loadSucceeded(flight: 1, QueryStateMachineTests.served(1, storedAt: now)), now: now)
        #expect(starts(sut.handle(.intervalElapsed, now: now.addingTimeInterval(10))) == 1)
        _ = sut.handle(.loadSucceeded(flight: 2, QueryStateMachineTests.served(2, storedAt: now.addingTimeInterval(10))), now: now.addingTimeInterval(10))
        _ = sut.handle(.background, now: now.addingTimeInterval(11))
        #expect(starts(sut.handle(.intervalElapsed, now: now.addingTimeInterval(20))) == 0)
        _ = sut.handle(.foreground, now: now.addingTimeInterval(21))
        #expect(starts(sut.handle(.intervalElapsed, now: now.addingTimeInterval(30))) == 1)
        // Without the opt-in, a fresh value is not refetched by a tick.
        var plain = Machine(configuration: QueryPolicy(staleAfter: .seconds(600), refetchInterval: .seconds(10)))
        _ = plain.handle(.observerAdded, now: now)
        _ = plain.handle(.loadSucceeded(flight: 1, QueryStateMachineTests.served(1, storedAt: now)), now: now)
        #expect(starts(plain.handle(.intervalElapsed, now: now.addingTimeInterval(10))) == 0)
    }

    @Test func aPreviousPage_isOneLoadAtATime_andGivesWayToARefetch() {
        var sut = Machine(configuration: QueryPolicy(staleAfter: .seconds(60)))
        _ = sut.handle(.observerAdded, now: now)
        _ = sut.handle(.loadSucceeded(flight: 1, QueryStateMachineTests.served(1, storedAt: now)), now: now)
        #expect(sut.handle(.previousPageRequested, now: now).contains(.startLoad(flight: 2, reason: .previousPage)))
        #expect(starts(sut.handle(.nextPageRequested, now: now)) == 0)
        let refetch = sut.handle(.refetchRequested, now: now)
        #expect(refetch.contains(.cancelLoad(flight: 2)))
        #expect(refetch.contains(.startLoad(flight: 3, reason: .refetch)))
    }

    @Test func anEqualAnswer_keepsTheValueShown() {
        final class Box: Sendable, Equatable {
            let number: Int
            init(_ number: Int) { self.number = number }
            static func == (lhs: Box, rhs: Box) -> Bool { lhs.number == rhs.number }
        }
        var sut = QueryStateMachine<Box>(configuration: QueryPolicy())
        let first = Box(1)
        _ = sut.handle(.observerAdded, now: now)
        _ = sut.handle(.loadSucceeded(flight: 1, Served(value: first, provenance: Provenance(origin: .remote, tier: "t", storedAt: now), events: [])), now: now)
        _ = sut.handle(.refetchRequested, now: now)
        _ = sut.handle(.loadSucceeded(flight: 2, Served(value: Box(1), provenance: Provenance(origin: .remote, tier: "t", storedAt: now.addingTimeInterval(1)), events: [])), now: now.addingTimeInterval(1))
        #expect(sut.snapshot(now: now).value === first)
        #expect(sut.snapshot(now: now).storedAt == now.addingTimeInterval(1))
    }
}

@Suite("MutationStateMachine: the state follows the latest call")
struct MutationStateMachineTests {
    typealias Machine = MutationStateMachine<Int, String>
    let now = QueryStateMachineTests.start

    @Test func aCallRuns_thenSucceedsOrFails_andResetForgetsIt() {
        var sut = Machine()
        #expect(sut.snapshot.status == .idle)
        sut.handle(.started(call: 1, 10, at: now))
        #expect(sut.snapshot.isPending && sut.snapshot.variables == 10)
        sut.handle(.failed(call: 1, QueryError(TestError())))
        #expect(sut.snapshot.status == .failed && sut.snapshot.failureCount == 1)
        sut.handle(.started(call: 2, 11, at: now))
        sut.handle(.succeeded(call: 2, "ok"))
        #expect(sut.snapshot.status == .succeeded && sut.snapshot.data == "ok" && sut.snapshot.error == nil)
        let changed = sut.handle(.reset)
        #expect(changed)
        #expect(sut.snapshot.status == .idle && sut.snapshot.variables == nil)
    }

    @Test func anOlderCallsOutcome_orOneFromBeforeAReset_isNotShown() {
        var sut = Machine()
        sut.handle(.started(call: 1, 1, at: now))
        sut.handle(.started(call: 2, 2, at: now))
        let old = sut.handle(.succeeded(call: 1, "old"))
        #expect(!old)
        #expect(sut.snapshot.isPending && sut.snapshot.variables == 2)
        sut.handle(.reset)
        let beforeReset = sut.handle(.failed(call: 2, QueryError(TestError())))
        #expect(!beforeReset)
        #expect(sut.snapshot.status == .idle)
    }

    @Test("random interleavings of calls, outcomes and resets keep every invariant")
    func randomInterleavings() async {
        for seed in 0..<QueryStateMachineTests.seeds {
            await Task.yield()
            var random = SplitMix64(seed: seed)
            var sut = Machine()
            var calls: UInt64 = 0
            var running: [UInt64] = []
            var latest: UInt64?  // the call the state should show
            var ended: Set<UInt64> = []
            for step in 0..<100 {
                let roll = random.next() % 5
                var event: Machine.Event
                if roll == 0 || running.isEmpty {
                    calls += 1
                    running.append(calls)
                    latest = calls
                    event = .started(call: calls, Int(calls), at: now)
                } else if roll == 4 {
                    latest = nil
                    event = .reset
                } else {
                    let call = running.remove(at: Int(random.next() % UInt64(running.count)))
                    ended.insert(call)
                    event = switch roll {
                    case 1: .succeeded(call: call, "\(call)")
                    case 2: .failed(call: call, QueryError(TestError()))
                    default: .queued(call: call, QueryStateMachineTests.write(UInt64(call)))
                    }
                }
                sut.handle(event)
                let snapshot = sut.snapshot
                let where_ = "seed \(seed), step \(step), \(event)"
                #expect(sut.shownCall == latest, "\(where_)")
                if let latest {
                    #expect(snapshot.variables == Int(latest), "\(where_)")
                    #expect(snapshot.isPending == !ended.contains(latest), "\(where_)")
                    if case .succeeded = snapshot.status { #expect(snapshot.data == "\(latest)", "\(where_)") }
                } else {
                    #expect(snapshot.status == .idle, "\(where_)")
                }
                if snapshot.status != .failed { #expect(snapshot.error == nil, "\(where_)") }
            }
        }
    }
}
