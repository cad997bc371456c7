/// One tier's failure inside a ``FallbackError``.
public struct TierFailure: Sendable, CustomStringConvertible {
    /// The tier, as described in the chain.
    public var tier: String
    /// Why it failed.
    public var error: any Error

    public init(tier: String, error: any Error) {
        self.tier = tier
        self.error = error
    }

    public var description: String { "\(tier): \(error)" }
}

/// Every tier of a fallback chain failed.
///
/// `failures` lists each tier's failure in the order the tiers were tried, the primary's first. A tier
/// that fails with a `FallbackError` of its own — a nested chain (`a.fallingBack(to: b.fallingBack(to: c))`),
/// also when it is wrapped in `named`, `map` or `AnyLoader` — contributes its tiers, so the list is flat.
public struct FallbackError: Error, Sendable, CustomStringConvertible {
    public var failures: [TierFailure]

    /// - Precondition: `failures` is not empty (a fallback chain has at least two tiers).
    public init(failures: [TierFailure]) {
        precondition(!failures.isEmpty, "a FallbackError lists at least one tier's failure")
        self.failures = failures
    }

    /// The primary tier's error: the one to show when only one can be shown.
    public var primaryError: any Error { failures[0].error }

    public var description: String {
        "all \(failures.count) tiers failed: " + failures.map(\.description).joined(separator: "; ")
    }
}

/// Tries `primary`, and `fallback` when the primary fails; built by ``Loader/fallingBack(to:)``.
///
/// Cancellation is not a failure: when the task is cancelled the fallback is not tried and
/// `CancellationError` is thrown.
public struct FallbackLoader<Primary: Loader, Fallback: Loader>: Loader
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

    @inlinable
    public func load(_ input: Input) async throws -> Output {
        do {
            return try await primary.load(input)
        } catch {
            return try await loadFallback(input, primaryError: error)
        }
    }

    @usableFromInline
    func loadFallback(_ input: Input, primaryError: any Error) async throws -> Output {
        try rethrowIfCancelled(primaryError)
        Self.recordFailure(of: primary, primaryError)
        do {
            return try await fallback.load(input)
        } catch {
            try rethrowIfCancelled(error)
            Self.recordFailure(of: fallback, error)
            throw FallbackError(failures: Self.failures(of: primary, primaryError) + Self.failures(of: fallback, error))
        }
    }

    /// A ``FallbackError`` from a tier comes from a fallback chain inside it (however it is wrapped:
    /// named, mapped, erased), which has already recorded each of its tiers' failures.
    private static func recordFailure(of tier: some Loader, _ error: any Error) {
        guard !(error is FallbackError) else { return }
        LoadRecorder.record(.tierFailed(tier: tier.chainSummary, error: error))
    }

    private static func failures(of tier: some Loader, _ error: any Error) -> [TierFailure] {
        if let nested = error as? FallbackError { return nested.failures }
        return [TierFailure(tier: tier.chainSummary, error: error)]
    }
}

extension FallbackLoader: LoaderDescribing {
    /// A `fallback` node whose children are the tiers in order; nested fallbacks flatten into one.
    public var loaderNode: LoaderNode {
        let tiers = [primary.chainNode, fallback.chainNode]
        var node = LoaderNode(
            label: "fallback",
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
    ///     .fallingBack(to: remote.writingThrough(to: store, key: "feed"))
    ///     .fallingBack(to: staleLocal)
    ///     .fallingBack(to: bundledDefault)
    /// ```
    /// When every tier fails, the error is a ``FallbackError`` listing each tier's failure, this one's first.
    @inlinable
    public func fallingBack<Fallback: Loader>(to fallback: Fallback) -> FallbackLoader<Self, Fallback>
    where Fallback.Input == Input, Fallback.Output == Output {
        FallbackLoader(primary: self, fallback: fallback)
    }
}

/// Throws `CancellationError` when `error` is one or the task has been cancelled: a cancelled load
/// reports cancellation, whatever error the cancelled work happened to end with.
@usableFromInline
func rethrowIfCancelled(_ error: any Error) throws {
    if error is CancellationError { throw error }
    if Task.isCancelled { throw CancellationError() }
}
