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
/// `failures` lists each tier's failure in the order the tiers were tried, the primary's first; nested
/// fallbacks (`a.fallback(to: b).fallback(to: c)`) are flattened into one list.
public struct FallbackError: Error, Sendable, CustomStringConvertible {
    public var failures: [TierFailure]

    public init(failures: [TierFailure]) {
        self.failures = failures
    }

    /// The primary tier's error: the one to show when only one can be shown.
    public var primaryError: any Error { failures[0].error }

    public var description: String {
        "all \(failures.count) tiers failed: " + failures.map(\.description).joined(separator: "; ")
    }
}

/// Tries `primary`, and `fallback` when the primary fails; built by ``Loader/fallback(to:)``.
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
        // A nested fallback has already recorded its own tiers' failures.
        if !(primary is any FallbackComposite) {
            LoadRecorder.record(.tierFailed(tier: describeLoader(primary), error: primaryError))
        }
        do {
            return try await fallback.load(input)
        } catch {
            try rethrowIfCancelled(error)
            if !(fallback is any FallbackComposite) {
                LoadRecorder.record(.tierFailed(tier: describeLoader(fallback), error: error))
            }
            throw FallbackError(failures: Self.failures(of: primary, primaryError) + Self.failures(of: fallback, error))
        }
    }

    private static func failures(of tier: some Loader, _ error: any Error) -> [TierFailure] {
        if let nested = error as? FallbackError, tier is any FallbackComposite { return nested.failures }
        return [TierFailure(tier: describeLoader(tier), error: error)]
    }
}

/// Marks loaders whose ``FallbackError`` lists tiers of their own, so an outer fallback flattens them.
protocol FallbackComposite {}
extension FallbackLoader: FallbackComposite {}

extension FallbackLoader: CustomStringConvertible {
    public var description: String { "\(describeLoader(primary)) → \(describeLoader(fallback))" }
}

extension Loader {
    /// Loads from this loader, and from `fallback` when this one fails (not when it is cancelled).
    ///
    /// ```swift
    /// let feed = freshLocal
    ///     .fallback(to: remote.cache(in: store, key: "feed"))
    ///     .fallback(to: staleLocal)
    ///     .fallback(to: bundledDefault)
    /// ```
    /// When every tier fails, the error is a ``FallbackError`` listing each tier's failure, this one's first.
    @inlinable
    public func fallback<Fallback: Loader>(to fallback: Fallback) -> FallbackLoader<Self, Fallback>
    where Fallback.Input == Input, Fallback.Output == Output {
        FallbackLoader(primary: self, fallback: fallback)
    }
}

/// Whether `error` means the load was cancelled rather than failed.
@usableFromInline
func isCancellation(_ error: any Error) -> Bool {
    error is CancellationError || Task.isCancelled
}

/// Throws `CancellationError` when `error` is one or the task has been cancelled: a cancelled load
/// reports cancellation, whatever error the cancelled work happened to end with.
@usableFromInline
func rethrowIfCancelled(_ error: any Error) throws {
    if error is CancellationError { throw error }
    if Task.isCancelled { throw CancellationError() }
}
