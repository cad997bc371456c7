/// Tries `primary`, and `fallback` when the primary fails; built by ``Loader/fallingBack(to:)``.
///
/// Cancellation is not a failure: when the task is cancelled the fallback is not tried and
/// `CancellationError` is thrown.
public struct FallingBackLoader<Primary: Loader, Fallback: Loader>: Loader
where Primary.Input == Fallback.Input, Primary.Output == Fallback.Output {
    public typealias Input = Primary.Input
    public typealias Output = Primary.Output

    public let primary: Primary
    public let fallback: Fallback

    @inlinable
    public init(primary: Primary, fallback: Fallback) {
        self.primary = primary
        self.fallback = fallback
    }

    @inlinable @inline(__always)
    public func load(_ input: Input) async throws -> Output {
        try await loadTryingImmediately(input)
    }

    @inlinable
    public func load(_ input: Input, in context: LoadContext) async throws -> Output {
        do {
            return try await primary.load(input, in: context)
        } catch {
            return try await loadFallback(input, primaryError: error, in: context)
        }
    }

    /// The primary's immediate answer: a value the primary holds at once is the value this loader
    /// serves. When the primary cannot answer at once the load runs (the fallback is consulted only
    /// after the primary failed, and it can fail only by running).
    @inlinable
    public func loadImmediately(_ input: Input, in context: LoadContext) -> Output? {
        primary.loadImmediately(input, in: context)
    }

    @usableFromInline
    func loadFallback(_ input: Input, primaryError: any Error, in context: LoadContext) async throws -> Output {
        try rethrowIfCancelled(primaryError)
        Self.recordFailure(of: primary, primaryError, in: context)
        do {
            return try await fallback.load(input, in: context)
        } catch {
            try rethrowIfCancelled(error)
            Self.recordFailure(of: fallback, error, in: context)
            throw FallbackError(failures: Self.failures(of: primary, primaryError) + Self.failures(of: fallback, error))
        }
    }

    /// A ``FallbackError`` from a tier comes from a fallback chain inside it (however it is wrapped:
    /// named, mapped, erased), which has already recorded each of its tiers' failures.
    private static func recordFailure(of tier: some Loader, _ error: any Error, in context: LoadContext) {
        guard !(error is FallbackError) else { return }
        context.record(.tierFailed(tier: tier.chainSummary, error: error))
    }

    private static func failures(of tier: some Loader, _ error: any Error) -> [TierFailure] {
        if let nested = error as? FallbackError { return nested.failures }
        return [TierFailure(tier: tier.chainSummary, error: error)]
    }
}

extension FallingBackLoader: LoaderDescribing {
    /// A `fallback` node whose children are the tiers in order; nested fallbacks flatten into one.
    public var loaderNode: LoaderNode {
        let tiers = [primary.chainNode, fallback.chainNode]
        var node = LoaderNode(
            label: "fallingBack",
            summary: tiers.map(\.summary).joined(separator: " → "),
            children: tiers.flatMap { $0.isFallback ? $0.children : [$0] }
        )
        node.isFallback = true
        return node
    }
}

extension Loader {
    /// Loads from this loader, and from `fallback` when this one fails (not when it is cancelled).
    ///
    /// ```swift
    /// let feed = freshLocal
    ///     .fallingBack(to: remote.writingThrough(in: store, key: "feed"))
    ///     .fallingBack(to: staleLocal)
    ///     .fallingBack(to: bundledDefault)
    /// ```
    /// When every tier fails, the error is a ``FallbackError`` listing each tier's failure, this one's first.
    @inlinable
    public func fallingBack<Fallback: Loader>(to fallback: Fallback) -> FallingBackLoader<Self, Fallback>
    where Fallback.Input == Input, Fallback.Output == Output {
        FallingBackLoader(primary: self, fallback: fallback)
    }
}
