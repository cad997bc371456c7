import Foundation
import Testing
@testable @_spi(StrataInternals) import Strata
@testable import StrataQueries
import StrataTesting

@Suite("QueryClient and Query: live query state", .timeLimit(.minutes(1)))
struct QueryTests {
    let clock = ManualClock()

    /// A memory store holding `value`, stored `age` before the clock's now.
    func memory(holding value: Item? = nil, aged age: Duration = .zero) async throws -> MemoryStore<String, Item> {
        let store = MemoryStore<String, Item>()
        if let value {
            try await store.insert(value, for: "feed", storedAt: clock.date.addingTimeInterval(-Double(age.components.seconds)))
        }
        return store
    }

    /// The offline-first chain: a fresh memory copy, else the remote (written through), else any copy.
    func chain(_ store: MemoryStore<String, Item>, remote: LoaderSpy<Void, Item>) -> some Loader<Void, Item> {
        store.loader(key: "feed", freshness: .maxAge(.minutes(5))).named("fresh local")
            .fallingBack(to: remote.originating(from: .remote).writingThrough(in: store, key: "feed").named("remote"))
            .fallingBack(to: store.loader(key: "feed").named("stale local"))
    }

    func client(online: Bool = true) -> QueryClient {
        QueryClient(environment: clock.environment(), online: online)
    }

    /// Reads `count` snapshots from `stream`.
    func take(_ count: Int, from stream: inout QuerySnapshots<Item>.AsyncIterator) async -> [QuerySnapshot<Item>] {
        var taken: [QuerySnapshot<Item>] = []
        while taken.count < count, let snapshot = await stream.next() { taken.append(snapshot) }
        return taken
    }

    @Test func oneQueryPerKey_sharedByEveryCaller() async throws {
        let store = try await memory()
        let remote = LoaderSpy<Void, Item>(.success(itemA))
        let queries = client()
        let first = queries.query(["feed"], chain: chain(store, remote: remote))
        let second = queries.query(["feed"], chain: chain(store, remote: remote))
        #expect(first === second)
        #expect(queries.keys == [["feed"]])
    }

    @Test func staleWhileRevalidate_theCachedCopyAtOnce_thenTheFreshOne_inExactSnapshots() async throws {
        let store = try await memory(holding: itemA, aged: .seconds(3600))
        let remote = LoaderSpy<Void, Item>(.success(itemB), holdsLoads: true)
        let query = client().query(
            ["feed"], policy: QueryPolicy(staleAfter: .minutes(5)), cached: store.loader(key: "feed"), chain: chain(store, remote: remote))

        var stream = query.snapshots().makeAsyncIterator()
        try await remote.waitForLoads(count: 1)
        remote.complete(0, with: .success(itemB))
        try await query.settled()
        let seen = await take(2, from: &stream)

        // The observer's first snapshot is the query once it counts the observer: the cached copy,
        // already being refreshed; never an empty frame.
        #expect(seen.map(\.value) == [itemA, itemB])
        #expect(seen.map(\.phase) == [.fetching(.firstObserver), .idle])
        #expect(seen.map(\.isStale) == [true, false])
        #expect(seen[0].provenance?.tier == "stale local" || seen[0].provenance?.origin == .memory)
        #expect(seen[1].provenance?.tier == "remote")
        #expect(remote.loadCount == 1)
    }

    @MainActor
    @Test func theFirstMainActorRead_holdsTheCachedValue() async throws {
        let store = try await memory(holding: itemA)
        let remote = LoaderSpy<Void, Item>(.success(itemB))
        let query = client().query(["feed"], policy: QueryPolicy(staleAfter: .minutes(5)), chain: chain(store, remote: remote))
        let live = query.observed()
        // Read synchronously, right after subscribing: no empty frame.
        #expect(live.value == itemA)
        #expect(live.status == .value)
        #expect(live.provenance?.tier == "fresh local")
        try await live.settled()
        #expect(remote.loadCount == 0)
    }

    @MainActor
    @Test func aLiveQuery_followsTheQuery_andItsReleaseRemovesTheObserver() async throws {
        let store = try await memory()
        let remote = LoaderSpy<Void, Item>(.success(itemB), holdsLoads: true)
        let queries = client()
        let query = queries.query(["feed"], chain: chain(store, remote: remote))
        var live: LiveQuery<Item>? = query.observed()
        try await remote.waitForLoads(count: 1)
        #expect(live?.status == .empty)
        remote.complete(0, with: .success(itemB))
        try await live?.settled()
        #expect(live?.value == itemB)
        #expect(live?.phase == .idle)
        #expect(query.observerCount == 1)
        live = nil
        try await query.waitForObservers(0)
        #expect(query.observerCount == 0)
    }

    @MainActor
    @Test func aKeyThatChanges_keepsThePreviousValueAsAPlaceholder_untilTheNewOneArrives() async throws {
        let queries = client()
        let first = queries.query(["post", 1], chain: StubLoader<Void, Item>(.success(itemA)))
        let secondRemote = LoaderSpy<Void, Item>(.success(itemB), holdsLoads: true)
        let second = queries.query(["post", 2], chain: secondRemote)
        let live = first.observed()
        try await live.settled()
        #expect(live.value == itemA && !live.snapshot.isPlaceholder)

        live.switchTo(second)
        #expect(live.value == itemA)
        #expect(live.snapshot.isPlaceholder)
        try await secondRemote.waitForLoads(count: 1)
        try await first.waitForObservers(0)
        #expect(live.value == itemA && live.snapshot.isPlaceholder)
        #expect(live.phase == .fetching(.firstObserver))

        secondRemote.complete(0, with: .success(itemB))
        try await live.settled()
        #expect(live.value == itemB)
        #expect(!live.snapshot.isPlaceholder)
    }

    @Test func tenObservers_aForegroundSignal_andAReconnect_makeOneLoaderCall() async throws {
        let store = try await memory()
        let remote = LoaderSpy<Void, Item>(.success(itemB), holdsLoads: true)
        let queries = client()
        let query = queries.query(["feed"], policy: QueryPolicy(staleAfter: .minutes(5)), chain: chain(store, remote: remote))
        var tasks: [Task<Void, Never>] = []
        for _ in 0..<10 {
            let stream = query.snapshots()
            tasks.append(Task { for await _ in stream {} })
        }
        try await query.waitForObservers(10)
        queries.enteredForeground()
        queries.setOnline(false)
        queries.setOnline(true)
        try await remote.waitForLoads(count: 1)
        remote.complete(0, with: .success(itemB))
        try await query.settled()
        queries.enteredForeground()
        queries.setOnline(false)
        queries.setOnline(true)
        try await query.settled()
        #expect(remote.loadCount == 1)
        #expect(query.observerCount == 10)
        for task in tasks { task.cancel() }
    }

    @Test func invalidatingAPrefix_refetchesObservedQueriesOnceEach_andOnlyMarksTheOthers() async throws {
        let queries = client()
        var remotes: [QueryKey: LoaderSpy<Void, Item>] = [:]
        var observing: [Task<Void, Never>] = []
        var made: [Query<Item>] = []
        for key: QueryKey in [["todos", 1], ["todos", 2], ["todos", 3], ["users", 1]] {
            let remote = LoaderSpy<Void, Item>(.success(itemA), name: key.description)
            remotes[key] = remote
            let query = queries.query(key, policy: QueryPolicy(staleAfter: .minutes(5)), chain: remote.originating(from: .remote))
            made.append(query)
            if key != ["todos", 3] {
                let stream = query.snapshots()
                observing.append(Task { for await _ in stream {} })
            }
            try await remote.waitForLoads(count: key == ["todos", 3] ? 0 : 1)
        }
        for query in made { try await query.settled() }

        queries.invalidate(prefix: ["todos"])
        for query in made { try await query.settled() }

        #expect(remotes[["todos", 1]]?.loadCount == 2)
        #expect(remotes[["todos", 2]]?.loadCount == 2)
        #expect(remotes[["todos", 3]]?.loadCount == 0)
        #expect(remotes[["users", 1]]?.loadCount == 1)
        #expect(made[2].current.isStale)
        for task in observing { task.cancel() }
    }

    @Test func invalidatingByTag_reachesOnlyTaggedQueries() async throws {
        let queries = client()
        let tagged = LoaderSpy<Void, Item>(.success(itemA))
        let other = LoaderSpy<Void, Item>(.success(itemA))
        let a = queries.query(["a"], tags: ["feed"], policy: QueryPolicy(staleAfter: .minutes(5)), chain: tagged)
        let b = queries.query(["b"], policy: QueryPolicy(staleAfter: .minutes(5)), chain: other)
        let streams = [a.snapshots(), b.snapshots()]
        let tasks = streams.map { stream in Task { for await _ in stream {} } }
        try await a.waitForObservers(1)
        try await b.waitForObservers(1)
        try await a.settled()
        try await b.settled()
        queries.invalidate(tag: "feed")
        try await a.settled()
        try await b.settled()
        #expect(tagged.loadCount == 2)
        #expect(other.loadCount == 1)
        for task in tasks { task.cancel() }
    }

    @Test func offline_showsTheCachedCopy_pausesWithoutARequest_andRecoversWithOne() async throws {
        let store = try await memory(holding: itemA, aged: .seconds(3600))
        let remote = LoaderSpy<Void, Item>(.success(itemB))
        let queries = client(online: false)
        let query = queries.query(
            ["feed"], policy: QueryPolicy(staleAfter: .minutes(5), networkMode: .online),
            cached: store.loader(key: "feed"), chain: chain(store, remote: remote))
        let stream = query.snapshots()
        let observer = Task { for await _ in stream {} }
        try await query.waitForObservers(1)
        try await query.settled()
        #expect(query.current.value == itemA)
        #expect(query.current.phase == .paused(.offline))
        #expect(query.current.isStale)
        #expect(remote.loadCount == 0)

        queries.setOnline(true)
        try await query.settled()
        #expect(remote.loadCount == 1)
        #expect(query.current.value == itemB)
        #expect(query.current.phase == .idle)
        observer.cancel()
    }

    @Test func aFailedRefresh_keepsTheShownValue_andRecordsTheError() async throws {
        let store = try await memory(holding: itemA, aged: .seconds(3600))
        let remote = LoaderSpy<Void, Item>(.failure(TestError()))
        // No stale tier: the chain fails when the remote does.
        let query = client().query(
            ["feed"], policy: QueryPolicy(staleAfter: .minutes(5)), cached: store.loader(key: "feed"),
            chain: remote.originating(from: .remote))
        let stream = query.snapshots()
        let observer = Task { for await _ in stream {} }
        try await query.waitForObservers(1)
        try await query.settled()
        let snapshot = query.current
        #expect(snapshot.value == itemA && snapshot.status == .value)
        #expect(snapshot.lastError?.type == "TestError")
        #expect(snapshot.failureCount == 1)
        observer.cancel()
    }

    @Test func retries_backOffOnTheManualClock() async throws {
        let remote = LoaderSpy<Void, Item>(.failure(TestError()), .success(itemB))
        let retry = RetryPolicy(maxAttempts: 2, initialDelay: .seconds(5), jitter: 0, shouldRetry: { _ in true })
        let query = client().query(["feed"], policy: QueryPolicy(retry: retry), chain: remote)
        let stream = query.snapshots()
        let observer = Task { for await _ in stream {} }
        try await query.waitForObservers(1)
        // The retry's delay (the query also sleeps until its drop is due).
        try await clock.waitForSleepers(matching: { $0.since.duration(to: $0.deadline) == .seconds(5) })
        #expect(query.current.phase == .paused(.backingOff))
        #expect(query.current.failureCount == 1)
        clock.advance(by: .seconds(5))
        try await query.settled()
        #expect(query.current.value == itemB)
        #expect(query.current.failureCount == 0)
        #expect(remote.loadCount == 2)
        observer.cancel()
    }

    @Test func theLastObserverLeaving_cancelsTheLoad_andTheQueryIsDroppedAfterItsGracePeriod() async throws {
        let remote = LoaderSpy<Void, Item>(.success(itemA), holdsLoads: true)
        let queries = client()
        let query = queries.query(["feed"], policy: QueryPolicy(dropAfter: .seconds(300)), chain: remote)
        let stream = query.snapshots()
        let observer = Task { for await _ in stream {} }
        try await query.waitForObservers(1)
        try await remote.waitForLoads(count: 1)
        observer.cancel()
        try await query.waitForObservers(0)
        #expect(query.current.phase == .idle)
        try await clock.waitForSleepers(count: 1)
        clock.advance(by: .seconds(300))
        try await queries.waitForQueries(0)
        #expect(queries.keys.isEmpty)
        #expect(remote.cancelledLoadCount == 1)
    }

    @Test func anObservedValueGoingStaleByAge_isPublished_withoutALoad() async throws {
        let remote = LoaderSpy<Void, Item>(.success(itemA))
        let query = client().query(["feed"], policy: QueryPolicy(staleAfter: .seconds(60)), chain: remote.originating(from: .remote))
        var stream = query.snapshots().makeAsyncIterator()
        try await query.settled()
        // The moment the value goes stale (the query also sleeps until its drop would be due).
        try await clock.waitForSleepers(matching: { $0.since.duration(to: $0.deadline) == .seconds(60) })
        clock.advance(by: .seconds(60))
        let seen = await take(3, from: &stream).map(\.isStale)
        #expect(seen == [true, false, true])   // empty and fetching, loaded, stale
        #expect(remote.loadCount == 1)
    }

    @Test func signalsAsSequences_driveTheClient_connectivityAndForeground() async throws {
        let remote = LoaderSpy<Void, Item>(.success(itemA), .success(itemB))
        let queries = client()
        let query = queries.query(["feed"], policy: QueryPolicy(networkMode: .online), chain: remote)
        let (connectivity, online) = AsyncStream.makeStream(of: Bool.self)
        let (foreground, entered) = AsyncStream.makeStream(of: Void.self)
        let following = Task { await queries.follow(connectivity: connectivity) }
        let followingForeground = Task { await queries.follow(foreground: foreground) }
        online.yield(false)
        online.finish()
        await following.value
        #expect(!queries.isOnline)

        let observer = Task { for await _ in query.snapshots() {} }
        try await query.waitForObservers(1)
        #expect(query.current.phase == .paused(.offline))
        #expect(remote.loadCount == 0)
        queries.setOnline(true)
        try await query.settled()
        #expect(remote.loadCount == 1)
        entered.yield()
        entered.finish()
        await followingForeground.value
        try await query.settled()
        #expect(remote.loadCount == 2)
        #expect(query.current.lastFetchReason == .foreground)
        observer.cancel()
    }

    @Test func aDisabledQuery_isNeverFetching_untilEnabled() async throws {
        let remote = LoaderSpy<Void, Item>(.success(itemA))
        let query = client().query(["user", 1, "posts"], chain: remote)
        query.setEnabled(false)
        let stream = query.snapshots()
        let observer = Task { for await _ in stream {} }
        try await query.waitForObservers(1)
        query.refetch()
        query.invalidate()
        try await query.settled()
        #expect(query.current.phase == .paused(.disabled))
        #expect(remote.loadCount == 0)
        query.setEnabled(true)
        try await query.settled()
        #expect(remote.loadCount == 1)
        #expect(query.current.value == itemA)
        observer.cancel()
    }

    @Test func anIntervalRefetchesAnObservedStaleQuery_andStopsWithItsObservers() async throws {
        let remote = LoaderSpy<Void, Item>(.success(itemA))
        let query = client().query(["feed"], policy: QueryPolicy(staleAfter: .seconds(10), refetchInterval: .seconds(60)), chain: remote.originating(from: .remote))
        let stream = query.snapshots()
        let observer = Task { for await _ in stream {} }
        try await query.waitForObservers(1)
        try await query.settled()
        try await clock.waitForSleepers(matching: { $0.since.duration(to: $0.deadline) == .seconds(60) })
        clock.advance(by: .seconds(60))
        try await remote.waitForLoads(count: 2)
        try await query.settled()
        #expect(query.current.lastFetchReason == .interval)
        observer.cancel()
        try await query.waitForObservers(0)
        #expect(remote.loadCount == 2)
    }

    @Test func anInvalidation_goesPastTheChainsFreshCache_toTheRemote() async throws {
        let store = try await memory(holding: itemA)
        let remote = LoaderSpy<Void, Item>(.success(itemB))
        let queries = client()
        let query = queries.query(["feed"], policy: QueryPolicy(staleAfter: .minutes(5)), chain: chain(store, remote: remote))
        let stream = query.snapshots()
        let observer = Task { for await _ in stream {} }
        try await query.waitForObservers(1)
        try await query.settled()
        #expect(query.current.value == itemA)
        #expect(remote.loadCount == 0)

        queries.invalidate(prefix: ["feed"])
        try await query.settled()
        #expect(remote.loadCount == 1)
        #expect(query.current.value == itemB)
        #expect(query.current.provenance?.tier == "remote")
        #expect(!query.current.isStale)
        observer.cancel()
    }

    @Test func aQueryNeverObserved_isDropped_andTheSameObjectComesBackWhenUsed() async throws {
        let remote = LoaderSpy<Void, Item>(.success(itemA))
        let queries = client()
        let held = queries.query(["feed"], policy: QueryPolicy(dropAfter: .seconds(300)), chain: remote)
        try await clock.waitForSleepers(count: 1)
        clock.advance(by: .seconds(300))
        try await queries.waitForQueries(0)

        // The app kept it: observing it again wakes it, with the client, and it loads.
        let stream = held.snapshots()
        let observer = Task { for await _ in stream {} }
        try await held.waitForObservers(1)
        try await held.settled()
        #expect(held.current.value == itemA)
        #expect(queries.keys == [["feed"]])
        #expect(queries.query(["feed"], chain: remote) === held)
        observer.cancel()
    }

    @Test func aChainThatThrowsCancellationOnItsOwn_endsTheLoad() async throws {
        let query = client().query(["feed"], chain: ClosureLoader<Void, Item>("gives up") { throw CancellationError() })
        let stream = query.snapshots()
        let observer = Task { for await _ in stream {} }
        try await query.waitForObservers(1)
        try await query.settled()
        #expect(query.current.phase == .idle)
        #expect(query.current.status == .failed)
        #expect(query.current.lastError?.type == "CancellationError")
        observer.cancel()
    }

    @Test func keyParts_matchByPrefix() {
        let key: QueryKey = ["posts", 42, "comments"]
        #expect(key.hasPrefix(["posts"]))
        #expect(key.hasPrefix(["posts", 42]))
        #expect(!key.hasPrefix(["posts", 4]))
        #expect(!QueryKey(["postsArchive"]).hasPrefix(["posts"]))
        #expect(key.description == "posts/42/comments")
    }

    @Test("a write's invalidation label names keys part by part, as a prefix does", arguments: [
        ("posts", true), ("posts/42", true), ("posts/42/comments", true), ("posts/4", false),
        ("post", false), ("posts/42/comments/1", false), ("", false),
    ])
    func invalidationLabels_matchPartByPart(label: String, matches: Bool) {
        #expect(QueryKey(["posts", 42, "comments"]).isUnder(label: label) == matches)
    }

    @Test func anInvalidationLabel_neverMatchesAPartThatHoldsASlash() {
        #expect(!QueryKey(["posts/archive"]).isUnder(label: "posts"))
        #expect(!QueryKey(["a/b"]).isUnder(label: "a/b"), "a label names parts; this key has one")
        #expect(QueryKey(["a", "b"]).isUnder(label: "a/b"))
    }
}
