/// Anything that produces a value asynchronously: a network call, a cache read, a bundled file, or a
/// whole chain of them.
///
/// One protocol covers keyed loads (`Loader<Int, Post>`), unkeyed loads (`Loader<Void, [FeedItem]>`)
/// and writes (`Loader<NewPost, Post>`), so every decorator and composite in Strata is written once.
///
/// ## Contract
/// - `load(_:)` may be called concurrently from any task.
/// - Cancellation is Swift task cancellation: a loader stops its work when its task is cancelled and
///   throws `CancellationError`; decorators never treat cancellation as an ordinary failure
///   (no fallback, no cache write).
/// - Errors are typed by the layer that failed (``HTTPError``, ``CacheLoadError``, ``FallbackError``,
///   ``StoreError`` …) so a caller can tell which tier failed and why.
///
/// Operators such as ``Loader/fallingBack(to:)`` or ``Loader/writingThrough(to:key:)-(_,S.Key)`` return concrete
/// generic types, so a composed chain is specialised by the compiler. Use ``AnyLoader`` only where a
/// caller must store loaders of different concrete types.
public protocol Loader<Input, Output>: Sendable {
    /// What a load is keyed by; `Void` for a single resource.
    associatedtype Input: Sendable = Void
    /// What a load produces.
    associatedtype Output: Sendable

    /// Produces the output for `input`, or throws the error of the layer that failed.
    ///
    /// `nonisolated(nonsending)` (SE-0461): the load runs on the caller's executor. A chain asked on
    /// the main actor for a value a memory store holds answers on the main actor, without leaving the
    /// main thread; the operators whose work must not run there (decoding, reading a bundled file,
    /// racing a timeout, a store's blocking I/O) move it off the caller's executor themselves.
    nonisolated(nonsending) func load(_ input: Input) async throws -> Output

    /// Produces the output for `input` within `context`: the environment, the recorders and the tier
    /// name the operators around this loader pass down (see ``LoadContext``).
    ///
    /// A loader of your own implements only ``load(_:)``: the default binds `context` as the task's
    /// (when it is not already) and calls it, so ``LoadEnvironment/current`` and
    /// ``LoadRecorder/record(_:)`` reach the chain around it. Strata's operators implement this one,
    /// pass the context to the loaders they wrap, and start from ``LoadContext/current`` in
    /// ``load(_:)``: a load through a chain of them binds no task-local value for its context.
    nonisolated(nonsending) func load(_ input: Input, in context: LoadContext) async throws -> Output
}

extension Loader {
    /// Runs ``load(_:)`` with `context` as the task's.
    @inlinable
    public nonisolated(nonsending) func load(_ input: Input, in context: LoadContext) async throws -> Output {
        try await context.bound { try await load(input) }
    }
}

extension Loader where Input == Void {
    /// Loads the single resource this loader stands for.
    @inlinable
    public nonisolated(nonsending) func load() async throws -> Output {
        try await load(())
    }
}
