import Strata

/// The analytics decorator as a Strata operator, for any `Loader`; built by
/// ``Strata/Loader/tracked(by:values:)``.
///
/// On success the values are tracked, then the output is returned unchanged. A failed or cancelled
/// load tracks nothing and its error passes through.
public struct TrackingLoader<Base: Loader>: Loader {
    public typealias Input = Base.Input
    public typealias Output = Base.Output

    /// The loader whose results are tracked.
    public let base: Base
    /// Receives the values of every successful load.
    public let tracker: any Tracker
    let values: @Sendable (Output) -> [String]

    public func load(_ input: Input) async throws -> Output {
        let output = try await base.load(input)
        await tracker.track(values: values(output))
        return output
    }
}

extension TrackingLoader: CustomStringConvertible {
    public var description: String { "\(describe(base)) + tracked" }
}

extension Loader {
    /// Tracks what every successful load produced, as `values(output)`.
    ///
    /// ```swift
    /// let feed = remoteFeed.tracked(by: tracker) { items in items.map(\.title) }
    /// ```
    public func tracked(
        by tracker: any Tracker, values: @escaping @Sendable (Output) -> [String]
    ) -> TrackingLoader<Self> {
        TrackingLoader(base: self, tracker: tracker, values: values)
    }
}

extension Loader where Output == [String] {
    /// Tracks the strings every successful load produced.
    public func tracked(by tracker: any Tracker) -> TrackingLoader<Self> {
        tracked(by: tracker) { $0 }
    }
}

/// A loader's description for chain descriptions: its own when it has one, otherwise its type name
/// (the rule Strata's operators follow; Strata's helper for it is internal).
func describe(_ loader: some Loader) -> String {
    (loader as? CustomStringConvertible)?.description ?? String(describing: type(of: loader))
}
