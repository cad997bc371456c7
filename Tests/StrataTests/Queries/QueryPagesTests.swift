import Foundation
import Testing
@testable @_spi(StrataInternals) import Strata
@testable import StrataOutbox
@testable import StrataQueries
import StrataTesting

/// Paged queries (a feed): one entry holding its pages, `fetchNextPage()`, what a refetch reloads,
/// `maxPages`, and the pages kept in a real file store across a relaunch.
@Suite("QueryClient.pagedQuery: a feed as one entry of pages", .timeLimit(.minutes(1)))
struct QueryPagesTests {
    let clock = ManualClock()

    /// One page of the feed: its items and the cursor of the next page.
    struct FeedPage: Codable, Equatable, Sendable {
        var items: [Int]
        var next: Int?
    }

    /// A feed of `pageCount` pages of three items each (page `n` holds 3n ..< 3n+3); `version`
    /// is added to every item, so a test can tell a reloaded page from the one shown before.
    final class FeedServer: Loader, Sendable {
        let pageCount: Int
        private let state = Locked((requests: [Int](), version: 0))

        init(pageCount: Int) { self.pageCount = pageCount }

        var requests: [Int] { state.withLock { $0.requests } }
        func publishNewVersion() { state.withLock { $0.version += 100 } }

        func load(_ cursor: Int) async throws -> FeedPage {
            try await load(cursor, in: .current)
        }

        func load(_ cursor: Int, in context: LoadContext) async throws -> FeedPage {
            let version = state.withLock { state in
                state.requests.append(cursor)
                return state.version
            }
            return FeedPage(items: (3 * cursor ..< 3 * cursor + 3).map { $0 + version }, next: cursor + 1 < pageCount ? cursor + 1 : nil)
        }
    }

    typealias Feed = Pages<FeedPage, Int>

    func paging(maxPages: Int? = nil, refetch: Paging<FeedPage, Int>.Refetch = .firstPage) -> Paging<FeedPage, Int> {
        Paging(firstCursor: 0, maxPages: maxPages, refetch: refetch) { $0.next }
    }

    /// Observes `query` until `predicate` holds for a snapshot; returns that snapshot.
    func first(_ query: Query<Feed>, where predicate: (QuerySnapshot<Feed>) -> Bool) async -> QuerySnapshot<Feed>? {
        for await snapshot in query.snapshots() where predicate(snapshot) { return snapshot }
        return nil
    }

    /// A client with the paged query `["feed"]` over `server`, observed by a task of its own (cancel
    /// it when done), its first page loaded.
    func observedFeed(_ server: FeedServer, paging: Paging<FeedPage, Int>) async throws -> (QueryClient, Query<Feed>, Task<Void, Never>) {
        let queries = QueryClient(environment: clock.environment())
        let feed = queries.pagedQuery(["feed"], paging: paging, page: server)
        let observing = Task { for await _ in feed.snapshots() {} }
        try await feed.waitForObservers(1)
        try await feed.settled()
        return (queries, feed, observing)
    }

    @Test("the first load is the first page; fetchNextPage appends the next, until the last")
    func fetchNextPage_appendsUntilTheEnd() async throws {
        let server = FeedServer(pageCount: 3)
        let (_, feed, observing) = try await observedFeed(server, paging: paging())
        defer { observing.cancel() }
        #expect(feed.current.value?.all == [0, 1, 2])
        #expect(feed.current.value?.hasNextPage == true)

        feed.fetchNextPage()
        #expect(feed.current.phase == .fetching(.nextPage))
        try await feed.settled()
        feed.fetchNextPage()
        try await feed.settled()
        #expect(feed.current.value?.all == Array(0..<9))
        #expect(feed.current.value?.cursors == [0, 1, 2])
        #expect(feed.current.value?.hasNextPage == false)

        feed.fetchNextPage()   // the end: nothing to load
        try await feed.settled()
        #expect(server.requests == [0, 1, 2])
        #expect(feed.current.lastFetchReason == .nextPage)
    }

    @Test("fetchNextPage while a load runs is not a second load; a refetch then reloads the first page instead")
    func fetchNextPage_whileALoadRuns_isIgnored_andARefetchTakesOver() async throws {
        let page = LoaderSpy<Int, FeedPage>(.success(FeedPage(items: [1], next: 1)), holdsLoads: true)
        let queries = QueryClient(environment: clock.environment())
        let feed = queries.pagedQuery(["feed"], paging: paging(), page: page)
        let observing = Task { for await _ in feed.snapshots() {} }
        defer { observing.cancel() }
        try await page.waitForLoads(count: 1)
        feed.fetchNextPage()   // no value yet
        page.complete(0, with: .success(FeedPage(items: [1], next: 1)))
        try await feed.settled()
        feed.fetchNextPage()
        try await page.waitForLoads(count: 2)
        feed.fetchNextPage()   // the next page is on its way
        #expect(page.inputs == [0, 1])
        page.complete(1, with: .success(FeedPage(items: [2], next: 2)))
        try await feed.settled()
        #expect(feed.current.value?.all == [1, 2])

        // A refetch while a next page loads: the first page is what a refetch reloads.
        feed.fetchNextPage()
        try await page.waitForLoads(count: 3)
        feed.refetch()
        try await page.waitForLoads(count: 4)
        #expect(page.inputs == [0, 1, 2, 0])
        page.complete(2, with: .success(FeedPage(items: [3], next: nil)))   // abandoned: ignored
        page.complete(3, with: .success(FeedPage(items: [10], next: 1)))
        try await feed.settled()
        #expect(feed.current.value?.all == [10])
        #expect(feed.current.lastFetchReason == .refetch)
    }

    @Test("an invalidation reloads the first page only, by default")
    func invalidation_reloadsTheFirstPage() async throws {
        let server = FeedServer(pageCount: 5)
        let (queries, feed, observing) = try await observedFeed(server, paging: paging())
        defer { observing.cancel() }
        feed.fetchNextPage()
        try await feed.settled()
        server.publishNewVersion()

        queries.invalidate(prefix: ["feed"])
        try await feed.settled()
        #expect(server.requests == [0, 1, 0])
        #expect(feed.current.value?.all == [100, 101, 102])
        #expect(feed.current.value?.nextCursor == 1)
    }

    @Test("refetching all pages reloads as many as are shown, from the first held, within maxPages",
          arguments: [(shown: 3, maxPages: nil as Int?, reloaded: [0, 1, 2]), (shown: 4, maxPages: 2, reloaded: [2, 3])])
    func refetchAllPages_reloadsAsManyAsShown(shown: Int, maxPages: Int?, reloaded: [Int]) async throws {
        let server = FeedServer(pageCount: 10)
        let (_, feed, observing) = try await observedFeed(server, paging: paging(maxPages: maxPages, refetch: .allPages))
        defer { observing.cancel() }
        for _ in 1..<shown {
            feed.fetchNextPage()
            try await feed.settled()
        }
        let before = server.requests.count
        #expect(feed.current.value?.pages.count == min(shown, maxPages ?? shown))
        server.publishNewVersion()

        feed.invalidate()
        try await feed.settled()
        #expect(Array(server.requests.dropFirst(before)) == reloaded)
        #expect(feed.current.value?.cursors == reloaded)
        #expect(feed.current.value?.all.allSatisfy { $0 >= 100 } == true)
    }

    @Test("maxPages keeps the newest pages")
    func maxPages_keepsTheNewestPages() async throws {
        let server = FeedServer(pageCount: 10)
        let (_, feed, observing) = try await observedFeed(server, paging: paging(maxPages: 2))
        defer { observing.cancel() }
        for _ in 0..<3 {
            feed.fetchNextPage()
            try await feed.settled()
        }
        #expect(feed.current.value?.cursors == [2, 3])
        #expect(feed.current.value?.all == Array(6..<12))
        #expect(feed.current.value?.nextCursor == 4)
    }

    @Test("the pages are kept in the store: a relaunch shows them before the first page answers, then reloads")
    func pagesPersist_andARelaunchShowsThemFirst() async throws {
        let directory = try TemporaryDirectory(prefix: "strata-pages")
        let server = FeedServer(pageCount: 5)
        do {
            let queries = QueryClient(environment: clock.environment())
            let feed = queries.pagedQuery(
                ["feed"], paging: paging(), store: FileStore<Feed>(directory: directory.url), page: server)
            let observing = Task { for await _ in feed.snapshots() {} }
            defer { observing.cancel() }
            try await feed.waitForObservers(1)
            try await feed.settled()
            feed.fetchNextPage()
            try await feed.settled()
        }
        #expect(server.requests == [0, 1])

        // A new process: a new client over the same files. The stored pages come first (a disk
        // read, any age), then the first page from the server.
        let page = LoaderSpy<Int, FeedPage>(.success(FeedPage(items: [42], next: nil)), holdsLoads: true)
        let queries = QueryClient(environment: clock.environment())
        let feed = queries.pagedQuery(
            ["feed"], policy: QueryPolicy(staleAfter: .minutes(5)), paging: paging(),
            store: FileStore<Feed>(directory: directory.url), page: page)
        let observing = Task { for await _ in feed.snapshots() {} }
        defer { observing.cancel() }
        let stored = await first(feed) { $0.value != nil }
        #expect(stored?.value?.all == Array(0..<6))
        #expect(stored?.isFetching == true)
        try await page.waitForLoads(count: 1)
        page.complete(0, with: .success(FeedPage(items: [42], next: nil)))
        try await feed.settled()
        #expect(feed.current.value?.all == [42])
        #expect(feed.current.phase == .idle)
        #expect(try await FileStore<Feed>(directory: directory.url).retrieve("feed")?.value.all == [42])
    }

    @Test("a paged feed shows an outbox's pending post on its first page; the next page and the stored pages never hold it")
    func pendingWrites_showOnTheFirstPage_andAreNeverStoredOrPaged() async throws {
        let directory = try TemporaryDirectory(prefix: "strata-pages-writes")
        let server = FeedServer(pageCount: 3)
        let outbox = Outbox(storage: FileOutboxStorage(directory: directory.appending("outbox")), environment: clock.environment())
        outbox.register("post", as: Int.self) { _, _ in .delivered }
        outbox.connectivityChanged(isOnline: false)
        let store = FileStore<Feed>(directory: directory.appending("pages"))
        let queries = QueryClient(environment: clock.environment())
        let feed = queries.pagedQuery(
            ["feed"], paging: paging(), store: store,
            pendingWrites: PendingWrites(outbox, scope: "posts") { pending, pages in
                // A new post goes on top of the first page.
                try pages.updatingPage(at: 0) { page in
                    FeedPage(items: try pending.map { try $0.decoded(Int.self) } + page.items, next: page.next)
                }
            },
            page: server)
        let observing = Task { for await _ in feed.snapshots() {} }
        defer { observing.cancel() }
        try await feed.waitForObservers(1)
        try await feed.settled()

        try await outbox.enqueue(-1, kind: "post", scope: "posts")
        #expect(feed.current.value?.all == [-1, 0, 1, 2])
        #expect(feed.current.pendingWrites == 1)

        feed.fetchNextPage()
        try await feed.settled()
        #expect(feed.current.value?.all == [-1, 0, 1, 2, 3, 4, 5], "the write once, on the first page")
        #expect(feed.current.value?.cursors == [0, 1])
        #expect(try await store.retrieve("feed")?.value.all == Array(0..<6), "the store holds what the server sent")
    }

    @Test("a next page backing off gives way to an invalidation: the first page reloads, and the invalidation is not lost")
    func aNextPageBackingOff_givesWayToAnInvalidation() async throws {
        let page = LoaderSpy<Int, FeedPage>(holdsLoads: true)
        let queries = QueryClient(environment: clock.environment())
        let retry = RetryPolicy(maxAttempts: 3, initialDelay: .seconds(30), jitter: 0, shouldRetry: { _ in true })
        let feed = queries.pagedQuery(["feed"], policy: QueryPolicy(staleAfter: .seconds(600), retry: retry), paging: paging(), page: page)
        let observing = Task { for await _ in feed.snapshots() {} }
        defer { observing.cancel() }
        try await page.waitForLoads(count: 1)
        page.complete(0, with: .success(FeedPage(items: [0, 1, 2], next: 1)))
        try await feed.settled()

        feed.fetchNextPage()
        try await page.waitForLoads(count: 2)
        page.complete(1, with: .failure(TestError()))
        _ = await first(feed) { $0.phase == .paused(.backingOff) }

        feed.invalidate()
        #expect(feed.current.phase == .fetching(.invalidated), "the invalidation runs now, not after the next page's retry")
        try await page.waitForLoads(count: 3)
        #expect(page.inputs == [0, 1, 0])
        page.complete(2, with: .success(FeedPage(items: [10, 11, 12], next: 1)))
        try await feed.settled()
        #expect(feed.current.value?.all == [10, 11, 12])
        #expect(!feed.current.isStale, "the reload cleared the invalidation")
        #expect(feed.current.lastFetchReason == .invalidated)
    }
}


/// Pages in both directions: a feed whose first page is the middle of the timeline, newer pages
/// before it (`fetchPreviousPage`), older after; `maxPages` lets pages go from the far end either
/// way, and they load again; a refetch reloads the window held; the pages are kept in real files.
@Suite("QueryClient.pagedQuery: pages in both directions", .timeLimit(.minutes(1)))
struct QueryPagesBothWaysTests {
    let clock = ManualClock()
    typealias Page = QueryPagesTests.FeedPage
    typealias Feed = Pages<Page, Int>

    /// A timeline of pages -3 ... 3 (three items each: page n holds 3n ..< 3n+3, plus `version`).
    final class Timeline: Loader, Sendable {
        private let state = Locked((requests: [Int](), version: 0))
        var requests: [Int] { state.withLock { $0.requests } }
        func publishNewVersion() { state.withLock { $0.version += 100 } }

        func load(_ cursor: Int) async throws -> Page { try await load(cursor, in: .current) }
        func load(_ cursor: Int, in context: LoadContext) async throws -> Page {
            let version = state.withLock { state in
                state.requests.append(cursor)
                return state.version
            }
            return Page(items: (3 * cursor ..< 3 * cursor + 3).map { $0 + version }, next: cursor < 3 ? cursor + 1 : nil)
        }
    }

    func paging(maxPages: Int? = nil) -> Paging<Page, Int> {
        Paging(firstCursor: 0, maxPages: maxPages, previousCursor: { page in
            // Items are 3n + a multiple of 100 (the version), with 3n in -9 ... 9.
            let first = page.items[0]
            let cursor = (first - Int((Double(first) / 100).rounded()) * 100) / 3
            return cursor > -3 ? cursor - 1 : nil
        }, nextCursor: { $0.next })
    }

    func observed(_ timeline: Timeline, maxPages: Int?, store: FileStore<Feed>? = nil) async throws -> (Query<Feed>, Task<Void, Never>) {
        let queries = QueryClient(environment: clock.environment())
        let feed = queries.pagedQuery(["timeline"], paging: paging(maxPages: maxPages), store: store, page: timeline)
        let observing = Task { for await _ in feed.snapshots() {} }
        try await feed.waitForObservers(1)
        try await feed.settled()
        return (feed, observing)
    }

    @Test("one-way paging: every page maxPages let go from the front loads again, in turn")
    func oneWayPaging_everyDroppedPageLoadsAgain() async throws {
        let server = QueryPagesTests.FeedServer(pageCount: 6)
        let queries = QueryClient(environment: clock.environment())
        let feed = queries.pagedQuery(["feed"], paging: Paging(firstCursor: 0, maxPages: 2) { $0.next }, page: server)
        let observing = Task { for await _ in feed.snapshots() {} }
        defer { observing.cancel() }
        try await feed.waitForObservers(1)
        try await feed.settled()
        for _ in 0..<3 {
            feed.fetchNextPage()
            try await feed.settled()
        }
        #expect(feed.current.value?.cursors == [2, 3])
        for expected in [[1, 2], [0, 1]] {
            feed.fetchPreviousPage()
            try await feed.settled()
            #expect(feed.current.value?.cursors == expected)
        }
        #expect(feed.current.value?.hasPreviousPage == false)
    }

    @Test("fetchPreviousPage puts the page before the first in front, until the start")
    func previousPages_untilTheStart() async throws {
        let timeline = Timeline()
        let (feed, observing) = try await observed(timeline, maxPages: nil)
        defer { observing.cancel() }
        #expect(feed.current.value?.hasPreviousPage == true)
        for _ in 0..<4 {
            feed.fetchPreviousPage()
            try await feed.settled()
        }
        #expect(feed.current.value?.cursors == [-3, -2, -1, 0])
        #expect(feed.current.value?.all == Array(-9..<3))
        #expect(feed.current.value?.hasPreviousPage == false)
        #expect(feed.current.lastFetchReason == .previousPage)
        #expect(timeline.requests == [0, -1, -2, -3])
    }

    @Test("maxPages lets pages go from the far end, in either direction, and they load again")
    func maxPages_bothDirections() async throws {
        let timeline = Timeline()
        let (feed, observing) = try await observed(timeline, maxPages: 2)
        defer { observing.cancel() }
        feed.fetchNextPage()
        try await feed.settled()
        feed.fetchNextPage()
        try await feed.settled()
        // Page 0 went: it is the previous page now.
        #expect(feed.current.value?.cursors == [1, 2])
        #expect(feed.current.value?.previousCursor == 0)
        feed.fetchPreviousPage()
        try await feed.settled()
        // Page 0 again, in front; page 2 went from the end: it is the next page.
        #expect(feed.current.value?.cursors == [0, 1])
        #expect(feed.current.value?.nextCursor == 2)
        feed.fetchPreviousPage()
        try await feed.settled()
        #expect(feed.current.value?.cursors == [-1, 0])
        feed.fetchNextPage()
        try await feed.settled()
        #expect(feed.current.value?.cursors == [0, 1])
        #expect(feed.current.value?.all == Array(0..<6))
    }

    @Test("a refetch reloads the pages held, from the first held, in files that survive a relaunch")
    func aRefetch_reloadsTheWindowHeld_andTheFilesKeepIt() async throws {
        let directory = try TemporaryDirectory(prefix: "strata-pages-both")
        let timeline = Timeline()
        do {
            let (feed, observing) = try await observed(timeline, maxPages: 2, store: FileStore<Feed>(directory: directory.url))
            defer { observing.cancel() }
            feed.fetchPreviousPage()
            try await feed.settled()
            #expect(feed.current.value?.cursors == [-1, 0])
            timeline.publishNewVersion()
            feed.refetch()
            try await feed.settled()
            #expect(feed.current.value?.cursors == [-1, 0])
            #expect(feed.current.value?.all == Array(-3..<3).map { $0 + 100 })
            #expect(feed.current.value?.previousCursor == -2)
        }
        let stored = try await FileStore<Feed>(directory: directory.url).retrieve("timeline")?.value
        #expect(stored?.cursors == [-1, 0])
        #expect(stored?.previousCursor == -2)
        #expect(stored?.all == Array(-3..<3).map { $0 + 100 })
    }
}

extension Pages where Page == QueryPagesTests.FeedPage {
    /// Every page's items, in order.
    var all: [Int] { pages.flatMap(\.items) }
}
