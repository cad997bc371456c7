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
/// Operators such as ``Loader/fallingBack(to:)`` or ``Loader/writingThrough(in:key:)-(_,S.Key)`` return concrete
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

    /// The output a load of `input` would produce at once, without suspending: a value a memory
    /// tier holds and the chain's policy accepts; `nil` when the load has to run (a miss, an entry
    /// too old, I/O, a step that cannot answer synchronously).
    ///
    /// The hit path of a chain. An operator's ``load(_:)`` asks it first and runs the asynchronous
    /// load only when it answers `nil`, so a hit through a chain of Strata's operators is a chain of
    /// plain calls, and a view model can draw a cached value in its first frame (on the main actor,
    /// without a hop). An answer is the answer ``load(_:in:)`` would give: operators that only pass
    /// a value through (`named`, `map`, `environment`, `fallingBack` whose primary answers, the
    /// observers) forward it and record it as a load; operators whose work suspends (retries,
    /// timeouts, a remote, a write-through) answer `nil`. `nil` leaves no trace: nothing is logged,
    /// counted or written for an attempt that answers `nil`.
    ///
    /// The default answers `nil`: a loader of your own implements only ``load(_:)``.
    func loadImmediately(_ input: Input, in context: LoadContext) -> Output?
}

extension Loader {
    /// Runs ``load(_:)`` with `context` as the task's.
    @inlinable
    public nonisolated(nonsending) func load(_ input: Input, in context: LoadContext) async throws -> Output {
        try await context.bound { try await load(input) }
    }
}

extension Loader {
    /// No answer without suspending: the load has to run.
    @inlinable
    public func loadImmediately(_ input: Input, in context: LoadContext) -> Output? {
        nil
    }

    /// The value a load of `input` would produce at once, in the current task's context, or `nil`
    /// when it has to run (see ``loadImmediately(_:in:)``).
    ///
    /// ```swift
    /// // First frame: the cached feed if the memory tier holds a fresh one, then the real load.
    /// items = feed.loadImmediately(()) ?? []
    /// items = try await feed.load()
    /// ```
    @inlinable
    public func loadImmediately(_ input: Input) -> Output? {
        LoadContext.current.attemptingImmediately { loadImmediately(input, in: $0) }
    }

    /// A load in the current task's context that returns at once when ``loadImmediately(_:in:)``
    /// answers and runs ``load(_:in:)`` otherwise: the body of an operator's ``load(_:)``.
    ///
    /// The same as running it in ``LoadContext/current``, written out for its two cases: where no
    /// context is bound (most loads an app starts), the chain borrows the outside context where it
    /// is stored, instead of taking a copy of it that retains and releases each of its references.
    @inlinable @inline(__always)
    public nonisolated(nonsending) func loadTryingImmediately(_ input: Input) async throws -> Output {
        if let bound = LoadContext.taskValue {
            if let value = bound.attemptingImmediately({ loadImmediately(input, in: $0) }) { return value }
            return try await loadAfterImmediately(input, in: bound)
        }
        if let value = LoadContext.outside.attemptingImmediately({ loadImmediately(input, in: $0) }) { return value }
        return try await loadAfterImmediately(input, in: LoadContext.outside)
    }

    /// The load when there was no immediate answer, out of line: the hit path around it stays small
    /// enough for the caller to inline (a `map` whose slow path is inlined makes its callers' closures
    /// too big to inline, an async frame per hit).
    @usableFromInline @inline(never)
    nonisolated(nonsending) func loadAfterImmediately(_ input: Input, in context: LoadContext) async throws -> Output {
        try await load(input, in: context)
    }
}

extension Loader where Input == Void {
    /// Loads the single resource this loader stands for.
    ///
    /// The same answer as `load(())`, reached without a call through the protocol: it asks
    /// ``loadImmediately(_:in:)`` first and runs ``load(_:in:)`` only when that answers `nil`. A
    /// caller that inlines this then has no executor check on a hit (the compiler keeps one after
    /// every `await` of a protocol requirement, even a `nonisolated(nonsending)` one that cannot
    /// change executor).
    @inlinable @inline(__always)
    public nonisolated(nonsending) func load() async throws -> Output {
        try await loadTryingImmediately(())
    }
}
