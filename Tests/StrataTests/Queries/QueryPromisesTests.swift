import Foundation
import Observation
import Testing
@testable @_spi(StrataInternals) import Strata
@testable import StrataQueries
import StrataTesting

/// The promises of live queries that a hostile schedule, a dropped network or a second caller used
/// to break: a query never detaches from its client, offline shows what is on disk, a drop lets its
/// value go, the newest caller's options hold, keys are identities, a backoff gives way to whoever
/// asks, a cancelled load waits for nothing. Real files where a store is on disk; time is a manual
/// clock.
@Suite("Live queries keep every promise", .timeLimit(.minutes(1)))
struct QueryPromisesTests {
    let clock = ManualClock()

    func client(online: Bool = true) -> QueryClient {
        QueryClient(environment: clock.environment(), online: online)
    }

    /// Observes `query` from a task until it is cancelled; returns once the query counts it.
    func observe<Value>(_ query: Query<Value>, count: Int = 1) async throws -> Task<Void, Never> {
        let task = Task { for await _ in query.snapshots() {} }
        try await query.waitForObservers(count)
        return task
    }

    /// Its last observer leaves `query`, and its drop (due `dropAfter` later) happens: the client
    /// holds no query after.
    func leaveAndDrop<Value>(_ query: Query<Value>, observer: Task<Void, Never>, in queries: QueryClient, dropAfter: Duration = .seconds(1)) async throws {
        observer.cancel()
        try await query.waitForObservers(0)
        // The drop's timer (a fresh value's stale timer may be another sleeper).
        try await clock.waitForSleepers(matching: { $0.since.duration(to: $0.deadline) == dropAfter })
        clock.advance(by: dropAfter)
        try await queries.waitForQueries(0)
    }

    /// Whether the client lists `query` under its key (the object itself).
    func isRegistered<Value>(_ query: Query<Value>, in queries: QueryClient) -> Bool {
        queries.query(described: query.key.description) === query
    }

    // MARK: Observers leaving while the query publishes

    @Test("an observer's task cancelled while the query publishes to it: neither waits for the other, 1,000 times")
    func anObserverCancelledWhilePublishedTo_neverDeadlocks() async throws {
        // The publisher and the canceller are threads (`raceOnThreads`). (A publish yielded under the query's lock; the reader's cancellation, holding the
        // runtime's lock of its task, removed the observer under the query's lock: found by the
        // web demo's fuzz target.)
        let queries = client()
        let query = queries.query(["race"], policy: QueryPolicy(staleAfter: .seconds(3600)), chain: ClosureLoader { itemA })
        let first = try await observe(query)
        try await query.settled()
        first.cancel()
        try await query.waitForObservers(0)
        let rounds = 1_000
        let finished = Locked(0)
        try await withWaitTimeout(.seconds(50), {
            for _ in 0..<rounds {
                let reader = Task { for await _ in query.snapshots() {} }
                try await query.waitForObservers(1)
                await raceOnThreads({ for index in 0..<8 { query.setEnabled(index % 2 == 1) } }, { reader.cancel() })
                // Out of time (the bound cancelled this): the threads may be stuck, do not wait for them.
                try Task.checkCancellation()
                await reader.value
                try await query.waitForObservers(0)
                finished.withLock { $0 += 1 }
            }
        }, timedOut: { timeout in
            WaitTimeoutError(awaited: "\(rounds) rounds of publishing while an observer is cancelled", observed: "\(finished.withLock { $0 }) finished", timeout: timeout)
        })
        #expect(finished.withLock { $0 } == rounds)
        #expect(query.current.value == itemA)
    }

    struct SeenVersions: Sendable {
        var versions: [UInt64] = []
        var waiters = ConditionWaiters<UInt64>()
    }

    @Test("publishes sent from two threads at once reach an observer in version order, and the last is the query's latest")
    func publishesFromTwoThreads_reachAnObserverInOrder() async throws {
        // Publishes are handed over after the query's lock, by one thread at a time: were two to
        // hand over at once, an observer could see an older version after a newer one.
        let queries = client()
        let query = queries.query(["order"], policy: QueryPolicy(staleAfter: .seconds(3600)), chain: ClosureLoader { itemA })
        let seen = Locked(SeenVersions())
        let id = query.observe { published in
            seen.withLock { seen in
                seen.versions.append(published.version)
                seen.waiters.resumeSatisfied(by: published.version)
            }
        }
        defer { query.removeObserver(id) }
        try await query.settled()
        for _ in 0..<1_000 {
            await raceOnThreads(
                { for index in 0..<6 { query.setEnabled(index % 2 == 1) } },
                { for index in 0..<6 { query.setEnabled(index % 2 == 0) } })
        }
        query.setEnabled(true)
        let latest = query.latest.version
        try await withWaitTimeout(.seconds(20), {
            try await seen.wait(in: \.waiters, current: { $0.versions.last ?? 0 }, until: { $0 >= latest })
        }, timedOut: { timeout in
            WaitTimeoutError(awaited: "version \(latest)", observed: "\(seen.withLock { $0.versions.last ?? 0 })", timeout: timeout)
        })
        let versions = seen.withLock { $0.versions }
        #expect(versions.count > 1_000, "the races published: \(versions.count) versions")
        #expect(zip(versions, versions.dropFirst()).allSatisfy { $0 < $1 }, "versions out of order")
        #expect(versions.last == latest)
    }

    // MARK: The client invariant

    @Test("a query dropped and used again is registered again, and hears the network coming back")
    func aRevivedQuery_isRegistered_andHearsSignals() async throws {
        let queries = client()
        let remote = LoaderSpy<Void, Item>(.success(itemA), .success(itemB), .success(itemB))
        let query = queries.query(["feed"], policy: QueryPolicy(networkMode: .online, dropAfter: .seconds(1)), chain: remote)
        var observer = try await observe(query)
        try await query.settled()
        try await leaveAndDrop(query, observer: observer, in: queries)
        #expect(!isRegistered(query, in: queries))
        #expect(query.latest.snapshot.value == nil, "a dropped query holds no value, published or not")

        queries.setOnline(false)
        observer = try await observe(query)
        defer { observer.cancel() }
        #expect(isRegistered(query, in: queries))
        // Woken offline, it learned the network is away: the load waits instead of failing.
        #expect(query.current.phase == .paused(.offline))
        queries.setOnline(true)
        try await query.settled()
        #expect(query.current.value == itemB)
        #expect(remote.loadCount == 2)
    }

    @Test("many tasks observing, leaving, dropping and waking queries under signals: every awake query stays registered, every dropped one holds nothing")
    func stress_everyAwakeQueryIsRegistered() async throws {
        let queries = client()
        let keys: [QueryKey] = (0..<6).map { ["item", .number($0)] }
        let held = keys.map { key in
            queries.query(key, policy: QueryPolicy(networkMode: .online, dropAfter: .zero), chain: StubLoader<Void, Item>(.success(itemA)))
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    var random = SplitMix64(seed: UInt64(worker))
                    for _ in 0..<150 {
                        let query = held[Int(random.next() % UInt64(held.count))]
                        switch random.next() % 6 {
                        case 0, 1:
                            // An observer that comes and goes at once.
                            var iterator = query.snapshots().makeAsyncIterator()
                            _ = await iterator.next()
                        case 2: queries.setOnline(random.next() % 2 == 0)
                        case 3: clock.advance(by: .zero)   // drops due now fire
                        case 4: query.invalidate()
                        default: queries.enteredForeground()
                        }
                        await Task.yield()
                    }
                }
            }
            try await group.waitForAll()
        }
        queries.setOnline(true)
        for query in held {
            try await query.settled()
            // The query's state and the client's list read in one critical section (the query's
            // lock, then the client's: the allowed order), so a drop due meanwhile cannot fall
            // between the two reads.
            let (isDropped, value, registered, online) = query.state.withLock { state in
                (state.machine.isDropped, state.published.snapshot.value, isRegistered(query, in: queries), state.machine.isOnline)
            }
            if isDropped {
                #expect(value == nil, "dropped \(query.key) still holds its value")
                #expect(!registered, "dropped \(query.key) is still in its client's list")
            } else {
                #expect(registered, "awake \(query.key) is not in its client's list")
                #expect(online, "\(query.key) missed the network coming back")
            }
        }
    }

    @Test("a query let go of stops its timers: nothing of it stays asleep on the clock")
    func releasedQuery_stopsItsTimers() async throws {
        let queries = client()
        var query: Query<Item>? = queries.query(
            ["timers"], policy: QueryPolicy(staleAfter: .seconds(3600)), chain: StubLoader<Void, Item>(.success(itemA)))
        try await query?.settled()
        // Loaded, it is fresh for an hour: its staleness timer sleeps on the clock.
        try await clock.waitForSleepers(count: 1)
        #expect(queries.remove(["timers"]))
        weak let released = query
        query = nil
        #expect(released == nil, "the query outlived its last reference")
        // Found by LeakSanitizer: the timer's task slept on until due (an hour here), holding the clock.
        #expect(clock.sleeperCount == 0)
    }

    @Test("concurrent setOnline calls leave every query in the client's final state")
    func concurrentConnectivity_endsInTheClientsState() async throws {
        let queries = client()
        let held = (0..<20).map { queries.query(["q", .number($0)], chain: StubLoader<Void, Int>(.success($0))) }
        for round in 0..<20 {
            await withTaskGroup(of: Void.self) { group in
                for worker in 0..<4 {
                    group.addTask { queries.setOnline((worker + round) % 2 == 0) }
                }
            }
            let online = queries.isOnline
            for query in held {
                #expect(query.state.withLock { $0.machine.isOnline } == online, "round \(round): \(query.key)")
            }
        }
    }

    // MARK: Offline

    /// A store on disk (real files) holding `value`, stored an hour before the clock's now.
    func disk(_ directory: TemporaryDirectory, holding value: Item) async throws -> FileStore<Item> {
        let store = FileStore<Item>(directory: directory.url)
        try await store.insert(value, for: "feed", storedAt: clock.date.addingTimeInterval(-3600))
        return store
    }

    /// A change from elsewhere: an extension (another process, here another instance on the
    /// same files) stores a value; the app is told (the platform's cross-process notification, see
    /// the guide "Offline writes") and invalidates the key; the screen shows the extension's value.
    @Test("a value another process stored on the same files reaches the screen once the app is told")
    func aValueStoredElsewhere_reachesTheScreenWhenTold() async throws {
        let directory = try TemporaryDirectory(prefix: "strata-query-elsewhere")
        let store = try await disk(directory, holding: itemA)
        let extensionStore = FileStore<Item>(directory: directory.url)
        let queries = client()
        // A screen that shows what the shared cache holds (a widget, an app its extension feeds).
        let query = queries.query(["feed"], chain: store.loader(key: "feed"))
        let observer = try await observe(query)
        defer { observer.cancel() }
        try await query.settled()
        #expect(query.current.value == itemA)

        try await extensionStore.insert(itemB, for: "feed", storedAt: clock.date)
        #expect(query.current.value == itemA, "not told yet")
        queries.invalidate(prefix: ["feed"])
        try await query.settled()
        #expect(query.current.value == itemB)
        #expect(query.current.provenance?.storedAt == clock.date)
    }

    @Test("first observed offline, an online-mode query shows the copy on disk and waits for the network to refresh it")
    func offline_firstObserved_showsTheDiskCopy() async throws {
        let directory = try TemporaryDirectory(prefix: "strata-query-offline")
        let store = try await disk(directory, holding: itemA)
        let remote = LoaderSpy<Void, Item>(.success(itemB))
        let queries = client(online: false)
        let query = queries.query(
            ["feed"], policy: QueryPolicy(staleAfter: .minutes(5), networkMode: .online), cached: store.loader(key: "feed"),
            chain: remote.originating(from: .remote))
        let observer = try await observe(query)
        defer { observer.cancel() }
        try await query.settled()
        #expect(query.current.value == itemA)
        #expect(query.current.phase == .paused(.offline))
        #expect(remote.loadCount == 0)
        queries.setOnline(true)
        try await query.settled()
        #expect(query.current.value == itemB)
    }

    @Test("observed again offline after a drop, an offline-first query shows the copy on disk again")
    func offline_observedAgainAfterADrop_showsTheDiskCopy() async throws {
        let directory = try TemporaryDirectory(prefix: "strata-query-offline")
        let store = try await disk(directory, holding: itemA)
        let storedAt = clock.date.addingTimeInterval(-3600)
        let remote = LoaderSpy<Void, Item>(.success(itemB), .failure(TestError()))
        let queries = client()
        let query = queries.query(
            ["feed"], policy: QueryPolicy(staleAfter: .minutes(5), dropAfter: .seconds(1)), cached: store.loader(key: "feed"),
            chain: remote.originating(from: .remote))
        var observer = try await observe(query)
        try await query.settled()
        #expect(query.current.value == itemB)
        try await leaveAndDrop(query, observer: observer, in: queries)

        queries.setOnline(false)
        observer = try await observe(query)
        defer { observer.cancel() }
        try await query.settled()
        #expect(query.current.value == itemA, "the copy on disk, read when the query was observed again")
        #expect(query.current.provenance?.storedAt == storedAt)
    }

    // MARK: Drops

    @Test("a new observer of a dropped query never sees the value it let go")
    func aNewObserver_neverSeesTheDroppedValue() async throws {
        let queries = client()
        let remote = LoaderSpy<Void, Item>(.success(itemA), .success(itemB), holdsLoads: true)
        let query = queries.query(["feed"], policy: QueryPolicy(dropAfter: .seconds(1)), chain: remote)
        // Subscribed here, before the task starts: the client records from this line on.
        let changes = queries.changes()
        let inspector = Task { for await _ in changes {} }
        defer { inspector.cancel() }
        var observer = try await observe(query)
        try await remote.waitForLoads(count: 1)
        remote.complete(0, with: .success(itemA))
        try await query.settled()
        try await leaveAndDrop(query, observer: observer, in: queries)
        #expect(query.state.withLock { $0.previousValue == nil && $0.published.snapshot.value == nil })

        var iterator = query.snapshots().makeAsyncIterator()
        let first = await iterator.next()
        #expect(first?.value == nil)
        #expect(first?.phase == .fetching(.firstObserver))
        try await remote.waitForLoads(count: 2)
        remote.complete(1, with: .success(itemB))
        #expect(await iterator.next()?.value == itemB)
        observer = Task {}
        observer.cancel()
    }

    @Test("the previous value is kept only while an inspector follows")
    func thePreviousValue_isKeptOnlyWhileInspected() async throws {
        let queries = client()
        let query = queries.query(["n"], chain: LoaderSpy<Void, Int>(.success(1), .success(2), .success(3)))
        let observer = try await observe(query)
        defer { observer.cancel() }
        try await query.settled()
        query.refetch()
        try await query.settled()
        #expect(query.state.withLock { $0.previousValue } == nil, "no inspector: nothing kept")
        // Subscribed here, before the task starts: the client records from this line on.
        let changes = queries.changes()
        let inspector = Task { for await _ in changes {} }
        defer { inspector.cancel() }
        #expect(queries.isInspected)
        query.refetch()
        try await query.settled()
        #expect(query.state.withLock { $0.previousValue } == 2)
    }

    // MARK: Options

    @Test("the newest call's chain, policy and enabled win")
    func theNewestCallsOptions_win() async throws {
        let queries = client()
        let alice = LoaderSpy<Void, Item>(.success(itemA), name: "alice")
        let bob = LoaderSpy<Void, Item>(.success(itemB), name: "bob")
        let first = queries.query(["me"], tags: ["alice"], chain: alice)
        let observer = try await observe(first)
        defer { observer.cancel() }
        try await first.settled()
        #expect(first.current.value == itemA)

        // Signed in as another user: the chain carrying the first user's credentials is not kept.
        let second = queries.query(["me"], tags: ["bob"], policy: QueryPolicy(staleAfter: .minutes(5)), chain: bob)
        #expect(second === first)
        #expect(second.tags == ["bob"])
        #expect(second.policy.staleAfter == .minutes(5))
        second.refetch()
        try await second.settled()
        #expect(second.current.value == itemB)
        #expect(bob.loadCount == 1)
        #expect(alice.loadCount == 1)

        queries.invalidate(tag: "alice")
        #expect(!second.state.withLock { $0.machine.isInvalidated }, "a tag the newest call dropped no longer reaches it")
        queries.invalidate(tag: "bob")
        #expect(second.state.withLock { $0.machine.isInvalidated })
        try await second.settled()
        _ = queries.query(["me"], enabled: false, chain: bob)
        #expect(second.current.phase == .paused(.disabled))
    }

    @Test("two calls for one key racing end with every option of the later one, whichever reaches the query first")
    func racingCalls_endWithTheLaterCallsOptions() async throws {
        let queries = client()
        let query = queries.query(["me"], chain: StubLoader<Void, Item>(.success(itemA)))
        let later = AnyLoader(StubLoader<Void, Item>(.success(itemB)))
        // The later call (stamp 3) reaches the query before the earlier one (stamp 2).
        query.update(tags: ["later"], chain: later, cached: nil, paging: nil, policy: QueryPolicy(staleAfter: .seconds(3)), enabled: true, stamp: 3)
        query.update(
            tags: ["earlier"], chain: AnyLoader(StubLoader<Void, Item>(.success(itemA))), cached: nil, paging: nil,
            policy: QueryPolicy(staleAfter: .seconds(2)), enabled: false, stamp: 2)
        #expect(query.tags == ["later"])
        #expect(query.policy.staleAfter == .seconds(3))
        #expect(query.current.phase != .paused(.disabled))
        query.refetch()
        try await query.settled()
        #expect(query.current.value == itemB)
    }

    @Test("an invalidation reaches a dropped query the app holds, without waking it; observed again, it refetches past its memory copy")
    func anInvalidationWhileDropped_standsWhenTheQueryWakes() async throws {
        let queries = client()
        let store = MemoryStore<String, Item>()
        try await store.insert(itemA, for: "me", storedAt: clock.date)
        let remote = LoaderSpy<Void, Item>(.success(itemB))
        let query = queries.query(
            ["me"], policy: QueryPolicy(staleAfter: .minutes(5), dropAfter: .seconds(1)),
            chain: store.loader(key: "me", freshness: .maxAge(.minutes(5))).fallingBack(to: remote.originating(from: .remote)))
        var observer = try await observe(query)
        try await query.settled()
        #expect(query.current.value == itemA && remote.loadCount == 0)
        try await leaveAndDrop(query, observer: observer, in: queries)

        queries.invalidate(prefix: ["me"])
        #expect(queries.keys.isEmpty, "it did not wake")
        observer = try await observe(query)
        defer { observer.cancel() }
        try await query.settled()
        #expect(remote.loadCount == 1, "the memory copy from before the invalidation is not taken as fresh")
        #expect(query.current.value == itemB)
    }

    @Test("remove(_:) refuses a query a screen observes, and forgets one nobody does")
    func remove_refusesAnObservedQuery() async throws {
        let queries = client()
        let query = queries.query(["feed"], chain: StubLoader<Void, Item>(.success(itemA)))
        let observer = try await observe(query)
        #expect(!queries.remove(["feed"]))
        #expect(isRegistered(query, in: queries))
        observer.cancel()
        try await query.waitForObservers(0)
        #expect(queries.remove(["feed"]))
        #expect(queries.keys.isEmpty)
    }

    // MARK: Keys

    @Test("keys that differ read differently, and read back as themselves",
          arguments: [
            [["feed", 1], ["feed", "1"], ["feed/1"], ["feed", "", 1], ["feed", "\"1\""], ["feed%2F1"], [],
             ["a", "\u{301}"], ["a/\u{301}"], ["%\u{301}"], ["+1"], ["-0"]] as [QueryKey],
          ])
    func keyDescriptions_areInjective(keys: [QueryKey]) {
        let descriptions = keys.map(\.description)
        #expect(Set(descriptions).count == keys.count, "\(descriptions)")
        for key in keys { #expect(QueryKey(described: key.description) == key, "\(key.description)") }
        #expect(QueryKey(["posts", 42]).description == "posts/42", "an ordinary key reads as it did")
        #expect(QueryKey(described: "posts/042") == nil, "only the text a key reads as names it")
    }

    @Test("random keys round-trip through their description, and two keys read alike only when equal")
    func keyDescriptions_roundTrip_seeded() {
        var random = SplitMix64(seed: 37)
        // With a combining mark, which joins the character before it (a `/` or `%` included).
        let alphabet: [String] = ["a", "b", "1", "/", "%", "\"", "-", " ", "0", "é", "\u{301}", "+"]
        var seen: [String: QueryKey] = [:]
        for _ in 0..<5_000 {
            let parts: [QueryKey.Part] = (0..<Int(random.next() % 4)).map { _ in
                if random.next() % 3 == 0 { return .number(Int(random.next() % 21) - 10) }
                return .name((0..<Int(random.next() % 4)).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] }.joined())
            }
            let key = QueryKey(parts)
            #expect(QueryKey(described: key.description) == key, "\(parts) → \(key.description)")
            if let other = seen[key.description] { #expect(other == key, "\(other.parts) and \(key.parts) both read \(key.description)") }
            seen[key.description] = key
        }
    }

    @Test("two paged queries whose keys once read alike keep their pages apart in one store, and the inspector finds each")
    func pagedQueries_withLookalikeKeys_keepTheirPagesApart() async throws {
        let queries = client()
        let store = MemoryStore<String, Pages<[Int], Int>>()
        let paging = Paging<[Int], Int>(firstCursor: 0) { _ in nil }
        let number = queries.pagedQuery(["feed", 1], paging: paging, store: store, page: StubLoader<Int, [Int]>(.success([1])))
        let name = queries.pagedQuery(["feed", "1"], paging: paging, store: store, page: StubLoader<Int, [Int]>(.success([2])))
        let observers = [try await observe(number), try await observe(name)]
        defer { for observer in observers { observer.cancel() } }
        try await number.settled()
        try await name.settled()
        #expect(try await store.retrieve(number.key.description)?.value.items == [1])
        #expect(try await store.retrieve(name.key.description)?.value.items == [2])
        #expect(queries.query(described: "feed/1") === number)
        #expect(queries.query(described: "feed/\"1\"") === name)
    }

    // MARK: Backoff, cancellation, the timeline

    @Test("refetch() and the network coming back cut a retry's delay short")
    func refetchAndReconnect_cutABackoffShort() async throws {
        let queries = client()
        let retry = RetryPolicy(maxAttempts: 5, initialDelay: .seconds(600), jitter: 0, shouldRetry: { _ in true })
        let remote = LoaderSpy<Void, Item>(.failure(TestError()), .failure(TestError()), .failure(TestError()), .success(itemA))
        let query = queries.query(["feed"], policy: QueryPolicy(networkMode: .always, retry: retry), chain: remote)
        let observer = try await observe(query)
        defer { observer.cancel() }
        try await remote.waitForLoads(count: 1)
        try await query.waitForPhase(.paused(.backingOff))
        query.refetch()
        try await remote.waitForLoads(count: 2)
        try await query.waitForPhase(.paused(.backingOff))
        queries.setOnline(false)
        queries.setOnline(true)
        try await remote.waitForLoads(count: 3)
        try await query.waitForPhase(.paused(.backingOff))
        // No clock was advanced: each load above ran at once (waited for, a retry's 600 s delay
        // would have held it until the suite's time limit).
        #expect(remote.loadCount == 3)
    }

    @Test("a cancelled load does not wait for its pages' store write")
    func aCancelledLoad_doesNotWaitForItsStoreWrite() async throws {
        let queries = client()
        let store = HeldWrites<Pages<[Int], Int>>()
        let paging = Paging<[Int], Int>(firstCursor: 0) { _ in nil }
        let feed = queries.pagedQuery(["feed"], paging: paging, store: store, page: StubLoader<Int, [Int]>(.success([1])))
        let observer = try await observe(feed)
        try await store.waitForWrite()
        let load = try #require(feed.state.withLock { $0.loads.values.first })
        observer.cancel()
        try await feed.waitForObservers(0)
        // The load ends although its write is still held.
        await load.value
        #expect(store.isHolding)
        store.release()
    }

    @Test("a query that keeps failing leaves one entry in the timeline's bookkeeping and no phantom running load")
    func theTimeline_staysBoundedWhileAQueryKeepsFailing() async throws {
        let queries = client()
        // Subscribed here, before the task starts: the client records from this line on.
        let changes = queries.changes()
        let inspector = Task { for await _ in changes {} }
        defer { inspector.cancel() }
        #expect(queries.isInspected)
        let retry = RetryPolicy(maxAttempts: 3, initialDelay: .seconds(600), jitter: 0, shouldRetry: { _ in true })
        let query = queries.query(["feed"], policy: QueryPolicy(networkMode: .always, retry: retry), chain: StubLoader<Void, Int>(.failure(TestError())))
        // Each round a screen comes, its load fails and waits for a retry, and the screen leaves
        // (the flight abandoned while backing off); or it is invalidated while it waits.
        for round in 0..<50 {
            let observer = try await observe(query)
            try await query.waitForPhase(.paused(.backingOff))
            if round % 2 == 0 { query.invalidate() }
            try await query.waitForPhase(.paused(.backingOff))
            observer.cancel()
            try await query.waitForObservers(0)
        }
        #expect(queries.runningRecordCount <= 1)
        #expect(queries.recentLoads.filter { $0.outcome == .running }.isEmpty)
    }

    // MARK: LiveQuery

    @Test("a view re-renders only for the fields it reads: observation callbacks counted per field")
    @MainActor
    func aLiveQuery_notifiesEachFieldOnlyWhenItChanges() async throws {
        let queries = client()
        let remote = LoaderSpy<Void, Item>(.success(itemA), .success(itemA), .success(itemB), holdsLoads: true)
        let query = queries.query(["feed"], policy: QueryPolicy(staleAfter: .seconds(60)), chain: remote)
        let live = query.observed()
        let fields: [(String, @MainActor (LiveQuery<Item>) -> Void)] = [
            ("value", { _ = $0.value }), ("status", { _ = $0.status }), ("phase", { _ = $0.phase }),
            ("isStale", { _ = $0.isStale }), ("lastError", { _ = $0.lastError }), ("provenance", { _ = $0.provenance }),
            ("snapshot", { _ = $0.snapshot }),
        ]
        let counts = fields.map { name, read in FieldObserver(name: name) { read(live) } }

        try await remote.waitForLoads(count: 1)
        remote.complete(0, with: .success(itemA))
        try await live.settled()
        var seen = Dictionary(uniqueKeysWithValues: counts.map { ($0.name, $0.count) })
        // empty fetching → value a, idle, fresh
        #expect(seen == ["value": 1, "status": 1, "phase": 1, "isStale": 1, "lastError": 0, "provenance": 1, "snapshot": 1])

        // A refresh that brings the same value: only the phase moves (twice), and the age.
        clock.advance(by: .seconds(61))
        query.refetch()
        try await remote.waitForLoads(count: 2)
        try await live.waitUntilCaughtUp()
        remote.complete(1, with: .success(itemA))
        try await live.settled()
        seen = Dictionary(uniqueKeysWithValues: counts.map { ($0.name, $0.count) })
        #expect(seen["value"] == 1, "the same value again is no change to a view that reads it")
        #expect(seen["status"] == 1)
        #expect(seen["phase"] == 3, "fetching, then idle")
        #expect(seen["snapshot"] == 3)
        #expect(seen["lastError"] == 0)
    }

    // MARK: snapshots()

    @Test("snapshots() counts its observer when iteration starts, and keeps only the newest for a slow reader")
    func snapshots_registerOnIteration_andAreBounded() async throws {
        let queries = client()
        let counter = Locked(0)
        let query = queries.query(["n"], policy: QueryPolicy(staleAfter: .seconds(3600)), chain: ClosureLoader<Void, Int> {
            counter.withLock { count in
                count += 1
                return count
            }
        })
        let sequence = query.snapshots(bufferingNewest: 4)
        #expect(query.observerCount == 0, "a sequence not iterated is no observer")
        var iterator = sequence.makeAsyncIterator()
        #expect(query.observerCount == 1)
        for _ in 0..<20 {
            query.refetch()
            try await query.settled()
        }
        var read: [QuerySnapshot<Int>] = []
        for _ in 0..<4 { if let snapshot = await iterator.next() { read.append(snapshot) } }
        let newest = try #require(query.current.value)
        #expect(read.last?.value == newest, "the newest is kept")
        #expect(read.first.flatMap(\.value).map { $0 >= newest - 3 } == true, "older ones were let go: \(read.map(\.value))")
    }
}

extension Query {
    /// Suspends until the query's phase is `phase` (read on each change it publishes).
    func waitForPhase(_ phase: QueryPhase) async throws {
        for await snapshot in snapshots() where snapshot.phase == phase { return }
        throw CancellationError()
    }
}

/// A store whose writes suspend until the test releases them.
final class HeldWrites<Value: Sendable>: Store, Sendable {
    typealias Key = String
    private let state = Locked<(entries: [String: CacheEntry<Value>], waiting: [CheckedContinuation<Void, Never>], holding: Bool, writes: Int)>(([:], [], false, 0))
    private let arrived = AsyncStream<Void>.makeStream()

    var isHolding: Bool { state.withLock { $0.holding } }

    func waitForWrite() async throws {
        for await _ in arrived.stream { return }
    }

    func release() {
        let waiting = state.withLock { state in
            state.holding = false
            defer { state.waiting = [] }
            return state.waiting
        }
        for continuation in waiting { continuation.resume() }
    }

    func retrieve(_ key: String) async throws -> CacheEntry<Value>? { state.withLock { $0.entries[key] } }

    func insert(_ entry: CacheEntry<Value>, for key: String) async throws {
        await withCheckedContinuation { continuation in
            state.withLock { state in
                state.holding = true
                state.waiting.append(continuation)
            }
            arrived.continuation.yield()
        }
        state.withLock { $0.entries[key] = entry }
    }

    func delete(_ key: String) async throws { state.withLock { $0.entries[key] = nil } }
    func removeAll() async throws { state.withLock { $0.entries = [:] } }
}

/// Counts the changes `read` observes, tracking it anew after each (as SwiftUI re-renders a view).
@MainActor
final class FieldObserver {
    let name: String
    private(set) var count = 0
    private let read: @MainActor () -> Void

    init(name: String, read: @escaping @MainActor () -> Void) {
        self.name = name
        self.read = read
        track()
    }

    private func track() {
        withObservationTracking { read() } onChange: { [weak self] in
            // Called before the change is made, on the main actor (the live query mutates there).
            MainActor.assumeIsolated {
                guard let self else { return }
                self.count += 1
                self.track()
            }
        }
    }
}
