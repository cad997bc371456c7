@_spi(StrataInternals) import Strata
import StrataOutbox

/// How a live query shows the writes an `Outbox` has not delivered yet: which outbox and scope,
/// and how a write changes the value (``QueryClient/query(_:tags:policy:cached:enabled:pendingWrites:chain:)``).
///
/// ```swift
/// let feed = queries.query(
///     ["feed"], policy: policy,
///     pendingWrites: PendingWrites(outbox, scope: "/posts") { pending, items in
///         let shown = Set(items.map(\.id))
///         return items + pending.compactMap { try? $0.decoded(FeedItem.self) }.filter { !shown.contains($0.id) }
///     },
///     chain: feedChain)
/// ```
///
/// The query applies the writes itself, so its value changes the moment a write is queued
/// (offline too), without a load:
/// - a write is shown from the moment it is queued, through every failed attempt that will be
///   retried, until the server has it;
/// - a write the server refuses for good (parked, or dropped because the server's version won) is
///   no longer shown: the value rolls back, and only for that write;
/// - a delivered write stays shown until a load that started after its delivery answers (the
///   server's copy then has it), and its delivery invalidates the query, so that load runs at once
///   when the query is observed. There is no gap in which the write disappears.
///
/// `apply` gets the writes oldest first. A delivered write may be in both the value the chain
/// loaded and the writes (the server had it before the next load): `apply` must not add it twice
/// (match on an id), and should be a pure function of its arguments, as it runs on every change.
/// Do not put `overlayingPending(_:scope:apply:)` in the query's chain as well.
public struct PendingWrites<Value: Sendable>: Sendable {
    /// The outbox whose writes are shown.
    public let outbox: Outbox
    /// The outbox scope whose writes change this value (for HTTP writes, by default the URL's path:
    /// `Outbox/defaultScope(for:)`).
    public let scope: String
    let apply: @Sendable (_ pending: [OutboxEntry], _ value: Value) throws -> Value

    /// Shows `outbox`'s writes of `scope` in the value, with `apply`.
    public init(
        _ outbox: Outbox, scope: String,
        apply: @escaping @Sendable (_ pending: [OutboxEntry], _ value: Value) throws -> Value
    ) {
        self.outbox = outbox
        self.scope = scope
        self.apply = apply
    }

    /// `snapshot` with `writes` applied to its value, counted in its provenance. A throwing `apply`
    /// leaves the value as the chain gave it (and the error is logged by the caller).
    func applied(_ writes: [OutboxEntry], to snapshot: QuerySnapshot<Value>) throws -> QuerySnapshot<Value> {
        guard !writes.isEmpty, let value = snapshot.value else { return snapshot }
        var snapshot = snapshot
        snapshot.value = try apply(writes, value)
        snapshot.provenance?.pendingWrites = writes.count
        return snapshot
    }
}
