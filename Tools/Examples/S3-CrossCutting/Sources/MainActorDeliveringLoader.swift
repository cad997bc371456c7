import Strata

/// Hands every result of a `Loader` to a `@MainActor` closure; built by
/// ``Strata/Loader/deliveredOnMainActor(_:)``.
///
/// In Swift concurrency the threading decorator becomes a hop to an actor. The load runs wherever
/// the base loader runs; then `deliver` is awaited on the main actor with the result, and `load`
/// returns (or throws) what the base produced. Code that is itself `@MainActor` (a view model) gets
/// the same guarantee by simply awaiting the load; this operator is for the callers that are not,
/// and for wiring a sink (a screen's state) at the composition root.
///
/// - Success and failure are both delivered, failure as `.failure(error)`.
/// - Cancellation is not a result: a cancelled load delivers nothing and throws `CancellationError`.
public struct MainActorDeliveringLoader<Base: Loader>: Loader {
    public typealias Input = Base.Input
    public typealias Output = Base.Output

    /// The loader whose results are delivered.
    public let base: Base
    let deliver: @MainActor @Sendable (Result<Output, any Error>) -> Void

    public func load(_ input: Input) async throws -> Output {
        let result: Result<Output, any Error>
        do {
            result = .success(try await base.load(input))
        } catch {
            // Strata's rule: a cancelled load reports cancellation, whatever its work ended with.
            if error is CancellationError { throw error }
            if Task.isCancelled { throw CancellationError() }
            result = .failure(error)
        }
        await deliver(result)
        return try result.get()
    }
}

extension MainActorDeliveringLoader: CustomStringConvertible {
    public var description: String { "\(describe(base)) + on main actor" }
}

extension Loader {
    /// Delivers every result of this loader to `deliver`, on the main actor, before `load` returns.
    ///
    /// ```swift
    /// let feed = remoteFeed.deliveredOnMainActor { result in screen.show(result) }
    /// ```
    public func deliveredOnMainActor(
        _ deliver: @escaping @MainActor @Sendable (Result<Output, any Error>) -> Void
    ) -> MainActorDeliveringLoader<Self> {
        MainActorDeliveringLoader(base: self, deliver: deliver)
    }
}
