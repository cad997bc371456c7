import DemoServer
import Foundation
import Logging
import PostsRepositoryExample
@_spi(StrataInternals) import Strata
import StrataOutbox

/// Offline writes, step by step: S2's posts repository in its production configuration, with its
/// outbox in real files and the real demo server, on a simulated clock.
///
/// A post written while the server is down is queued and shown as pending; the app is killed (its
/// outbox and repository are dropped, and new ones are built over the same directories, as a
/// relaunch does); the server comes back; the post is created once, even though the server's
/// answer to the first attempt is lost (it applies the write, then drops the connection) and the
/// outbox sends it again; the pending row gives way to the server's post.
public struct OfflineWriteScenario: Sendable {
    /// What one step of the scenario observed.
    public struct Step: Sendable, Equatable {
        /// The step's heading.
        public var title: String
        /// What the app showed: the answer to "Post", or the list of posts.
        public var shown: String
        /// The list of posts the step read, if it read one.
        public var list: [PostListItem]?
        /// How many pending creates the list read applied (its provenance's `pending (n)`).
        public var pendingInList: Int
        /// Writes waiting in the outbox after the step.
        public var queued: Int
        /// Entry files in the outbox's directory after the step.
        public var filesOnDisk: Int
        /// Posts the server holds after the step.
        public var serverPosts: Int
        /// Requests the app sent during this step (answered or not).
        public var requestsSent: Int
        /// Requests the server received during this step.
        public var requestsReceived: Int
        /// What the server did with each write it received during this step, in its words
        /// (`POST /posts Idempotency-Key …: applied (201), connection dropped without an answer`).
        public var serverWrites: [String]
    }

    /// The post the scenario writes.
    public static let title = "Written on the train"

    public init() {}

    /// Runs the scenario, writing each line of the narration through `write`, and returns what each step observed.
    public func run(write: @escaping @Sendable (String) -> Void) async throws -> [Step] {
        let server = try await DemoServer.start()
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("strata-offline-write-demo-\(UUID().uuidString)", isDirectory: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let outboxDirectory = directory.appendingPathComponent("outbox", isDirectory: true)
        let cacheDirectory = directory.appendingPathComponent("posts", isDirectory: true)
        // Whole seconds: the outbox's files keep times in milliseconds, and a time read back a hair
        // later than it was written would leave a write "not yet due" on a clock that stands still.
        let clock = DemoClock(startingAt: Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down)))
        let client = CountingHTTPClient()
        let quiet = Logger(label: "strata.demo", factory: { _ in SwiftLogNoOpLogHandler() })
        let environment = LoadEnvironment(now: clock.dates, clock: clock, logger: quiet)
        let delivered = Locked<[(PendingPost, PostsRepositoryExample.Post)]>([])
        let serverWrites = Locked<[DemoServer.WriteEvent]>([])
        server.onWrite { event in serverWrites.withLock { $0.append(event) } }

        /// One launch of the app: a new outbox and repository over the same directories.
        struct Launch {
            let outbox: Outbox
            let repo: any PostRepo
            let list: any Loader<[Int], [PostListItem]>
        }
        @Sendable func launch() -> Launch {
            let outbox = PostsEnvironment.makeOutbox(
                directory: outboxDirectory, environment: environment, retry: OutboxRetryPolicy(random: { 0 }))
            let production = PostsEnvironment.production(baseURL: server.baseURL, cacheDirectory: cacheDirectory, outbox: outbox)
            let repo = production.makePostRepo(transport: client) { pending, post in
                delivered.withLock { $0.append((pending, post)) }
            }
            let list = PostLoaders.withPendingCreates(PostLoaders.posts(in: repo).named("posts"), outbox: outbox)
            return Launch(outbox: outbox, repo: repo, list: list)
        }

        write("Strata demo: offline writes (S2's posts repository with a durable outbox)")
        write("  server  \(server.baseURL.absoluteString)  (Hummingbird, in this process; honours Idempotency-Key)")
        write("  outbox  \(outboxDirectory.path)  (FileOutboxStorage: one checksummed file per write)")
        write("  repo    PostRepoOutboxDecorator → PostRepoCacheDecorator → HTTPPostRepo  (PostsEnvironment.production)")
        write("  list    PostLoaders.withPendingCreates: the server's posts, then the creates still queued")
        write("  clock   simulated: the outbox's backoff passes when the demo says so")

        var steps: [Step] = []
        var currentOutbox: Outbox?
        func step(_ title: String, _ situation: String, details: [String] = [], _ body: () async throws -> (shown: String, served: Served<[PostListItem]>?)) async throws {
            let sentBefore = client.requestCount
            let receivedBefore = server.requests.count
            let (shown, served) = try await body()
            let queued = try await currentOutbox?.entries().filter(\.isPending).count ?? 0
            let writes = serverWrites.withLock { writes in
                defer { writes = [] }
                return writes
            }
            let result = Step(
                title: title, shown: shown, list: served?.value, pendingInList: served?.provenance.pendingWrites ?? 0,
                queued: queued, filesOnDisk: Self.entryFiles(in: outboxDirectory), serverPosts: server.posts.count,
                requestsSent: client.requestCount - sentBefore, requestsReceived: server.requests.count - receivedBefore,
                serverWrites: writes.map(\.description))
            let answered = result.requestsReceived - writes.filter(\.connectionDropped).count
            steps.append(result)
            write("")
            write("\(steps.count). \(title)")
            write("   situation  \(situation)")
            write("   shown      \(shown)")
            if let served { write("   provenance \(served.provenance)") }
            for detail in details { write("   \(detail)") }
            write("   outbox     \(result.queued) queued, \(result.filesOnDisk) file\(result.filesOnDisk == 1 ? "" : "s") on disk")
            for event in result.serverWrites { write("   server     \(event)") }
            write("   server     holds \(result.serverPosts) post\(result.serverPosts == 1 ? "" : "s")")
            write("   network    \(Narration.network(sent: result.requestsSent, answered: answered))")
        }

        // Launch 1: the server is down.
        await server.goOffline()
        var pending: PendingPost?
        weak var firstOutbox: Outbox?
        do {
            let first = launch()
            firstOutbox = first.outbox
            currentOutbox = first.outbox
            try await step("Offline: write a post", "the server refuses connections; the user presses \"Post\"") {
                let result = try await first.repo.submitPost(title: Self.title, body: "No signal between stations.")
                pending = result.pendingPost
                return (Self.describe(result), nil)
            }
            try await step("Offline: the list of posts", "the app shows its list right after posting") {
                let served = try await first.list.loadServed([])
                return (Self.describe(served.value), served)
            }
            currentOutbox = nil
        }
        guard let pending else { throw OfflineWriteScenarioError.notQueued }
        write("")
        write("The app is killed: its Outbox, repository and list are dropped; only the files remain"
            + (firstOutbox == nil ? " (the first launch's Outbox has been deallocated)." : " (but the first launch's Outbox is still in memory!)."))

        // Launch 2: a new process would build exactly this.
        let second = launch()
        currentOutbox = second.outbox
        try await step(
            "Relaunch, still offline", "a new Outbox and repository over the same directories; nothing in memory survived"
        ) {
            let served = try await second.list.loadServed([])
            return (Self.describe(served.value), served)
        }

        // The server is back, but its answer to the first attempt is lost: it applies the write,
        // then drops the connection before a byte of answer.
        try await server.goOnline()
        server.faults = .init(writeFault: .dropAfterApply, remainingWriteFaults: 1)
        second.outbox.connectivityChanged(isOnline: true)
        try await step(
            "Online: the outbox sends the post", "the server is back; the outbox drains (what outbox.run() does when connectivity returns)",
            details: ["key        Idempotency-Key \(pending.idempotencyKey) (chosen when the user pressed \"Post\")"]
        ) {
            let report = try await second.outbox.drain()
            let entry = try await second.outbox.entries().first
            let failure = entry?.lastFailure.map { "\($0.class.rawValue): \($0.message)" } ?? "none"
            let retryIn = entry.map { Duration.seconds($0.nextAttemptAt.timeIntervalSince(clock.date)).formattedAge } ?? "n/a"
            return ("\(report.delivered) delivered; the answer was lost (\(failure)); next attempt in \(retryIn), same key", nil)
        }

        clock.skip(.seconds(1))
        try await step(
            "A second later: the outbox sends it again", "the backoff is over; the write goes out again with the same Idempotency-Key"
        ) {
            let report = try await second.outbox.drain()
            let created = delivered.withLock { $0 }.map { "post \($0.1.id) \"\($0.1.title)\"" }.joined(separator: ", ")
            return ("\(report.delivered) delivered: \(created.isEmpty ? "nothing" : created) (the server's id for the pending post)", nil)
        }

        try await step("Online: the list of posts", "the app shows its list again") {
            let ids = delivered.withLock { $0 }.map(\.1.id)
            let served = try await second.list.loadServed(ids)
            return (Self.describe(served.value), served)
        }

        let record = server.idempotencyKey(pending.idempotencyKey)
        await server.stop()
        write("")
        write("The server's record of Idempotency-Key \(pending.idempotencyKey): "
            + "\(record?.requests ?? 0) requests, applied \(record?.applied ?? 0), answered again from the record \(record?.replayed ?? 0).")
        write("Written offline, queued in a file, sent after a relaunch, its answer lost and sent again: "
            + "\(server.posts.count) post\(server.posts.count == 1 ? "" : "s") on the server.")
        return steps
    }

    /// The `.outbox` files in `directory`.
    static func entryFiles(in directory: URL) -> Int {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.filter { $0.hasSuffix(".outbox") }.count
    }

    static func describe(_ result: CreateResult) -> String {
        switch result {
        case .created(let post): "created: post \(post.id) \"\(post.title)\""
        case .pending(let pending): "pending: \"\(pending.title)\", client id \(pending.idempotencyKey)"
        }
    }

    static func describe(_ list: [PostListItem]) -> String {
        guard !list.isEmpty else { return "no posts" }
        return list.map { item in
            switch item {
            case .post(let post): "post \(post.id) \"\(post.title)\""
            case .pending(let pending): "\"\(pending.title)\" (pending)"
            }
        }.joined(separator: ", ")
    }
}

/// The scenario could not go on.
enum OfflineWriteScenarioError: Error, CustomStringConvertible {
    /// The post written offline was not queued (the server answered after all?).
    case notQueued

    var description: String {
        switch self {
        case .notQueued: "the offline write demo expected its post to be queued, but it was not"
        }
    }
}
