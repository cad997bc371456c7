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
    /// The inspector, mounted at `/inspector`; its token guards the page's controls too.
    public let inspector: StrataInspector
    let clock: DemoClock
    let directory: URL
    /// Tells the page's event streams that something the feed's view shows changed outside the
    /// query (the server, the network, the clock).
    private let changes = Locked<[UUID: AsyncStream<Void>.Continuation]>([:])
    private let tasks: Locked<[Task<Void, Never>]>

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
            paging: Paging(firstCursor: 1, maxPages: 10, refetch: .allPages) { $0.next },
            pendingWrites: Self.pendingPosts(outbox),
            page: PostsPageLoader(server: server, directory: directory, clock: clock, transport: transport, logger: quiet))
        inspector = StrataInspector(queries: queries, outboxes: [outbox])
        let outbox = outbox
        let feed = feed
        tasks = Locked([
            Task { try? await outbox.run() },
            // The page is the feed's screen: observed for the demo's life, as a screen on show.
            Task { for await _ in feed.snapshots() {} },
        ])
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

    /// Writes a post through the outbox: shown at once, pending, and sent when the network allows.
    public func post(title: String, body: String = "Written in the web demo.") async throws {
        var request = HTTPRequest(method: .post, url: server.baseURL.appendingPathComponent("posts"))
        request.headerFields[.contentType] = "application/json"
        try await outbox.enqueue(request, body: try JSONEncoder().encode(NewPost(title: title, body: body)))
    }

    /// The simulated time now.
    public var now: Date { clock.date }

    // MARK: What the page shows

    /// The feed as the page shows it now.
    public func view() -> FeedView {
        FeedView(
            snapshot: feed.current, now: clock.date, serverOnline: server.isOnline, networkOnline: queries.isOnline,
            outbox: outbox.status, feedRequests: server.requests.filter { $0.method == "GET" && $0.path.hasPrefix("/posts/pages/") }.count)
    }

    /// A signal for every change the view may show: the feed's snapshots, the outbox's status,
    /// and the controls. Merged: a reader that falls behind gets one signal for many changes.
    func viewChanges() -> AsyncStream<Void> {
        let (signals, signal) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let id = UUID()
        changes.withLock { $0[id] = signal }
        let snapshots = feed.snapshots()
        let statuses = outbox.statusUpdates()
        let followers = [
            Task { for await _ in snapshots { signal.yield() } },
            Task { for await _ in statuses { signal.yield() } },
        ]
        signal.onTermination = { [changes] _ in
            followers.forEach { $0.cancel() }
            changes.withLock { _ = $0.removeValue(forKey: id) }
        }
        return signals
    }

    private func changed() {
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
