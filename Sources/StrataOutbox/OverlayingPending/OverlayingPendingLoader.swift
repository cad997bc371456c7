import Foundation
@_spi(StrataInternals) import Strata

/// A read with the pending writes of an ``Outbox`` applied on top; built by
/// `overlayingPending(_:scope:apply:)`.
public struct OverlayingPendingLoader<Base: Loader>: Loader {
    public typealias Input = Base.Input
    public typealias Output = Base.Output

    /// The read whose values get the pending writes applied.
    public let base: Base
    /// The outbox whose pending writes are applied.
    public let outbox: Outbox
    let scope: @Sendable (Input) -> String
    let apply: @Sendable ([OutboxEntry], Output) throws -> Output

    public func load(_ input: Input) async throws -> Output {
        try await load(input, in: .current)
    }

    public func load(_ input: Input, in context: LoadContext) async throws -> Output {
        let scope = scope(input)
        // Pending writes are read before the base and again after it: a write delivered while the
        // base loads is in the first read (the base may not have it yet), a write queued meanwhile
        // is in the second, so none is shown in neither.
        let before = await pending(scope: scope)
        guard context.isRecording else {
            let value = try await base.load(input, in: context)
            return try overlay(before, await pending(scope: scope), on: value).value
        }
        let recorder = context.recorder()
        let value = try await base.load(input, in: context.recording(into: recorder))
        let (overlaid, applied) = try overlay(before, await pending(scope: scope), on: value)
        if applied > 0 {
            var provenance = servingProvenance(in: recorder.events)
                ?? Provenance(origin: .unknown, tier: context.tierName(default: base.chainSummary))
            provenance.pendingWrites = applied
            context.record(.served(provenance))
        }
        return overlaid
    }

    /// The scope's pending writes, oldest first; `nil` (logged) when the outbox could not read its storage.
    private func pending(scope: String) async -> [OutboxEntry]? {
        do {
            return try await outbox.pendingEntries(scope: scope)
        } catch {
            outbox.logger.warning(
                "pending writes not shown: the outbox could not be read",
                metadata: [
                    "outbox": "\(outbox.name)", "outbox.scope": "\(Redaction.redactingSecrets(inPath: scope))",
                    "error": "\(Redaction.redactingSecrets(in: "\(error)"))",
                ])
            return nil
        }
    }

    /// `value` with the writes pending before or after the base's read applied, and how many there
    /// were. An outbox that could not be read at all leaves the value as it is.
    private func overlay(_ before: [OutboxEntry]?, _ after: [OutboxEntry]?, on value: Output) throws -> (value: Output, applied: Int) {
        let pending = Self.union(before: before ?? [], after: after ?? [])
        guard !pending.isEmpty else { return (value, 0) }
        return (try apply(pending, value), pending.count)
    }

    /// The writes in either read, each once (as the later read has it, when both do), oldest first.
    static func union(before: [OutboxEntry], after: [OutboxEntry]) -> [OutboxEntry] {
        let later = Set(after.map(\.id))
        let gone = before.filter { !later.contains($0.id) }
        guard !gone.isEmpty else { return after }
        return (gone + after).sorted { $0.sequence < $1.sequence }
    }
}

extension OverlayingPendingLoader: LoaderDescribing {
    public var loaderNode: LoaderNode {
        LoaderNode(label: "overlaying pending writes of \(outbox.name)", summary: base.chainSummary, children: [base.chainNode])
    }
}

extension Loader {
    /// This read with the writes still queued in `outbox` for its scope applied on top, so the app
    /// shows what the user did before the server has it ("read your writes").
    ///
    /// Every load applies the writes pending *now* to the value the base loaded *now*: a fresh value
    /// from the server gets the still-pending writes applied again (rebase); a delivered write is no
    /// longer applied (the server's value has it); a parked write is rolled back out of reads. The
    /// provenance says how many were applied: `remote via posts, pending (2)`.
    ///
    /// The pending writes are read just before the base loads and again just after, and both reads
    /// are applied (each write once): a write delivered while the base loads is never missing from
    /// the value, in neither the base nor the overlay. It may be in both (the base read may already
    /// have it), so `apply` should not add a write the base already holds (match on an id).
    ///
    /// ```swift
    /// let posts = remotePosts
    ///     .overlayingPending(outbox, scope: { _ in "/posts" }) { pending, posts in
    ///         posts + pending.compactMap { try? $0.decoded(Post.self) }
    ///     }
    /// ```
    /// - Parameters:
    ///   - outbox: the outbox whose pending writes are shown.
    ///   - scope: the outbox scope whose writes change this input's value (for HTTP writes, by
    ///     default the URL's path: ``Outbox/defaultScope(for:)``).
    ///   - apply: the value with the pending writes (oldest first) applied. It runs on every load
    ///     that has pending writes, so keep it a pure function of its arguments.
    public func overlayingPending(
        _ outbox: Outbox,
        scope: @escaping @Sendable (Input) -> String,
        apply: @escaping @Sendable (_ pending: [OutboxEntry], _ base: Output) throws -> Output
    ) -> OverlayingPendingLoader<Self> {
        OverlayingPendingLoader(base: self, outbox: outbox, scope: scope, apply: apply)
    }
}

extension OutboxEntry {
    /// The write as `Value`, decoded from JSON: the payload of a typed write, or the body of an HTTP
    /// write (kind ``Outbox/httpKind``).
    ///
    /// `decoder` makes the decoder, as in `decoding(_:decoder:)`: one form of decoder
    /// parameter across Strata.
    public func decoded<Value: Decodable>(
        _ type: Value.Type, decoder: () -> JSONDecoder = { JSONDecoder() }
    ) throws -> Value {
        if kind == Outbox.httpKind {
            let request = try JSONDecoder().decode(OutboxRequest.self, from: payload)
            return try decoder().decode(Value.self, from: request.body ?? Data())
        }
        return try decoder().decode(Value.self, from: payload)
    }

    /// The stored request of an HTTP write (kind ``Outbox/httpKind``), or `nil` for other kinds.
    public var request: OutboxRequest? {
        guard kind == Outbox.httpKind else { return nil }
        return try? JSONDecoder().decode(OutboxRequest.self, from: payload)
    }
}
