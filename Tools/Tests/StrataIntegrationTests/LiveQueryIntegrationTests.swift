import DemoServer
import Foundation
import PostsRepositoryExample
import Testing
@_spi(StrataInternals) import Strata
import StrataOutbox
import StrataQueries
import StrataTesting

typealias ListedPost = PostsRepositoryExample.Post

/// Live queries with the real parts: the in-process demo server (Hummingbird) over real HTTP
/// (`URLSessionHTTPClient`), an outbox in real files, and the query's own state machine. The clock
/// is a manual one; nothing waits for real time.
@Suite("Live queries against the demo server", .timeLimit(.minutes(1)))
struct LiveQueryIntegrationTests {
    /// The posts list with the outbox's pending drafts appended (id 0: not numbered yet).
    static func pendingDrafts(_ outbox: Outbox) -> PendingWrites<[ListedPost]> {
        PendingWrites(outbox, scope: "/posts") { pending, posts in
            posts + pending.compactMap { try? $0.decoded(PostDraft.self) }.map { ListedPost(id: 0, title: $0.title, body: $0.body) }
        }
    }

    @Test("a post written offline shows pending; delivered, the server's post replaces it after one refetch")
    func aPostWrittenOffline_showsPending_thenTheServersPost() async throws {
        try await withDemoServer { server in
            let directory = try TemporaryDirectory(prefix: "strata-live-posts")
            let clock = ManualClock()
            let outbox = Outbox(storage: FileOutboxStorage(directory: directory.url), environment: clock.environment())
            outbox.registerHTTP(transport: URLSessionHTTPClient())
            let queries = QueryClient(environment: clock.environment())
            let postsURL = server.baseURL.appendingPathComponent("posts")
            let list = queries.query(
                ["posts"], policy: QueryPolicy(staleAfter: .seconds(60)), pendingWrites: Self.pendingDrafts(outbox),
                chain: HTTPLoader(url: postsURL, transport: URLSessionHTTPClient()).decoding([ListedPost].self))
            let observing = Task { for await _ in list.snapshots() {} }
            defer { observing.cancel() }
            try await list.waitForObservers(1)
            try await list.settled()
            #expect(list.current.value == [])
            #expect(server.requestCount(path: "/posts") == 1)

            // Offline: the post is queued and shown at once, marked pending; nothing is requested.
            await server.goOffline()
            outbox.connectivityChanged(isOnline: false)
            queries.setOnline(false)
            var request = HTTPRequest(method: .post, url: postsURL)
            request.headerFields[.contentType] = "application/json"
            try await outbox.enqueue(request, body: try JSONEncoder().encode(PostDraft(title: "Written offline", body: "b")))
            #expect(list.current.value == [ListedPost(id: 0, title: "Written offline", body: "b")])
            #expect(list.current.pendingWrites == 1)
            #expect(list.current.provenance?.pendingWrites == 1)

            // Back online: the outbox delivers it; its delivery invalidates the list, which refetches
            // once and shows the server's post.
            try await server.goOnline()
            queries.setOnline(true)
            outbox.connectivityChanged(isOnline: true)
            #expect(try await outbox.drain().delivered == 1)
            try await list.settled()
            #expect(list.current.value == [ListedPost(id: 1, title: "Written offline", body: "b")])
            #expect(list.current.pendingWrites == 0)
            #expect(list.current.lastFetchReason == .invalidated)
            #expect(server.requests.filter { $0.method == "GET" && $0.path == "/posts" }.count == 2, "the first load and one refetch after the delivery")
        }
    }

    @Test("a fresh list is not refetched on reconnect or foreground; a stale one is, once")
    func reconnectAndForeground_refetchOnlyWhatIsStale_once() async throws {
        try await withDemoServer { server in
            let clock = ManualClock()
            let queries = QueryClient(environment: clock.environment())
            let list = queries.query(
                ["posts"], policy: QueryPolicy(staleAfter: .seconds(60)),
                chain: HTTPLoader(url: server.baseURL.appendingPathComponent("posts"), transport: URLSessionHTTPClient()).decoding([ListedPost].self))
            let observers = (0..<5).map { _ in
                let stream = list.snapshots()
                return Task { for await _ in stream {} }
            }
            defer { observers.forEach { $0.cancel() } }
            try await list.waitForObservers(5)
            try await list.settled()
            queries.enteredForeground()
            queries.setOnline(false)
            queries.setOnline(true)
            try await list.settled()
            #expect(server.requestCount(path: "/posts") == 1, "fresh: no refetch")

            clock.advance(by: .seconds(61))
            queries.enteredForeground()
            queries.setOnline(false)
            queries.setOnline(true)
            try await list.settled()
            #expect(server.requestCount(path: "/posts") == 2, "stale: one refetch for five observers and two signals")
            #expect(list.current.lastFetchReason == .foreground)
        }
    }

    @MainActor
    @Test("a screen whose key changes keeps the previous post shown, marked placeholder, until the next one arrives")
    func aKeyThatChanges_showsThePreviousValueAsPlaceholder() async throws {
        try await withDemoServer { server in
            for title in ["first", "second"] {
                var request = HTTPRequest(method: .post, url: server.baseURL.appendingPathComponent("posts"))
                request.headerFields[.contentType] = "application/json"
                let body = try JSONEncoder().encode(PostDraft(title: title, body: "b"))
                #expect(try await URLSessionHTTPClient().send(request, body: body, options: HTTPRequestOptions()).status.code == 201)
            }
            let queries = QueryClient()
            func post(_ id: Int) -> Query<ListedPost> {
                queries.query(
                    ["posts", .number(id)],
                    chain: HTTPLoader(url: server.baseURL.appendingPathComponent("posts/\(id)"), transport: URLSessionHTTPClient())
                        .decoding(ListedPost.self))
            }
            let first = post(1)
            let live = first.observed()
            try await live.settled()
            #expect(live.value?.title == "first")

            live.switchTo(post(2))
            // At once, before the second post's load can answer: the first post, marked placeholder.
            #expect(live.value?.title == "first")
            #expect(live.snapshot.isPlaceholder)
            #expect(live.snapshot.isFetching)
            try await live.settled()
            #expect(live.value?.title == "second")
            #expect(!live.snapshot.isPlaceholder)
            try await first.waitForObservers(0)
        }
    }
}
