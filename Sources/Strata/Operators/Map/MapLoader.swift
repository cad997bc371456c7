/// Transforms a loader's output; built by ``Loader/map(_:)``.
public struct MapLoader<Base: Loader, Output: Sendable>: Loader {
    public typealias Input = Base.Input

    public let base: Base
    @usableFromInline let transform: @Sendable (consuming Base.Output) throws -> Output
    /// Whether an observer inside reports loads: its effects are then held until the transform
    /// has succeeded (decided once, when the operator is built).
    @usableFromInline let holdsEffects: Bool

    @inlinable
    init(base: Base, transform: @escaping @Sendable (consuming Base.Output) throws -> Output) {
        self.base = base
        self.transform = transform
        self.holdsEffects = base.chainNode.containsObserver
    }

    @inlinable @inline(__always)
    public func load(_ input: Input) async throws -> Output {
        try await loadTryingImmediately(input)
    }

    @inlinable
    public func load(_ input: Input, in context: LoadContext) async throws -> Output {
        try transform(try await base.load(input, in: context))
    }

    /// The base's immediate answer, transformed; `nil` when `transform` throws on it (the load then
    /// runs, and calls `transform` again on what it loads). The observers inside report the answer
    /// only once the transform succeeded: an attempt that ends in `nil` leaves no trace.
    @inlinable
    public func loadImmediately(_ input: Input, in context: LoadContext) -> Output? {
        guard !holdsEffects else { return loadHoldingEffects(input, in: context) }
        guard let value = base.loadImmediately(input, in: context) else { return nil }
        return try? transform(consume value)
    }

    /// The immediate answer with the observers' effects held until the transform succeeded: out
    /// of line, so the common case (no observer inside) stays small enough to inline.
    @usableFromInline
    func loadHoldingEffects(_ input: Input, in context: LoadContext) -> Output? {
        context.holdingEffects { context in
            guard let value = base.loadImmediately(input, in: context) else { return nil }
            return try? transform(consume value)
        }
    }
}

extension MapLoader: LoaderDescribing {
    public var loaderNode: LoaderNode {
        let inner = base.chainNode
        return LoaderNode(label: "map", summary: "\(inner.summary) + map", children: [inner])
    }
}

/// Transforms a loader's input before it loads; built by ``Loader/mapInput(_:)``.
public struct MapInputLoader<Base: Loader, Input: Sendable>: Loader {
    public typealias Output = Base.Output

    public let base: Base
    @usableFromInline let transform: @Sendable (Input) throws -> Base.Input

    @inlinable
    init(base: Base, transform: @escaping @Sendable (Input) throws -> Base.Input) {
        self.base = base
        self.transform = transform
    }

    @inlinable @inline(__always)
    public func load(_ input: Input) async throws -> Output {
        try await loadTryingImmediately(input)
    }

    @inlinable
    public func load(_ input: Input, in context: LoadContext) async throws -> Output {
        try await base.load(try transform(input), in: context)
    }

    /// The base's immediate answer for the transformed input; `nil` when `transform` throws (the
    /// load then runs and fails with its error).
    @inlinable
    public func loadImmediately(_ input: Input, in context: LoadContext) -> Output? {
        guard let baseInput = try? transform(input) else { return nil }
        return base.loadImmediately(baseInput, in: context)
    }
}

extension MapInputLoader: LoaderDescribing {
    public var loaderNode: LoaderNode { LoaderNode(label: "mapInput", children: [base.chainNode]) }
}

/// Replaces a loader's errors; built by ``Loader/mapError(_:)``.
public struct MapErrorLoader<Base: Loader>: Loader {
    public typealias Input = Base.Input
    public typealias Output = Base.Output

    public let base: Base
    @usableFromInline let transform: @Sendable (any Error) -> any Error

    @inlinable
    init(base: Base, transform: @escaping @Sendable (any Error) -> any Error) {
        self.base = base
        self.transform = transform
    }

    @inlinable @inline(__always)
    public func load(_ input: Input) async throws -> Output {
        try await loadTryingImmediately(input)
    }

    @inlinable
    public func load(_ input: Input, in context: LoadContext) async throws -> Output {
        do {
            return try await base.load(input, in: context)
        } catch {
            try rethrowIfCancelled(error)
            throw transform(error)
        }
    }

    /// The base's immediate answer: a value has no error to replace.
    @inlinable
    public func loadImmediately(_ input: Input, in context: LoadContext) -> Output? {
        base.loadImmediately(input, in: context)
    }
}

extension MapErrorLoader: LoaderDescribing {
    public var loaderNode: LoaderNode { LoaderNode(label: "mapError", children: [base.chainNode]) }
}

extension Loader {
    /// Transforms every loaded value; an error thrown by `transform` fails the load.
    ///
    /// `transform` owns the value it is given (`consuming`): returning it, or a part of it, copies
    /// nothing. A closure or function that takes its parameter the usual way converts to this type.
    ///
    /// ```swift
    /// let titles = feed.map { items in items.map(\.title) }
    /// ```
    @inlinable
    public func map<T: Sendable>(_ transform: @escaping @Sendable (consuming Output) throws -> T) -> MapLoader<Self, T> {
        MapLoader(base: self, transform: transform)
    }

    /// Adapts the input: the new loader takes `NewInput` and loads `transform(input)`.
    ///
    /// ```swift
    /// let postsByID = fileStore.loader(freshness: .any).mapInput { (id: Int) in "post-\(id)" }
    /// let feed = keyedFeed.mapInput { () in "home" }
    /// ```
    @inlinable
    public func mapInput<NewInput: Sendable>(
        _ transform: @escaping @Sendable (NewInput) throws -> Input
    ) -> MapInputLoader<Self, NewInput> {
        MapInputLoader(base: self, transform: transform)
    }

    /// Replaces every error (except cancellation) with `transform(error)`, for example to map
    /// Strata's errors into an app's domain errors.
    @inlinable
    public func mapError(_ transform: @escaping @Sendable (any Error) -> any Error) -> MapErrorLoader<Self> {
        MapErrorLoader(base: self, transform: transform)
    }
}
