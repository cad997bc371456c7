import Foundation
import Strata
import StrataOutbox

/// Makes "Post" work offline: a create the server cannot take now is queued in a Strata `Outbox`
/// and sent later, once, even if the app is killed in between.
///
/// - ``submitPost(title:body:)`` picks a client id for the post (``PendingPost/id``) and asks
///   ``inner`` to create it with that id as its idempotency key. When the server cannot be reached
///   (no answer, a timeout, 408, 429, 5xx) the post is queued durably and returned as
///   ``CreateResult/pending(_:)``. A rejection (another 4xx) is thrown: sending it again would
///   fail the same way, so nothing is queued. While the outbox knows the device is offline, or
///   while earlier creates are still queued, the post is queued without trying, so posts reach the
///   server in the order they were written.
/// - The queued write is a ``PendingPost`` under the kind ``createKind``. Building the decorator
///   registers that kind's handler on the outbox, so a relaunched app that builds it again sends
///   what an earlier launch queued. The handler creates the post through ``inner`` with the same
///   key as the first attempt: if that attempt reached the server and only its answer was lost,
///   a server that honours `Idempotency-Key` answers with the post it already created.
/// - `getPost(id:)` and `createPost(title:body:)` are forwarded: `createPost` keeps the protocol's
///   promise of a post with its server id, so it throws when the server cannot be reached.
///
/// Delivery is the outbox's job: the app runs `outbox.run()` (drains at start, when connectivity
/// returns, after backoffs) or calls `outbox.drain()`. Reads show queued posts with
/// ``PostLoaders/withPendingCreates(_:outbox:)``.
///
/// ```swift
/// let outbox = Outbox(storage: FileOutboxStorage(directory: supportDirectory.appendingPathComponent("outbox")))
/// let repo = PostRepoOutboxDecorator(inner: PostRepoCacheDecorator(inner: HTTPPostRepo(client: api), cache: cache),
///                                    outbox: outbox)
/// Task { try await outbox.run() }
/// switch try await repo.submitPost(title: "On the train", body: "No signal here.") {
/// case .created(let post): show(post)
/// case .pending(let pending): show(pending, badge: "sending…")
/// }
/// ```
///
/// ## Server ids
/// Client-chosen ids are the documented way: the pending post is known by its UUID until the
/// server numbers it. S2 queues only creates, and no queued write refers to another, so nothing
/// queued behind a create needs rewriting. An app that also queues edits of a post it created
/// offline would refer to the pending post by its UUID and let the create's handler return
/// `.delivered(rewritingLaterWrites:)` to put the server's `Int` id into those edits.
public struct PostRepoOutboxDecorator: PostRepoDecorator {
    /// The outbox kind of a queued create; its payload is a ``PendingPost`` as JSON.
    public static let createKind = "post.create"
    /// The outbox scope of creates: one scope, so posts are created in the order they were written.
    public static let scope = "posts"

    public let inner: any PostRepo
    /// Where creates wait while the server cannot be reached.
    public let outbox: Outbox

    /// Wraps `inner`, queueing creates in `outbox`, and registers the handler of ``createKind`` on
    /// `outbox` (replacing an earlier one): queued creates are sent through `inner`.
    /// - Parameter delivered: called after a queued post was created, with the server's post (its
    ///   `Int` id): where an app replaces the pending row with the real one.
    public init(inner: any PostRepo, outbox: Outbox, delivered: (@Sendable (PendingPost, Post) async -> Void)? = nil) {
        self.inner = inner
        self.outbox = outbox
        outbox.register(Self.createKind, as: PendingPost.self) { pending, _ in
            let post = try await inner.createPost(title: pending.title, body: pending.body, idempotencyKey: pending.id)
            await delivered?(pending, post)
            return .delivered
        }
    }

    public func submitPost(title: String, body: String) async throws -> CreateResult {
        let pending = PendingPost(title: title, body: body)
        if await mustWaitInLine() { return try await queue(pending) }
        do {
            return .created(try await inner.createPost(title: title, body: body, idempotencyKey: pending.id))
        } catch where Self.isWorthQueueing(error) {
            return try await queue(pending)
        }
    }

    /// The creates still queued, oldest first.
    /// - Throws: `OutboxError.storage` when the outbox cannot be read.
    public func pendingPosts() async throws -> [PendingPost] {
        try await outbox.pendingEntries(scope: Self.scope).filter { $0.kind == Self.createKind }
            .compactMap { try? $0.decoded(PendingPost.self) }
    }

    /// Queues `pending`; durable when this returns.
    /// - Throws: `OutboxError.storage` when it could not be saved: the post is not queued.
    private func queue(_ pending: PendingPost) async throws -> CreateResult {
        try await outbox.enqueue(pending, kind: Self.createKind, scope: Self.scope)
        return .pending(pending)
    }

    /// Whether the post must be queued without an attempt: the outbox knows the device is offline,
    /// or earlier creates are still queued (sending this one now would overtake them). An outbox
    /// that cannot be read does not hold the post back: it is tried, and queueing it reports the failure.
    private func mustWaitInLine() async -> Bool {
        if !outbox.status.isOnline { return true }
        return (try? await outbox.pendingEntries(scope: Self.scope))?.isEmpty == false
    }

    /// Failures the outbox retries: no answer, a timeout, 408, 429 and 5xx.
    static func isWorthQueueing(_ error: any Error) -> Bool {
        if error is CancellationError { return false }
        if error is TimeoutError { return true }
        return (error as? any FailureClassifying)?.isTransientFailure == true
    }
}
