import Foundation
import Testing
@testable @_spi(StrataInternals) import Strata
@testable import StrataOutbox
@testable import StrataQueries
import StrataTesting

/// Live queries and the outbox: pending writes shown in the value, rolled back only when refused
/// for good, and delivery invalidating what a write names. The outbox keeps its entries in real
/// files; time is a manual clock.
@Suite("QueryClient and Outbox: pending writes on live queries", .timeLimit(.minutes(1)))
struct QueryWritesTests {
    let clock = ManualClock()
    let directory: TemporaryDirectory
    /// What the server holds: the writes it accepted.
    let server = Locked<[Item]>([itemA])
    /// How the server answers the next write.
    let answer = Locked<Answer>(.accept)

    enum Answer: Sendable {
        case accept
        /// The server cannot be reached: retried after a backoff.
        case unreachable
        /// Refused for good: parked.
        case refuse
    }

    struct Refused: Error {}

    init() throws {
        directory = try TemporaryDirectory(prefix: "strata-query-writes")
        queries = QueryClient(environment: clock.environment())
    }

    /// An outbox over real files whose "post" handler stores the write on the server, or fails as
    /// `answer` says; retries wait 10 s (no jitter).
    func outbox() -> Outbox {
        let outbox = Outbox(
            storage: FileOutboxStorage(directory: directory.url), environment: clock.environment(),
            retry: OutboxRetryPolicy(initialDelay: .seconds(10), jitter: 0, random: { 0 }))
        outbox.register("post", as: Item.self) { [server, answer] item, _ in
            switch answer.withLock({ $0 }) {
            case .accept:
                server.withLock { $0.append(item) }
                return .delivered
            case .unreachable:
                throw HTTPError.transport(url: URL(string: "https://api.example.com/posts")!, reason: "connection refused", underlying: nil)
            case .refuse:
                throw Refused()
            }
        }
        return outbox
    }

    /// The feed with the outbox's writes of scope "posts" applied (each item once).
    func pendingPosts(_ outbox: Outbox) -> PendingWrites<[Item]> {
        PendingWrites(outbox, scope: "posts") { pending, items in
            let shown = Set(items.map(\.id))
            return items + pending.compactMap { try? $0.decoded(Item.self) }.filter { !shown.contains($0.id) }
        }
    }

    /// The app's client: kept for the test's length, as an app keeps it (a client that is gone
    /// follows no outbox).
    let queries: QueryClient

    func client() -> QueryClient { queries }

    /// What a test compares of a snapshot: the items' ids, the writes shown, the phase.
    struct Frame: Equatable, CustomStringConvertible {
        var ids: [Int]?
        var pending: Int
        var phase: QueryPhase
        init(_ ids: [Int]?, _ pending: Int, _ phase: QueryPhase) {
            self.ids = ids
            self.pending = pending
            self.phase = phase
        }
        init(_ snapshot: QuerySnapshot<[Item]>) {
            self.init(snapshot.value?.map(\.id), snapshot.pendingWrites, snapshot.phase)
        }
        var description: String { "\(ids.map { "\($0)" } ?? "nil") pending \(pending) \(phase)" }
    }

    /// Reads `stream` until `count` snapshots have come.
    func take(_ count: Int, from stream: inout QuerySnapshots<[Item]>.AsyncIterator) async -> [Frame] {
        var frames: [Frame] = []
        while frames.count < count, let snapshot = await stream.next() { frames.append(Frame(snapshot)) }
        return frames
    }

    @Test("a queued write shows at once, without a load; delivered, it stays until the refetch it caused answers")
    func aQueuedWriteShowsAtOnce_andStaysUntilTheServersCopyHasIt() async throws {
        let outbox = outbox()
        let remote = LoaderSpy<Void, [Item]>(.success([itemA]), holdsLoads: true)
        let query = client().query(["feed"], pendingWrites: pendingPosts(outbox), chain: remote)
        var stream = query.snapshots().makeAsyncIterator()
        try await remote.waitForLoads(count: 1)
        remote.complete(0, with: .success(server.withLock { $0 }))
        try await query.settled()

        outbox.connectivityChanged(isOnline: false)
        try await outbox.enqueue(itemB, kind: "post", scope: "posts")
        // Shown before `enqueue` returned, and nothing was loaded for it.
        #expect(query.current.value == [itemA, itemB])
        #expect(query.current.pendingWrites == 1)
        #expect(remote.loadCount == 1)

        outbox.connectivityChanged(isOnline: true)
        #expect(try await outbox.drain().delivered == 1)
        // Delivered: the query refetches (its write named nothing; it showed the write), and
        // shows the write meanwhile.
        try await remote.waitForLoads(count: 2)
        #expect(query.current.value == [itemA, itemB])
        remote.complete(1, with: .success(server.withLock { $0 }))
        try await query.settled()

        let frames = await take(5, from: &stream)
        #expect(frames == [
            Frame(nil, 0, .fetching(.firstObserver)),
            Frame([1], 0, .idle),
            Frame([1, 2], 1, .idle),
            Frame([1, 2], 1, .fetching(.invalidated)),
            Frame([1, 2], 0, .idle),
        ])
        #expect(remote.loadCount == 2)
    }

    @Test("a write another process queued into the shared outbox reaches the screen when the app is told, and leaves it once delivered there")
    func aWriteQueuedElsewhere_reachesTheScreen() async throws {
        let app = outbox()
        let extensionOutbox = outbox()  // the share extension's, on the same files
        let remote = LoaderSpy<Void, [Item]>(.success([itemA]), holdsLoads: true)
        let query = client().query(["feed"], pendingWrites: pendingPosts(app), chain: remote)
        var stream = query.snapshots().makeAsyncIterator()
        try await remote.waitForLoads(count: 1)
        remote.complete(0, with: .success(server.withLock { $0 }))
        try await query.settled()

        extensionOutbox.connectivityChanged(isOnline: false)
        try await extensionOutbox.enqueue(itemB, kind: "post", scope: "posts")
        #expect(query.current.value == [itemA], "not told yet")
        try await app.storageChangedElsewhere()
        #expect(query.current.value == [itemA, itemB])
        #expect(query.current.pendingWrites == 1)
        #expect(try await app.entries().map(\.scope) == ["posts"])

        // The extension delivers it; told again, the app drops the pending write and refetches.
        extensionOutbox.connectivityChanged(isOnline: true)
        #expect(try await extensionOutbox.drain().delivered == 1)
        try await app.storageChangedElsewhere()
        #expect(try await app.entries().isEmpty)
        try await remote.waitForLoads(count: 2)
        remote.complete(1, with: .success(server.withLock { $0 }))
        try await query.settled()
        #expect(query.current.value == [itemA, itemB])
        #expect(query.current.pendingWrites == 0)
        let frames = await take(4, from: &stream)
        #expect(frames.map(\.pending) == [0, 0, 1, 1])
        #expect(server.withLock { $0 } == [itemA, itemB], "sent once, by the extension")
    }

    @Test("a refetch that falls back to the copy stored before a delivery keeps the delivered write shown, and the query stale")
    func aStaleFallback_keepsTheDeliveredWrite_andTheInvalidation() async throws {
        let outbox = outbox()
        let store = MemoryStore<String, [Item]>()
        let remote = LoaderSpy<Void, [Item]>(.success([itemA]), .failure(TestError()))
        // The server's copy, written through; any copy when the server cannot answer.
        let chain = remote.originating(from: .remote).writingThrough(in: store, key: "feed").named("remote")
            .fallingBack(to: store.loader(key: "feed").named("stale local"))
        let query = client().query(["feed"], policy: QueryPolicy(staleAfter: .minutes(5)), pendingWrites: pendingPosts(outbox), chain: chain)
        let observing = Task { for await _ in query.snapshots() {} }
        defer { observing.cancel() }
        try await query.waitForObservers(1)
        try await query.settled()
        #expect(query.current.value?.map(\.id) == [1])

        clock.advance(by: .seconds(1))
        try await outbox.enqueue(itemB, kind: "post", scope: "posts")
        #expect(try await outbox.drain().delivered == 1)
        try await remote.waitForLoads(count: 2)
        try await query.settled()
        // The refetch the delivery caused failed at the server and fell back to the copy stored
        // before the delivery: that copy cannot hold the post.
        #expect(query.current.provenance?.tier == "stale local")
        #expect(query.current.value?.map(\.id) == [1, 2], "the delivered post stays shown")
        #expect(query.current.isStale, "the invalidation stands until a copy stored after it answers")
    }

    @Test("two writes that keep failing both stay shown; refused for good, only that one rolls back")
    func failingWritesKeepTheirOverlays_untilRefusedForGood() async throws {
        let outbox = outbox()
        let query = client().query(["feed"], pendingWrites: pendingPosts(outbox), chain: StubLoader<Void, [Item]>(.success([itemA])))
        var stream = query.snapshots().makeAsyncIterator()
        try await query.settled()
        let first = try await outbox.enqueue(Item(id: 10, name: "first"), kind: "post", scope: "posts")
        try await outbox.enqueue(Item(id: 11, name: "second"), kind: "post", scope: "posts")
        #expect(query.current.value?.map(\.id) == [1, 10, 11])

        answer.withLock { $0 = .unreachable }
        _ = try await outbox.drain()
        clock.advance(by: .seconds(10))
        _ = try await outbox.drain()
        #expect(try await outbox.entry(first.id)?.attempts == 2)
        #expect(query.current.value?.map(\.id) == [1, 10, 11])
        #expect(query.current.pendingWrites == 2)

        // Both refused for good, one after the other: each rolls back as it is parked.
        answer.withLock { $0 = .refuse }
        clock.advance(by: .seconds(20))
        #expect(try await outbox.drain().parked == 2)
        #expect(query.current.value?.map(\.id) == [1])

        // A dead letter retried is shown again.
        answer.withLock { $0 = .unreachable }
        try await outbox.retry(first.id)
        #expect(query.current.value?.map(\.id) == [1, 10])
        let frames = await take(7, from: &stream)
        #expect(frames.map(\.ids) == [nil, [1], [1, 10], [1, 10, 11], [1, 11], [1], [1, 10]])
        #expect(frames.map(\.pending) == [0, 0, 1, 2, 1, 0, 1])
    }

    @Test("refused for good while a second write waits: only the refused one rolls back")
    func aRefusedWriteRollsBackAlone() async throws {
        let outbox = outbox()
        let query = client().query(["feed"], pendingWrites: pendingPosts(outbox), chain: StubLoader<Void, [Item]>(.success([itemA])))
        let observing = Task { for await _ in query.snapshots() {} }
        defer { observing.cancel() }
        try await query.settled()
        let first = try await outbox.enqueue(Item(id: 10, name: "first"), kind: "post", scope: "posts")
        let second = try await outbox.enqueue(Item(id: 11, name: "second"), kind: "post", scope: "posts")
        // The server refuses the first for good and cannot be reached for the second.
        outbox.register("post", as: Item.self) { item, _ in
            if item.id == 10 { throw Refused() }
            throw HTTPError.transport(url: URL(string: "https://api.example.com/posts")!, reason: "connection refused", underlying: nil)
        }
        let report = try await outbox.drain()
        #expect(report.parked == 1 && report.deferred == 1)
        #expect(try await outbox.entry(first.id)?.deadLetter != nil)
        #expect(try await outbox.entry(second.id)?.isPending == true)
        #expect(query.current.value?.map(\.id) == [1, 11])
        #expect(query.current.pendingWrites == 1)
    }

    @Test("delivery invalidates what the write names: observed queries refetch once each, unobserved ones only go stale")
    func deliveryInvalidatesTheKeysAndTagsItNames() async throws {
        let outbox = outbox()
        queries.follow(outbox)
        let user1 = LoaderSpy<Void, [Item]>(.success([itemA]))
        let user2 = LoaderSpy<Void, [Item]>(.success([itemA]))
        let profile = LoaderSpy<Void, [Item]>(.success([itemA]))
        let other = LoaderSpy<Void, [Item]>(.success([itemA]))
        let policy = QueryPolicy(staleAfter: .minutes(5))
        let observed = [
            queries.query(["users", 1], policy: policy, chain: user1),
            queries.query(["me"], tags: ["profile"], policy: policy, chain: profile),
            queries.query(["usersArchive"], policy: policy, chain: other),
        ]
        let unobserved = queries.query(["users", 2], policy: policy, chain: user2)
        let observers = observed.map { query in Task { for await _ in query.snapshots() {} } }
        defer { observers.forEach { $0.cancel() } }
        for query in observed { try await query.waitForObservers(1) }
        for query in observed { try await query.settled() }
        #expect([user1, profile, other].map(\.loadCount) == [1, 1, 1])

        try await outbox.enqueue(itemB, kind: "post", scope: "posts", invalidates: ["users", "profile"])
        #expect(try await outbox.drain().delivered == 1)
        for query in observed { try await query.settled() }
        #expect(user1.loadCount == 2)
        #expect(profile.loadCount == 2)
        #expect(other.loadCount == 1)
        #expect(user2.loadCount == 0)
        #expect(unobserved.current.isStale)
        #expect(!observed[2].current.isStale)
    }

    @Test("a relaunched app's outbox shows the writes an earlier process queued")
    func aRelaunchedOutboxShowsItsWrites() async throws {
        let earlier = outbox()
        earlier.connectivityChanged(isOnline: false)
        try await earlier.enqueue(itemB, kind: "post", scope: "posts")

        let relaunched = outbox()
        relaunched.connectivityChanged(isOnline: false)
        let query = client().query(["feed"], pendingWrites: pendingPosts(relaunched), chain: StubLoader<Void, [Item]>(.success([itemA])))
        var shown: [Int]?
        for await snapshot in query.snapshots() where snapshot.pendingWrites == 1 {
            shown = snapshot.value?.map(\.id)
            break
        }
        #expect(shown == [1, 2])
    }

    @Test("a write delivered while a load runs restarts it, and stays shown until the restarted load answers")
    func aWriteDeliveredDuringALoad_staysUntilALaterLoad() async throws {
        let outbox = outbox()
        let remote = LoaderSpy<Void, [Item]>(.success([itemA]), holdsLoads: true)
        let query = client().query(["feed"], pendingWrites: pendingPosts(outbox), chain: remote)
        let observing = Task { for await _ in query.snapshots() {} }
        defer { observing.cancel() }
        try await remote.waitForLoads(count: 1)
        remote.complete(0, with: .success([itemA]))
        try await query.settled()

        query.refetch()
        try await remote.waitForLoads(count: 2)
        outbox.connectivityChanged(isOnline: false)
        try await outbox.enqueue(itemB, kind: "post", scope: "posts")
        outbox.connectivityChanged(isOnline: true)
        _ = try await outbox.drain()
        // The load asked before the delivery was restarted by the delivery's invalidation.
        try await remote.waitForLoads(count: 3)
        // The first was cancelled, so no answer of it can come (late answers of abandoned loads
        // are the state machine's seeded interleavings' to check).
        #expect(remote.cancelledLoadCount == 1)
        #expect(!remote.complete(1, with: .success([itemA])), "nothing left to answer")
        #expect(query.current.value == [itemA, itemB])
        #expect(query.current.pendingWrites == 1)
        #expect(query.current.phase == .fetching(.invalidated))
        remote.complete(2, with: .success([itemA]))   // a server copy without the write (a lagging replica)
        try await query.settled()
        // The answer came from a load started after the delivery: the server's copy is the truth.
        #expect(query.current.value == [itemA])
        #expect(query.current.pendingWrites == 0)
    }

    @Test("a dropped query with a pending write, used again while an inspector follows, wakes showing the write")
    func aDroppedQueryWithAPendingWrite_wakesShowingIt() async throws {
        let outbox = outbox()
        outbox.connectivityChanged(isOnline: false)
        let cache = MemoryStore<String, [Item]>()
        try await cache.insert([itemA], for: "feed", storedAt: clock.date)
        let remote = LoaderSpy<Void, [Item]>(.success([itemA]), holdsLoads: true)
        let following = queries.changes()   // an inspector's page is open
        let held = queries.query(
            ["feed"], policy: QueryPolicy(staleAfter: .seconds(600), dropAfter: .seconds(300)),
            cached: cache.loader(key: "feed"), pendingWrites: pendingPosts(outbox), chain: remote)
        try await outbox.enqueue(itemB, kind: "post", scope: "posts")
        try await clock.waitForSleepers(matching: { $0.since.duration(to: $0.deadline) == .seconds(300) })
        clock.advance(by: .seconds(300))
        try await queries.waitForQueries(0)

        // Used again: it wakes, its cached value comes back at once with the write the client
        // reports to it (under the client's lock, as the query publishes and records).
        #expect(held.current.value == [itemA, itemB])
        #expect(held.current.pendingWrites == 1)
        #expect(queries.keys == [["feed"]])
        _ = following
    }

}
