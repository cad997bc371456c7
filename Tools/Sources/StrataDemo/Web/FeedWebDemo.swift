import DemoServer
import Foundation
import Hummingbird
import Logging
import OfflineFirstExample
@_spi(StrataInternals) import Strata
import StrataOutbox
import StrataQueries
import StrataInspector

/// `strata demo --web`: the S4 offline-first feed as a page a person drives. The demo server's
/// posts, newest first, five a page, each page loaded through S4's own chain (`DataLoaderComposer`:
/// fresh local 24 h → remote + cache → stale local → bundled default) over real HTTP and real files,
/// held by one paged live query; posts written through an outbox in real files, shown pending until
/// the server has them. Time is the demo's simulated clock, so "a day later" is one click.
///
/// The page (`GET /`) follows the feed over server-sent events (`GET /api/events`); its controls
/// `POST` to `/api/…` with the session's token; the inspector is mounted at `/inspector`.
///
/// The day-two tools show there too: the feed's post counter is a `select` of the feed (it changes
/// only when the number of posts does), "Post" is a mutation whose optimistic row goes away when
/// the server refuses it (the page's "refuses posts (422)" switch) and which hands the post to the
/// outbox when offline, and "Load newer" is the previous page (the feed keeps two pages: scrolled
/// past them, the first ones go, and come back with it).
public final class FeedWebDemo: Sendable {
    /// The feed query's value: the pages loaded so far.
    public typealias Feed = Pages<PostsPage, Int>

    /// The demo server the feed comes from (stopped and started by the network control).
    public let server: DemoServer
    public let queries: QueryClient
    /// Where posts wait for the server: real files in the demo's directory.
    public let outbox: Outbox
    /// The feed, as one paged live query.
    public let feed: Query<Feed>
    /// Writing a post: optimistic on the feed, rolled back when refused, queued offline.
    public let posting: Mutation<NewPost, Post>
    /// The feed's post counter, a selection of the feed, and how many times it changed.
    private let counter = Locked<(count: Int?, changes: Int)>((nil, 0))
    /// The inspector, mounted at `/inspector`; its token guards the page's controls too.
    public let inspector: StrataInspector
    let clock: DemoClock
    let directory: URL
    /// Tells the page's event streams that something the feed's view shows changed outside the
    /// query (the server, the network, the clock).
    private let changes = Locked<[UUID: AsyncStream<Void>.Continuation]>([:])
    private let tasks: Locked<[Task<Void, Never>]>
    /// The posts the page started and not finished, and whether the demo stopped (no new one starts).
    private let posts = Locked<(stopped: Bool, running: [UUID: Task<Void, Never>])>((false, [:]))

    /// The sample posts the server starts with: three pages of five.
    static let samplePosts = 12

    /// Starts the demo server on a free port of 127.0.0.1 with sample posts, caches in a new
    /// temporary directory (removed by ``stop()``), and the feed's first load.
    public static func start() async throws -> FeedWebDemo {
        let server = try await DemoServer.start()
        for number in 1...samplePosts {
            server.addPost(title: "Sample post \(number)", body: "Post number \(number), written before the demo started.")
        }
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("strata-web-demo-\(UUID().uuidString)", isDirectory: true)
        return FeedWebDemo(server: server, directory: directory)
    }

    private init(server: DemoServer, directory: URL) {
        self.server = server
        self.directory = directory
        let clock = DemoClock()
        self.clock = clock
        let quiet = Logger(label: "strata.web-demo", factory: { _ in SwiftLogNoOpLogHandler() })
        queries = QueryClient(environment: LoadEnvironment(now: clock.dates, clock: clock, logger: quiet))
        // The outbox stamps entries with the simulated time, and waits out its retry backoff in real
        // time (the simulated clock moves only when the page says so).
        outbox = Outbox(
            storage: FileOutboxStorage(directory: directory.appendingPathComponent("outbox", isDirectory: true)),
            name: "posts", environment: LoadEnvironment(now: clock.dates, clock: ContinuousClock(), logger: quiet))
        let transport = URLSessionHTTPClient()
        outbox.registerHTTP(transport: transport)
        feed = queries.pagedQuery(
            ["feed"], tags: ["posts"],
            // Stale after the S4 chain's own 24 h: a day later, the badge says so. The chain is the
            // offline policy (its local tiers answer without the network), so the query does not
            // pause for it: a refresh offline runs the chain, and the stale local copy answers.
            policy: QueryPolicy(staleAfter: .seconds(24 * 3600), networkMode: .always),
            // Two pages held: scrolled further, the first ones go, and "Load newer" loads them again.
            paging: Paging(firstCursor: 1, maxPages: 2, refetch: .allPages) { $0.next },
            pendingWrites: Self.pendingPosts(outbox),
            page: PostsPageLoader(server: server, directory: directory, clock: clock, transport: transport, logger: quiet))
        inspector = StrataInspector(queries: queries, outboxes: [outbox])
        let outbox = outbox
        let feed = feed
        let postsURL = server.baseURL.appendingPathComponent("posts")
        posting = queries.mutation(
            // The row shows at once, marked "sending" (number 0: the server has not numbered it).
            // Only on the newest page: a window scrolled past it shows the post once the server has it.
            optimistic: [.setting(["feed"], as: Feed.self) { pages, draft in
                guard let pages, pages.cursors.first == 1, !pages.pages.isEmpty else { return nil }
                return pages.updatingPage(at: 0) { PostsPage(posts: [Post(id: 0, title: draft.title, body: draft.body)] + $0.posts, next: $0.next) }
            }],
            invalidates: [["feed"]],
            whenOffline: { draft in try await Self.enqueue(draft, to: postsURL, in: outbox) },
            perform: { draft in try await Self.publish(draft, to: postsURL, with: transport) })
        let counter = counter
        let changes = changes
        tasks = Locked([
            Task { try? await outbox.run() },
            // The page is the feed's screen: observed for the demo's life, as a screen on show.
            Task { for await _ in feed.snapshots() {} },
            // The counter is a screen of its own: it hears of the feed only when the count changes.
            Task {
                for await selected in feed.snapshots(select: { $0.pages.reduce(0) { $0 + $1.posts.count } }) {
                    counter.withLock { $0 = (selected.value, $0.changes + 1) }
                    // The page hears of it as of any change it shows (the feed's own signal may
                    // have come before the counter took this).
                    Self.signal(changes)
                }
            },
        ])
    }

    /// `POST /posts` with `draft`, straight to the server: the post it created, or
    /// ``PostRefused`` with the server's status and problem.
    static func publish(_ draft: NewPost, to url: URL, with transport: any HTTPTransport) async throws -> Post {
        var request = HTTPRequest(method: .post, url: url)
        request.headerFields[.contentType] = "application/json"
        let reply = try await transport.send(request, body: try JSONEncoder().encode(draft), options: HTTPRequestOptions())
        guard (200..<300).contains(reply.status.code) else {
            // A problem document (RFC 9457) says why in its title and detail; anything else, in its first words.
            struct Problem: Decodable { var title: String?; var detail: String? }
            let problem = (try? JSONDecoder().decode(Problem.self, from: reply.body)).map { [$0.title, $0.detail].compactMap { $0 }.joined(separator: ": ") }
            throw PostRefused(status: reply.status.code, problem: problem ?? String(decoding: reply.body.prefix(200), as: UTF8.self))
        }
        return try JSONDecoder().decode(Post.self, from: reply.body)
    }

    /// Queues `draft` in the outbox (offline): delivered when the network returns.
    static func enqueue(_ draft: NewPost, to url: URL, in outbox: Outbox) async throws -> OutboxEntry {
        var request = HTTPRequest(method: .post, url: url)
        request.headerFields[.contentType] = "application/json"
        return try await outbox.enqueue(request, body: try JSONEncoder().encode(draft))
    }

    /// The outbox's posts on top of the first page, newest first, numbered from -1 down (the
    /// server has not numbered them yet: ``FeedView/Item/pending``).
    static func pendingPosts(_ outbox: Outbox) -> PendingWrites<Feed> {
        PendingWrites(outbox, scope: "/posts") { pending, pages in
            guard !pages.pages.isEmpty else { return pages }
            let drafts = pending.enumerated().compactMap { index, entry in
                (try? entry.decoded(NewPost.self)).map { Post(id: -(index + 1), title: $0.title, body: $0.body) }
            }
            return pages.updatingPage(at: 0) { PostsPage(posts: drafts.reversed() + $0.posts, next: $0.next) }
        }
    }

    /// Stops the feed, the outbox and the server, and removes the caches.
    public func stop() async {
        for task in tasks.withLock({ $0 }) { task.cancel() }
        let posting = posts.withLock { posts in
            posts.stopped = true
            defer { posts.running = [:] }
            return Array(posts.running.values)
        }
        for task in posting { task.cancel() }
        // Finished after the lock: a stream's `onTermination` (run inside `finish()`) takes it.
        let subscribers = changes.withLock { changes in
            defer { changes = [:] }
            return Array(changes.values)
        }
        for continuation in subscribers { continuation.finish() }
        await server.stop()
        try? FileManager.default.removeItem(at: directory)
    }

    // MARK: Controls

    /// The network goes away: the server refuses connections, and the app's client and outbox
    /// are told (as a path monitor would).
    public func goOffline() async {
        await server.goOffline()
        queries.setOnline(false)
        outbox.connectivityChanged(isOnline: false)
        changed()
    }

    /// The network comes back: the server listens again on its port; the client refetches a
    /// stale feed and the outbox delivers what waits.
    public func goOnline() async throws {
        try await server.goOnline()
        outbox.connectivityChanged(isOnline: true)
        queries.setOnline(true)
        changed()
    }

    /// Moves the simulated clock forward (cached copies and the feed age; timers due fire).
    public func advanceClock(by duration: Duration) {
        clock.skip(duration)
        changed()
    }

    /// Writes a post with the ``posting`` mutation: shown at once; online, sent now (a refusal
    /// takes the row away, and the page says why); offline, queued in the outbox and sent when the
    /// network allows.
    @discardableResult
    public func post(title: String, body: String = "Written in the web demo.") async throws -> MutationOutcome<Post> {
        let outcome = try await posting.mutate(NewPost(title: title, body: body))
        changed()
        return outcome
    }

    /// Starts ``post(title:body:)`` without waiting for it (the page's "Post"): its progress and
    /// outcome reach the page with the feed's events.
    ///
    /// - Returns: `false` when the demo has stopped (nothing starts).
    @discardableResult
    func startPost(title: String) -> Bool {
        let id = UUID()
        let started = posts.withLock { posts -> Bool in
            guard !posts.stopped else { return false }
            // Started under the lock, so `stop()` cancels it; it takes itself out when done.
            posts.running[id] = Task { [self] in
                _ = try? await post(title: title)
                _ = self.posts.withLock { $0.running.removeValue(forKey: id) }
            }
            return true
        }
        if started { changed() }
        return started
    }

    /// Whether the server refuses posts with `422 Unprocessable Content` (the page's switch, as
    /// `strata serve --write-fault 422`).
    public func setRefusingPosts(_ refusing: Bool) {
        var faults = server.faults
        faults.writeFault = refusing ? .unprocessable : nil
        server.faults = faults
        changed()
    }

    /// The simulated time now.
    public var now: Date { clock.date }

    // MARK: What the page shows

    /// The feed as the page shows it now.
    public func view() -> FeedView {
        let (count, changes) = counter.withLock { $0 }
        return FeedView(
            snapshot: feed.current, now: clock.date, serverOnline: server.isOnline, networkOnline: queries.isOnline,
            outbox: outbox.status, feedRequests: server.requests.filter { $0.method == "GET" && $0.path.hasPrefix("/posts/pages/") }.count,
            posting: posting.current, refusingPosts: server.faults.writeFault == .unprocessable,
            counter: FeedView.Counter(count: count, changes: changes))
    }

    /// A signal for every change the view may show: the feed's snapshots, the outbox's status,
    /// and the controls. Merged: a reader that falls behind gets one signal for many changes.
    func viewChanges() -> AsyncStream<Void> {
        let (signals, signal) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let id = UUID()
        changes.withLock { $0[id] = signal }
        let snapshots = feed.snapshots()
        let statuses = outbox.statusUpdates()
        let posting = posting.snapshots()
        let followers = [
            Task { for await _ in snapshots { signal.yield() } },
            Task { for await _ in statuses { signal.yield() } },
            Task { for await _ in posting { signal.yield() } },
        ]
        signal.onTermination = { [changes] _ in
            followers.forEach { $0.cancel() }
            changes.withLock { _ = $0.removeValue(forKey: id) }
        }
        return signals
    }

    private func changed() {
        Self.signal(changes)
    }

    private static func signal(_ changes: Locked<[UUID: AsyncStream<Void>.Continuation]>) {
        for continuation in changes.withLock({ Array($0.values) }) { continuation.yield() }
    }
}

/// One page of posts through S4's chain, for the page's number: a cache directory per page, so
/// each page has its own fresh, stale and saved copies.
struct PostsPageLoader: Loader, LoaderDescribing {
    let server: DemoServer
    let directory: URL
    let clock: DemoClock
    let transport: any HTTPTransport
    let logger: Logger

    func load(_ number: Int) async throws -> PostsPage {
        try await load(number, in: .current)
    }

    func load(_ number: Int, in context: LoadContext) async throws -> PostsPage {
        try await chain(for: number).load((), in: context)
    }

    /// S4's chain for page `number`: the bundled default is the sample page for the first page,
    /// and an empty last page after it.
    func chain(for number: Int) -> some Loader<Void, PostsPage> {
        let store = LocalDataStore(
            fileStore: FileStore(directory: directory.appendingPathComponent("page-\(number)", isDirectory: true), codec: DataCodec(), logger: logger),
            now: clock.dates)
        return DataLoaderComposer.makeDataLoader(
            serverURL: server.postsPageURL(number), expecting: PostsPage.self, store: store,
            defaultLoader: DefaultLoader(resource: number == 1 ? "default_posts" : "default_posts_end", in: .module),
            client: transport)
            .decoding(PostsPage.self)
    }

    var loaderNode: LoaderNode {
        LoaderNode(label: "page n (S4 DataLoaderComposer)", children: [chain(for: 1).chainNode])
    }
}

/// The server refused a post (the mutation's error, shown by the page).
public struct PostRefused: Error, Sendable, CustomStringConvertible {
    public var status: Int
    public var problem: String

    public var description: String { "the server refused the post: \(status) \(problem)" }
}
