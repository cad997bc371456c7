import DemoServer
import Foundation
@_spi(StrataInternals) import Strata
import StrataOutbox
import StrataQueries

/// What the demo's page shows at one moment, as `GET /api/feed` and each server-sent event carry
/// it: the items, where they came from and how old they are, what the query is doing, and the
/// world around it (server, network, simulated clock, outbox).
public struct FeedView: Codable, Equatable, Sendable {
    public struct Item: Codable, Equatable, Sendable {
        /// The server's number; `nil` while the post is pending.
        public var id: Int?
        public var title: String
        public var body: String
        /// Written through the outbox, not on the server yet.
        public var pending: Bool
        /// Shown by the posting mutation while the server has not answered (optimistic).
        public var sending: Bool
    }

    /// The feed's post counter: a selection of the feed, and how many times it changed (it moves
    /// only when the number of posts does, whatever else the feed does).
    public struct Counter: Codable, Equatable, Sendable {
        public var count: Int?
        public var changes: Int
    }

    public var items: [Item]
    /// The tier that served the shown value (`remote`, `fresh local`, `stale local`, `bundled default`).
    public var source: String?
    /// How old the shown value is, by the time it was stored (`just now`, `2h 0m`, `1d 0h`).
    public var age: String?
    public var ageSeconds: Double?
    /// Whether the query counts the value stale (older than its 24 h).
    public var isStale: Bool
    /// `fresh`, `stale`, `loading`, `refreshing`, `paused`, `failed`: the badge's colour.
    public var state: String
    /// The query's phase as a sentence: `Loading…`, `Refreshing (reconnect)…`, `Paused: offline`,
    /// `Failed: …`, `Up to date`.
    public var phase: String
    public var lastError: String?
    public var pendingPosts: Int
    public var pages: Int
    /// The number of the first page held (the feed keeps two: past them, the first ones go).
    public var firstPage: Int?
    public var hasNextPage: Bool
    /// Whether a page before the first held can be loaded ("Load newer").
    public var hasPreviousPage: Bool
    public var counter: Counter
    /// The posting mutation: `idle`, `pending`, `succeeded`, `failed`, `queued`.
    public var posting: String
    /// Why the last post failed (the server's refusal), until the next post.
    public var postError: String?
    /// Whether the server refuses posts (`422`).
    public var refusingPosts: Bool
    public var serverOnline: Bool
    public var networkOnline: Bool
    /// The simulated time.
    public var now: Date
    /// Writes waiting in the outbox, and parked there.
    public var outboxPending: Int
    public var outboxParked: Int
    /// `GET /posts/pages/…` requests the server has received.
    public var feedRequests: Int

    init(
        snapshot: QuerySnapshot<FeedWebDemo.Feed>, now: Date, serverOnline: Bool, networkOnline: Bool, outbox: OutboxStatus, feedRequests: Int,
        posting: MutationSnapshot<NewPost, Post>, refusingPosts: Bool, counter: Counter
    ) {
        let pages = snapshot.value?.pages ?? []
        items = pages.flatMap(\.posts).map { post in
            Item(id: post.id > 0 ? post.id : nil, title: post.title, body: post.body, pending: post.id < 0, sending: post.id == 0)
        }
        firstPage = snapshot.value?.cursors.first
        hasPreviousPage = snapshot.value?.hasPreviousPage ?? false
        self.counter = counter
        self.posting = posting.status.rawValue
        postError = posting.error.map { Redaction.redactingSecrets(in: $0.description) }
        self.refusingPosts = refusingPosts
        source = snapshot.provenance?.tier
        ageSeconds = snapshot.storedAt.map { now.timeIntervalSince($0) }
        age = ageSeconds.map(Self.describeAge)
        isStale = snapshot.isStale
        let error = snapshot.lastError.map { Redaction.redactingSecrets(in: $0.description) }
        lastError = error
        switch snapshot.phase {
        case .fetching(let reason) where snapshot.value == nil:
            state = "loading"
            phase = "Loading (\(reason))…"
        case .fetching(let reason):
            state = "refreshing"
            phase = "Refreshing (\(reason))…"
        case .paused(let why):
            state = "paused"
            phase = "Paused: \(why)"
        case .idle where snapshot.status == .failed:
            state = "failed"
            phase = "Failed: \(error ?? "unknown error")"
        case .idle:
            state = snapshot.isStale ? "stale" : "fresh"
            phase = error.map { "Showing the last copy; the last load failed: \($0)" } ?? (snapshot.isStale ? "Stale: refetched when the app can" : "Up to date")
        }
        pendingPosts = snapshot.pendingWrites
        self.pages = pages.count
        hasNextPage = snapshot.value?.hasNextPage ?? false
        self.serverOnline = serverOnline
        self.networkOnline = networkOnline
        self.now = now
        outboxPending = outbox.pending
        outboxParked = outbox.parked
        self.feedRequests = feedRequests
    }

    /// `just now`, `45s`, `12m 5s`, `2h 0m`, `1d 0h`.
    static func describeAge(_ seconds: Double) -> String {
        let whole = Int(seconds.rounded(.down))
        switch whole {
        case ..<1: return "just now"
        case ..<60: return "\(whole)s"
        case ..<3600: return "\(whole / 60)m \(whole % 60)s"
        case ..<86_400: return "\(whole / 3600)h \(whole % 3600 / 60)m"
        default: return "\(whole / 86_400)d \(whole % 86_400 / 3600)h"
        }
    }
}
