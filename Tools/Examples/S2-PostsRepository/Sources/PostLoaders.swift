import Foundation
import Strata
import StrataOutbox

/// The same repository reads and writes written as Strata chains instead of decorator classes.
///
/// ``PostRepoCacheDecorator`` answers `getPost` from the cache, else asks the server and remembers
/// the answer. In Strata that is one line: a keyed store read, falling back to the remote load that
/// writes through to the same store:
///
/// ```swift
/// store.loader(freshness: .any).mapInput { "post-\($0)" }
///     .fallingBack(to: remote.writingThrough(in: store) { "post-\($0)" })
/// ```
///
/// Both forms use the keys of ``StorePostCache/key(for:)``, so they can share a store. They differ
/// in one way: when neither the cache nor the server has the post, the chain throws Strata's
/// `FallbackError` naming both tiers ("cached post: nothing cached …; remote: HTTP 404 …"), while
/// the decorator throws ``PostRepoError/notFound(id:)``. The chain also takes a freshness policy, so
/// `.maxAge(.seconds(1 * 3600))` turns "cached forever" into "cached for an hour" without a new type.
public enum PostLoaders {
    /// `GET {baseURL}/posts/{id}`, decoded as a ``Post``.
    public static func remote(
        baseURL: URL, transport: any HTTPTransport = URLSessionHTTPClient.shared
    ) -> some Loader<Int, Post> {
        HTTPLoader.get(transport: transport) { (id: Int) in baseURL.appendingPathComponent("posts/\(id)") }
            .decoding(Post.self)
    }

    /// `POST {baseURL}/posts` with a ``PostDraft`` as JSON, decoding the created ``Post``.
    public static func create(
        baseURL: URL, transport: any HTTPTransport = URLSessionHTTPClient.shared
    ) -> some Loader<PostDraft, Post> {
        HTTPLoader<PostDraft>.postJSON(to: baseURL.appendingPathComponent("posts"), transport: transport)
            .decoding(Post.self)
    }

    /// The cache-first keyed read: the post stored under `"post-<id>"` while `policy` accepts it,
    /// otherwise `remote`, whose answer is written to `store` under the same key.
    ///
    /// - Parameters:
    ///   - remote: where posts come from when the store has none (or none fresh enough).
    ///   - store: where posts are cached; the same store a ``StorePostCache`` may use.
    ///   - policy: how old a cached post may be; `.any` (the default) is the decorator's behaviour.
    ///   - now: the wall clock for stamping and judging entries.
    public static func cacheFirst<Remote: Loader<Int, Post>, S: Store>(
        remote: Remote, store: S, policy: FreshnessPolicy = .any,
        now: @escaping @Sendable () -> Date = { Date() }
    ) -> some Loader<Int, Post> where S.Key == String, S.Value == Post {
        store.loader(freshness: policy)
            .mapInput { (id: Int) in StorePostCache<S>.key(for: id) }
            .named("cached post")
            .fallingBack(to: remote.writingThrough(in: store) { StorePostCache<S>.key(for: $0) }.named("remote"))
            .environment(\.now, now)
    }

    /// The posts with the ids given, in that order, read through `repo` (so a cache decorator
    /// answers the ones it holds); ids the repository has no post for are left out. Any other
    /// failure (the server unreachable for a post not cached) fails the read.
    public static func posts(in repo: any PostRepo) -> some Loader<[Int], [Post]> {
        ClosureLoader("posts") { (ids: [Int]) in
            var posts: [Post] = []
            for id in ids {
                do {
                    posts.append(try await repo.getPost(id: id))
                } catch PostRepoError.notFound {
                    continue
                }
            }
            return posts
        }
    }

    /// A list of posts with the creates still queued in `outbox` after them (a
    /// ``PostRepoOutboxDecorator``'s ``PendingPost``s, oldest first): what the user wrote shows at
    /// once, marked pending, before the server has it.
    ///
    /// Built on Strata's `overlayingPending`: every read applies the creates queued *now* to the
    /// list read *now*. A created post leaves the overlay the moment it is delivered (the server's
    /// list has it), a create the server rejected (parked in the outbox) drops out, and the read's
    /// provenance says how many were applied: `… via posts, pending (1)` (the base's name).
    public static func withPendingCreates<Base: Loader>(
        _ base: Base, outbox: Outbox
    ) -> some Loader<Base.Input, [PostListItem]> where Base.Output == [Post] {
        // Named after the base, so the provenance names it rather than "… + map".
        base.map { posts in posts.map(PostListItem.post) }.named(base.chainSummary)
            .overlayingPending(outbox, scope: { _ in PostRepoOutboxDecorator.scope }) { pending, items in
                items + pending.filter { $0.kind == PostRepoOutboxDecorator.createKind }
                    .compactMap { try? $0.decoded(PendingPost.self) }
                    .map(PostListItem.pending)
            }
    }
}

