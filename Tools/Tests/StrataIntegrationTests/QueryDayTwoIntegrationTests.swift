import DemoServer
import Foundation
import PostsRepositoryExample
import Testing
@_spi(StrataInternals) import Strata
import StrataOutbox
import StrataQueries
import StrataTesting

/// The day-two tools of live queries with the real parts: pages in both directions, `select`,
/// `ensureValue`/`prefetch`/`fetch` against Python's `http.server` (a server this project did not
/// write) with the pages kept in real files; mutations, values set by code and a dependent query
/// against the in-process demo server over real HTTP. The clock is a manual one.
@Suite("Live queries, day two, against real servers", .timeLimit(.minutes(1)), .serialized)
struct QueryDayTwoIntegrationTests {
    /// One page of a timeline served as a static file: its items and its neighbours.
    struct TimelinePage: Codable, Equatable, Sendable {
        var items: [Int]
        var newer: Int?
        var older: Int?
    }

    typealias Timeline = Pages<TimelinePage, Int>

    /// Writes pages -2 ... 2 of a timeline (`version` added to every item) under `root/pages/`.
    static func writeTimeline(in root: URL, version: Int = 0) throws {
        let pages = root.appendingPathComponent("pages", isDirectory: true)
        try FileManager.default.createDirectory(at: pages, withIntermediateDirectories: true)
        for number in -2...2 {
            let page = TimelinePage(
                items: (3 * number ..< 3 * number + 3).map { $0 + version }, newer: number > -2 ? number - 1 : nil,
                older: number < 2 ? number + 1 : nil)
            try JSONEncoder().encode(page).write(to: pages.appendingPathComponent("\(number).json"))
        }
    }

    /// A page by number, over real HTTP from `base`.
    struct PageLoader: Loader {
        let base: URL
        func load(_ number: Int) async throws -> TimelinePage { try await load(number, in: .current) }
        func load(_ number: Int, in context: LoadContext) async throws -> TimelinePage {
            try await HTTPLoader(url: base.appendingPathComponent("pages/\(number).json"), transport: URLSessionHTTPClient())
                .decoding(TimelinePage.self).load((), in: context)
        }
    }

    @Test("Python's http.server: ensureValue awaits the first page, prefetch loads unobserved, pages go both ways in a window kept in files, and two selections share one load")
    func pythonServer_pagesBothWays_selectAndFetch() async throws {
        let directory = try TemporaryDirectory(prefix: "strata-day-two-python")
        let server = try await ExternalServer.python(in: directory)
        do {
            try Self.writeTimeline(in: server.root)
            let clock = ManualClock()
            let queries = QueryClient(environment: clock.environment())
            let store = FileStore<Timeline>(directory: directory.appending("pages-store"))
            let paging = Paging<TimelinePage, Int>(firstCursor: 0, maxPages: 2, previousCursor: { $0.newer }, nextCursor: { $0.older })
            let timeline = queries.pagedQuery(
                ["timeline"], policy: QueryPolicy(staleAfter: .seconds(300)), paging: paging, store: store,
                page: PageLoader(base: server.baseURL))

            // A navigation that must not show an empty screen: the first page, awaited.
            let first = try await timeline.ensureValue()
            #expect(first.cursors == [0] && first.hasPreviousPage && first.hasNextPage)
            #expect(try await timeline.ensureValue() == first, "fresh: no second request")
            #expect(try server.statuses(of: "/pages/0.json") == [200])

            // Two selections (a count, the newest item) observe it: one query, no new load.
            var counts = timeline.snapshots(select: { $0.pages.reduce(0) { $0 + $1.items.count } }).makeAsyncIterator()
            var newest = timeline.snapshots(select: { $0.pages.first?.items.first }).makeAsyncIterator()
            #expect(timeline.observerCount == 2)

            // Newer, then older twice: two pages held, the far end goes, and comes back.
            timeline.fetchPreviousPage()
            try await timeline.settled()
            #expect(timeline.current.value?.cursors == [-1, 0])
            timeline.fetchNextPage()
            try await timeline.settled()
            timeline.fetchNextPage()
            try await timeline.settled()
            #expect(timeline.current.value?.cursors == [1, 2])
            #expect(timeline.current.value?.previousCursor == 0)
            timeline.fetchPreviousPage()
            try await timeline.settled()
            #expect(timeline.current.value?.cursors == [0, 1])
            #expect(timeline.current.value?.nextCursor == 2)
            #expect(try server.statuses(of: "/pages/0.json") == [200, 200], "page 0 loaded again after it went")

            // The server's files change: fetch() reloads the window held, and returns it.
            try Self.writeTimeline(in: server.root, version: 100)
            let reloaded = try await timeline.fetch()
            #expect(reloaded.cursors == [0], "a window starting at the first page reloads the first page (Refetch.firstPage)")
            #expect(reloaded.pages.first?.items == [100, 101, 102])
            // The pages are in the files: a new process reads the window back.
            let stored = try await FileStore<Timeline>(directory: directory.appending("pages-store")).retrieve("timeline")?.value
            #expect(stored == reloaded)

            // Each selection was told of each change of what it selects, and only of those, in
            // order: the count moved 3 → 6 → 3 (two pages held, then one); the newest item with
            // every move of the window.
            var seenCounts: [Int?] = []
            for _ in 0..<3 { seenCounts.append(await counts.next()?.value ?? nil) }
            #expect(seenCounts == [3, 6, 3])
            var seenNewest: [Int?] = []
            for _ in 0..<6 { seenNewest.append(await newest.next()?.value ?? nil) }
            #expect(seenNewest == [0, -3, 0, 3, 0, 100])

            // A prefetch of a screen the user is about to open: loaded, nobody observes it.
            let other = queries.query(
                ["page", 2], policy: QueryPolicy(staleAfter: .seconds(300)),
                chain: HTTPLoader(url: server.baseURL.appendingPathComponent("pages/2.json"), transport: URLSessionHTTPClient()).decoding(TimelinePage.self))
            other.prefetch()
            try await other.settled()
            #expect(other.observerCount == 0)
            #expect(other.current.value?.items == [106, 107, 108])
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }

    @Test("the demo server: a mutation's optimistic row, the server's post after its invalidation, and a refusal rolled back")
    func demoServer_mutations() async throws {
        try await withDemoServer { server in
            let clock = ManualClock()
            let queries = QueryClient(environment: clock.environment())
            let postsURL = server.baseURL.appendingPathComponent("posts")
            let list = queries.query(
                ["posts"], policy: QueryPolicy(staleAfter: .seconds(60)),
                chain: HTTPLoader(url: postsURL, transport: URLSessionHTTPClient()).decoding([ListedPost].self))
            let observing = Task { for await _ in list.snapshots() {} }
            defer { observing.cancel() }
            try await list.waitForObservers(1)
            try await list.settled()

            let create = queries.mutation(
                optimistic: [.setting(["posts"], as: [ListedPost].self) { posts, draft in (posts ?? []) + [ListedPost(id: 0, title: draft.title, body: draft.body)] }],
                invalidates: [["posts"]],
                perform: { (draft: PostDraft) in
                    try await HTTPLoader<PostDraft>.postJSON(to: postsURL).decoding(ListedPost.self).load(draft)
                })
            let created = try await create.mutate(PostDraft(title: "Accepted", body: "b"))
            #expect(created.output == ListedPost(id: 1, title: "Accepted", body: "b"))
            try await list.settled()
            #expect(list.current.value == [ListedPost(id: 1, title: "Accepted", body: "b")])
            #expect(list.current.lastFetchReason == .invalidated)

            // Refused: the list goes back to exactly what it held.
            let before = list.current
            var faults = server.faults
            faults.writeFault = .unprocessable
            server.faults = faults
            await #expect(throws: (any Error).self) { try await create.mutate(PostDraft(title: "Refused", body: "b")) }
            #expect(list.current.value == before.value && list.current.storedAt == before.storedAt && list.current.provenance == before.provenance)
            #expect(create.current.status == .failed)
            #expect(server.posts.count == 1)

            // A socket pushes a change: set locally, shown at once, fresh; a refetch asks the server.
            list.setValue { posts in posts.map { $0.map { ListedPost(id: $0.id, title: "Pushed", body: $0.body) } } }
            #expect(list.current.value?.first?.title == "Pushed")
            #expect(list.current.provenance?.isSetLocally == true)
            #expect(try await list.fetch().first?.title == "Accepted")
        }
    }

    @Test("the demo server: an interval that polls a fresh value asks the server on every tick, and not in the background")
    func demoServer_intervalWhenFresh() async throws {
        try await withDemoServer { server in
            let clock = ManualClock()
            let queries = QueryClient(environment: clock.environment())
            let list = queries.query(
                ["posts"], policy: QueryPolicy(staleAfter: .seconds(3600), refetchInterval: .seconds(30), refetchIntervalWhenFresh: true),
                chain: HTTPLoader(url: server.baseURL.appendingPathComponent("posts"), transport: URLSessionHTTPClient()).decoding([ListedPost].self))
            let observing = Task { for await _ in list.snapshots() {} }
            defer { observing.cancel() }
            try await list.waitForObservers(1)
            try await list.settled()
            let tick: @Sendable (ManualClock.Sleeper) -> Bool = { $0.since.duration(to: $0.deadline) == .seconds(30) }
            for expected in 2...3 {
                try await clock.waitForSleepers(matching: tick)
                clock.advance(by: .seconds(30))
                // The tick's load is started by the interval's task after the clock moved.
                await server.waitForRequests(count: expected)
                try await list.settled()
            }
            queries.enteredBackground()
            #expect(!clock.sleepers.contains(where: tick), "no tick is left to fire in the background")
            clock.advance(by: .seconds(300))
            try await list.settled()
            #expect(server.requestCount(path: "/posts") == 3)
        }
    }

    @Test("the demo server: a dependent query waits, disabled, for the user it needs, then loads")
    @MainActor
    func demoServer_dependentQuery() async throws {
        try await withDemoServer { server in
            _ = server.addPost(title: "Mine", body: "b")
            let clock = ManualClock()
            let queries = QueryClient(environment: clock.environment())
            let post = queries.query(
                ["posts", 1], chain: HTTPLoader(url: server.baseURL.appendingPathComponent("posts/1"), transport: URLSessionHTTPClient()).decoding(ListedPost.self))
            let live = post.observed(enabled: false)
            try await post.settled()
            #expect(server.requestCount(path: "/posts/1") == 0, "disabled: no request")
            #expect(live.status == .empty)
            live.isEnabled = true
            try await live.settled()
            #expect(live.value?.title == "Mine")
            #expect(server.requestCount(path: "/posts/1") == 1)
        }
    }
}
