import Foundation
import Observation
import Testing
@testable @_spi(StrataInternals) import Strata
@testable import StrataOutbox
@testable import StrataQueries
import StrataTesting

/// What a TanStack Query or SWR user reaches for on day two, on real queries driven by a manual
/// clock: `select`, per-observer `enabled`, fetch and await, values set by code and put back,
/// mutations with optimistic values, intervals in the background.
@Suite("Live queries, day two: select, fetch, setValue, mutations, intervals", .timeLimit(.minutes(1)))
struct QueryDayTwoTests {
    let clock = ManualClock()

    func client(online: Bool = true) -> QueryClient {
        QueryClient(environment: clock.environment(), online: online)
    }

    /// A query of a list of items loaded through `remote`, fresh for an hour.
    func list(_ queries: QueryClient, _ remote: LoaderSpy<Void, [Item]>, key: QueryKey = ["items"]) -> Query<[Item]> {
        queries.query(key, policy: QueryPolicy(staleAfter: .seconds(3600)), chain: remote)
    }

    // MARK: select

    @Test("a selection is handed a snapshot only when the selected value changes; two selections share one load")
    func select_notifiesOnlyWhenTheSelectionChanges() async throws {
        let queries = client()
        let remote = LoaderSpy<Void, [Item]>(.success([itemA, itemB]))
        let query = list(queries, remote)
        let counts = Locked<[Int?]>([])
        let names = Locked<[[String]?]>([])
        let countObserver = query.observeSelection(select: { $0.count }, enabled: true) { _, snapshot, changed in
            if changed { counts.withLock { $0.append(snapshot.value) } }
        }
        let namesObserver = query.observeSelection(select: { $0.map(\.name) }, enabled: true) { _, snapshot, changed in
            if changed { names.withLock { $0.append(snapshot.value) } }
        }
        try await query.settled()
        #expect(remote.loadCount == 1, "two selections, one load")

        // A change the count does not see: the names do.
        query.setValue { _ in [itemA, Item(id: 2, name: "renamed")] }
        // A change neither sees (a refresh that brings the same list).
        query.refetch()
        try await query.settled()
        query.setValue { _ in [itemA] }
        #expect(counts.withLock { $0 } == [nil, 2, 1])
        #expect(names.withLock { $0 } == [nil, ["a", "b"], ["a", "renamed"], ["a", "b"], ["a"]])
        query.removeObserver(countObserver)
        query.removeObserver(namesObserver)
    }

    @Test("snapshots(select:) yields the current selection, then each change of it")
    func selectedSnapshots_yieldOnlyChanges() async throws {
        let queries = client()
        let remote = LoaderSpy<Void, [Item]>(.success([itemA, itemB]))
        let query = list(queries, remote)
        try await query.fetch()
        var iterator = query.snapshots(select: { $0.count }).makeAsyncIterator()
        #expect(await iterator.next()?.value == 2)
        query.setValue { $0.map { $0.map { Item(id: $0.id, name: $0.name + "!") } } }  // same count: nothing
        query.setValue { ($0 ?? []) + [Item(id: 3, name: "c")] }
        let next = await iterator.next()
        #expect(next?.value == 3)
        #expect(next?.provenance?.isSetLocally == true)
    }

    @Test("a LiveSelection re-renders a view that reads its value only when the selection changes")
    @MainActor
    func liveSelection_rendersOnlyForItsSelection() async throws {
        let queries = client()
        let remote = LoaderSpy<Void, [Item]>(.success([itemA, itemB]), .success([itemA, itemB]))
        let query = list(queries, remote)
        let count = query.observed(select: { $0.count })
        let renders = FieldObserver(name: "value") { _ = count.value }
        try await count.settled()
        #expect(count.value == 2)
        #expect(renders.count == 1)

        query.setValue { _ in [itemA, Item(id: 2, name: "renamed")] }   // same count
        clock.advance(by: .seconds(3601))
        query.refetch()                                                 // fetching, then the same list
        try await count.settled()
        #expect(renders.count == 1, "no change of the selection: no render")
        query.setValue { _ in [itemA] }
        try await count.waitUntilCaughtUp()
        #expect(count.value == 1)
        #expect(renders.count == 2)
    }

    // MARK: per-observer enabled

    @Test("a disabled observer shows the snapshots and starts no load; enabling it loads")
    @MainActor
    func aDisabledObserver_waitsForItsKey() async throws {
        let queries = client()
        let remote = LoaderSpy<Void, [Item]>(.success([itemA]))
        let query = list(queries, remote)
        let live = query.observed(enabled: false)
        #expect(query.observerCount == 1)
        query.enteredForegroundForTest(queries)
        try await query.settled()
        #expect(remote.loadCount == 0)
        #expect(live.phase == .idle)
        live.isEnabled = true
        try await live.settled()
        #expect(remote.loadCount == 1)
        #expect(live.value == [itemA])
    }

    // MARK: fetch, ensureValue, prefetch

    @Test("fetch() awaits the load's answer; ensureValue() returns a fresh value without a load; prefetch() loads unobserved")
    func fetch_ensureValue_prefetch() async throws {
        let queries = client()
        let remote = LoaderSpy<Void, [Item]>(.success([itemA]), .success([itemA, itemB]), .success([itemB]))
        let query = list(queries, remote)
        #expect(try await query.ensureValue() == [itemA])
        #expect(try await query.ensureValue() == [itemA])
        #expect(remote.loadCount == 1, "fresh: no second load")
        #expect(try await query.fetch() == [itemA, itemB])
        #expect(remote.loadCount == 2)

        let other = list(queries, remote, key: ["other"])
        other.prefetch()
        try await other.settled()
        #expect(other.observerCount == 0)
        #expect(other.current.value == [itemB])
        #expect(other.current.lastFetchReason == .fetch)
    }

    @Test("a fetch throws the chain's error, and a disabled query's fetch says it is disabled")
    func fetch_failuresAreTyped() async throws {
        let queries = client()
        let remote = LoaderSpy<Void, [Item]>(.failure(TestError()))
        let query = list(queries, remote)
        await #expect(throws: QueryError.self) { try await query.fetch() }
        query.setEnabled(false)
        await #expect(throws: QueryFetchError.disabled(["items"])) { try await query.fetch() }
    }

    @Test("a fetch's load goes on when the last observer leaves while it waits")
    func aFetch_keepsItsLoad() async throws {
        let queries = client()
        let remote = LoaderSpy<Void, [Item]>(.success([itemA]), holdsLoads: true)
        let query = list(queries, remote)
        let fetching = Task { try await query.fetch() }
        try await remote.waitForLoads(count: 1)
        // An observer comes to the load the fetch started, and leaves.
        let observer = Task { for await _ in query.snapshots() {} }
        try await query.waitForObservers(1)
        observer.cancel()
        try await query.waitForObservers(0)
        remote.complete(0, with: .success([itemA]))
        #expect(try await fetching.value == [itemA])
        #expect(remote.loadCount == 1)
    }

    @Test("a cancelled fetch stops waiting at once")
    func aCancelledFetch_stopsWaiting() async throws {
        let queries = client()
        let remote = LoaderSpy<Void, [Item]>(.success([itemA]), holdsLoads: true)
        let query = list(queries, remote)
        let fetching = Task { try await query.fetch() }
        try await remote.waitForLoads(count: 1)
        fetching.cancel()
        await #expect(throws: CancellationError.self) { try await fetching.value }
        remote.complete(0, with: .success([itemA]))
        try await query.settled()
        #expect(query.current.value == [itemA], "the load went on")
    }

    // MARK: setValue and value(for:)

    @Test("setValue shows a value set locally, fresh; restore puts back exactly what was held")
    func setValue_andRestore() async throws {
        let queries = client()
        let remote = LoaderSpy<Void, [Item]>(.success([itemA]))
        let query = list(queries, remote)
        try await query.fetch()
        let before = query.current
        let point = try #require(query.setValue { ($0 ?? []) + [itemB] })
        #expect(point.value == [itemA])
        #expect(queries.value(for: ["items"], as: [Item].self) == [itemA, itemB])
        #expect(query.current.provenance?.isSetLocally == true)
        #expect(query.current.isStale == false)
        #expect(query.restore(point))
        let after = query.current
        #expect(after.value == before.value && after.provenance == before.provenance && after.storedAt == before.storedAt)
        #expect(!query.restore(point), "a second restore has nothing to undo")
    }

    @Test("a value set for a key with no query waits for it: the query starts with it, fresh from when it was set")
    func setValue_forAKeyWithoutAQuery_seedsIt() async throws {
        let queries = client()
        #expect(queries.setValue(for: ["post", 1], as: Item.self) { _ in itemA } == nil)
        clock.advance(by: .seconds(10))
        let remote = LoaderSpy<Void, Item>(.success(itemB))
        let post = queries.query(["post", 1], policy: QueryPolicy(staleAfter: .seconds(60)), chain: remote)
        #expect(post.current.value == itemA)
        #expect(post.current.provenance?.isSetLocally == true)
        #expect(post.current.storedAt == clock.date.addingTimeInterval(-10))
        #expect(try await post.ensureValue() == itemA)
        #expect(remote.loadCount == 0, "fresh: the detail screen opens without a load")
    }

    @Test("an invalidation that stands survives a value set locally: the next observer refetches")
    func setValue_keepsAnInvalidationStanding() async throws {
        let queries = client()
        let remote = LoaderSpy<Void, [Item]>(.success([itemA]), .success([itemB]))
        let query = list(queries, remote)
        try await query.fetch()
        queries.invalidate(prefix: ["items"])
        query.setValue { _ in [itemA, itemA] }
        #expect(query.current.isStale)
        #expect(try await query.ensureValue() == [itemB])
    }

    // MARK: mutations

    @Test("a mutation shows its optimistic value at once, and a failure rolls it back to exactly what was held")
    func mutation_optimisticThenRollback() async throws {
        let queries = client()
        let remote = LoaderSpy<Void, [Item]>(.success([itemA]))
        let query = list(queries, remote)
        try await query.fetch()
        let before = query.current
        let gate = LoaderSpy<Item, Item>(.failure(TestError()), holdsLoads: true)
        let add = queries.mutation(
            optimistic: [.setting(["items"], as: [Item].self) { items, new in (items ?? []) + [new] }],
            invalidates: [["items"]],
            perform: { (item: Item) in try await gate.load(item) })
        let call = Task { try await add.mutate(itemB) }
        try await gate.waitForLoads(count: 1)
        #expect(query.current.value == [itemA, itemB])
        #expect(add.current.isPending && add.current.variables == itemB)
        gate.complete(0, with: .failure(TestError()))
        await #expect(throws: TestError.self) { try await call.value }
        let after = query.current
        #expect(after.value == before.value && after.provenance == before.provenance && after.storedAt == before.storedAt)
        #expect(add.current.status == .failed)
        #expect(add.current.error?.type == "TestError")
        #expect(remote.loadCount == 1, "a failure invalidates nothing")
        add.reset()
        #expect(add.current.status == .idle && add.current.error == nil)
    }

    @Test("a mutation that succeeds invalidates what it names: the observed query refetches the server's copy")
    func mutation_successInvalidates() async throws {
        let queries = client()
        let remote = LoaderSpy<Void, [Item]>(.success([itemA]), .success([itemA, itemB]))
        let query = list(queries, remote)
        let observer = Task { for await _ in query.snapshots() {} }
        defer { observer.cancel() }
        try await query.settled()
        let add = queries.mutation(
            optimistic: [.setting(["items"], as: [Item].self) { items, new in (items ?? []) + [new] }],
            invalidates: [["items"]],
            perform: { (item: Item) in item.id })
        let outcome = try await add.mutate(itemB)
        #expect(outcome.output == 2)
        #expect(add.current.status == .succeeded && add.current.data == 2)
        try await query.settled()
        #expect(query.current.value == [itemA, itemB])
        #expect(query.current.provenance?.isSetLocally == false)
        #expect(remote.loadCount == 2)
    }

    @Test("offline, a mutation hands its write to the outbox: the pending write shows it, the optimistic value goes")
    func mutation_offlineGoesToTheOutbox() async throws {
        let queries = client(online: false)
        let outbox = Outbox(storage: MemoryOutboxStorage(), environment: clock.environment())
        let remote = LoaderSpy<Void, [Item]>(.success([itemA]))
        let query = queries.query(
            ["items"], policy: QueryPolicy(staleAfter: .seconds(3600), networkMode: .always),
            pendingWrites: PendingWrites(outbox, scope: "items") { pending, items in
                let shown = Set(items.map(\.id))
                return items + pending.compactMap { try? JSONDecoder().decode(Item.self, from: $0.payload) }.filter { !shown.contains($0.id) }
            },
            chain: remote)
        try await query.fetch()
        let add = queries.mutation(
            optimistic: [.setting(["items"], as: [Item].self) { items, new in (items ?? []) + [new] }],
            whenOffline: { (item: Item) in try await outbox.enqueue(item, kind: "item", scope: "items") },
            perform: { (item: Item) -> Int in Issue.record("performed offline"); return item.id })
        let outcome = try await add.mutate(itemB)
        guard case .queued(let entry) = outcome else { Issue.record("not queued: \(outcome)"); return }
        #expect(add.current.status == .queued && add.current.queued?.id == entry.id)
        // The outbox told the query before `enqueue` returned.
        #expect(query.current.pendingWrites == 1)
        #expect(query.current.value == [itemA, itemB])
        #expect(query.current.provenance?.isSetLocally == false, "the pending write shows it, not the optimistic value")
    }

    @Test("two calls: the state follows the latest, and the first call's late failure does not show")
    func mutation_followsTheLatestCall() async throws {
        let queries = client()
        let gate = LoaderSpy<Int, Int>(.success(1), .success(2), holdsLoads: true)
        let m = queries.mutation(perform: { (n: Int) in try await gate.load(n) })
        let first = Task { try await m.mutate(1) }
        try await gate.waitForLoads(count: 1)
        let second = Task { try await m.mutate(2) }
        try await gate.waitForLoads(count: 2)
        gate.complete(1, with: .success(20))
        _ = try await second.value
        gate.complete(0, with: .failure(TestError()))
        _ = try? await first.value
        #expect(m.current.status == .succeeded && m.current.data == 20 && m.current.variables == 2)
    }

    @Test("a LiveMutation shows isPending, then the error")
    @MainActor
    func liveMutation_showsItsState() async throws {
        let queries = client()
        let gate = LoaderSpy<Int, Int>(.failure(TestError()), holdsLoads: true)
        let live = queries.mutation(perform: { (n: Int) in try await gate.load(n) }).observed()
        let renders = FieldObserver(name: "isPending") { _ = live.isPending }
        let call = Task { try await live.mutate(1) }
        try await gate.waitForLoads(count: 1)
        try await live.waitUntilCaughtUp()
        #expect(live.isPending && live.variables == 1)
        gate.complete(0, with: .failure(TestError()))
        _ = try? await call.value
        try await live.waitUntilCaughtUp()
        #expect(live.status == .failed && !live.isPending && live.error?.type == "TestError")
        #expect(renders.count == 2, "pending, then failed")
    }

    @Test("two calls that overlap and fail: nothing optimistic stays; the query is asked for the source's copy")
    func overlappingMutationsFailing_leaveNoOptimisticValue() async throws {
        let queries = client()
        let remote = LoaderSpy<Void, [Item]>(.success([itemA]))
        let query = list(queries, remote)
        let observer = Task { for await _ in query.snapshots() {} }
        defer { observer.cancel() }
        try await query.waitForObservers(1)
        try await query.settled()
        let gate = LoaderSpy<Item, Item>(.failure(TestError()), holdsLoads: true)
        let add = queries.mutation(
            optimistic: [.setting(["items"], as: [Item].self) { items, new in (items ?? []) + [new] }],
            perform: { (item: Item) in try await gate.load(item) })
        let first = Task { try await add.mutate(itemB) }
        try await gate.waitForLoads(count: 1)
        let second = Task { try await add.mutate(Item(id: 3, name: "c")) }
        try await gate.waitForLoads(count: 2)
        #expect(query.current.value?.count == 3)
        // The first fails first: its value sits under the second's, so the query is invalidated.
        gate.complete(0, with: .failure(TestError()))
        _ = try? await first.value
        gate.complete(1, with: .failure(TestError()))
        _ = try? await second.value
        try await query.settled()
        #expect(query.current.value == [itemA])
        #expect(query.current.provenance?.isSetLocally == false)
        // The source's copy was asked for once the first restore could not be; the second restore
        // is refused too if that answer came first (it then asks again).
        #expect(remote.loadCount >= 2)
    }

    @Test("ensureValue on a fresh value does not wait for a page paused offline")
    func ensureValue_doesNotWaitForAnotherFlight() async throws {
        let queries = QueryClient(environment: clock.environment(), online: true)
        let server = QueryPagesTests.FeedServer(pageCount: 3)
        let feed = queries.pagedQuery(
            ["feed"], policy: QueryPolicy(staleAfter: .seconds(3600), networkMode: .online),
            paging: Paging(firstCursor: 0) { $0.next }, page: server)
        _ = try await feed.ensureValue()
        queries.setOnline(false)
        feed.fetchNextPage()
        #expect(feed.current.phase == .paused(.offline))
        #expect(try await feed.ensureValue().pages.count == 1, "fresh: returned at once")
    }

    @Test("a selection hears of a failed first load: its status and error follow the query")
    func aSelection_hearsOfAFailure() async throws {
        let queries = client()
        let remote = LoaderSpy<Void, [Item]>(.failure(TestError()))
        let query = list(queries, remote)
        var iterator = query.snapshots(select: { $0.count }).makeAsyncIterator()
        var last = await iterator.next()
        while last?.status != .failed { last = await iterator.next() }
        #expect(last?.lastError?.type == "TestError")
        #expect(last?.value == nil)
    }

    @Test("a query dropped while the app went to the background learns it when it wakes")
    func aDroppedQuery_learnsTheBackgroundWhenItWakes() async throws {
        let queries = client()
        let remote = LoaderSpy<Void, [Item]>(.success([itemA]))
        let query = queries.query(["items"], policy: QueryPolicy(staleAfter: .seconds(3600), dropAfter: .seconds(1)), chain: remote)
        try await query.fetch()
        try await clock.waitForSleepers(matching: { $0.since.duration(to: $0.deadline) == .seconds(1) })
        clock.advance(by: .seconds(1))
        try await queries.waitForQueries(0)
        queries.enteredBackground()
        query.prefetch()   // used again: it wakes
        #expect(query.state.withLock { $0.machine.isInForeground } == false)
    }

    @Test("an invalidation lets go of a value waiting for its query")
    func anInvalidation_letsGoOfAWaitingValue() async throws {
        let queries = client()
        queries.setValue(for: ["user", 1], as: Item.self) { _ in itemA }
        queries.invalidate(prefix: ["user"])
        let user = queries.query(["user", 1], chain: LoaderSpy<Void, Item>(.success(itemB)))
        #expect(user.current.value == nil)
    }

    // MARK: intervals

    @Test("an interval that fires whatever the staleness refetches a fresh value, and pauses in the background")
    func interval_whenFresh_pausedInTheBackground() async throws {
        let queries = client()
        let remote = LoaderSpy<Void, [Item]>(.success([itemA]), .success([itemA]), .success([itemA]))
        let query = queries.query(
            ["items"], policy: QueryPolicy(staleAfter: .seconds(3600), refetchInterval: .seconds(10), refetchIntervalWhenFresh: true),
            chain: remote)
        let observer = Task { for await _ in query.snapshots() {} }
        defer { observer.cancel() }
        try await query.settled()
        try await clock.waitForSleepers(matching: { $0.since.duration(to: $0.deadline) == .seconds(10) })
        clock.advance(by: .seconds(10))
        try await remote.waitForLoads(count: 2)
        try await query.settled()
        queries.enteredBackground()
        // The interval's task is cancelled by the signal itself: no sleeper is left to tick.
        #expect(!clock.sleepers.contains { $0.since.duration(to: $0.deadline) == .seconds(10) })
        clock.advance(by: .seconds(60))
        try await query.settled()
        #expect(remote.loadCount == 2)
        queries.enteredForeground()
        try await clock.waitForSleepers(matching: { $0.since.duration(to: $0.deadline) == .seconds(10) })
        clock.advance(by: .seconds(10))
        try await remote.waitForLoads(count: 3)
    }
}

extension Query {
    /// The foreground signal for this query alone (a test's).
    func enteredForegroundForTest(_ client: QueryClient) { cameToForeground() }
}

