/// A type-erased loader.
///
/// Operators return concrete types so chains are specialised; erase only where a caller must store
/// loaders of different concrete types behind one type (a dependency container, a heterogeneous array).
/// Erasing costs one indirect call per load.
public struct AnyLoader<Input: Sendable, Output: Sendable>: Loader {
    @usableFromInline let body: @Sendable (Input, LoadContext) async throws -> Output
    /// The erased loader's ``Loader/loadImmediately(_:in:)``.
    @usableFromInline let immediately: @Sendable (Input, LoadContext) -> Output?
    /// The erased loader's node, so chains stay readable after erasure.
    public let loaderNode: LoaderNode

    /// Erases `base`.
    public init<Base: Loader>(_ base: Base) where Base.Input == Input, Base.Output == Output {
        if let alreadyErased = base as? AnyLoader<Input, Output> {
            self = alreadyErased
            return
        }
        self.body = { try await base.load($0, in: $1) }
        self.immediately = { base.loadImmediately($0, in: $1) }
        self.loaderNode = base.chainNode
    }

    /// A loader that runs `body` for every load.
    public init(_ description: String = "closure", _ body: @escaping @Sendable (Input) async throws -> Output) {
        self.body = { input, context in try await context.bound { try await body(input) } }
        self.immediately = { _, _ in nil }
        self.loaderNode = .leaf(description)
    }

    @inlinable @inline(__always)
    public func load(_ input: Input) async throws -> Output {
        try await loadTryingImmediately(input)
    }

    @inlinable
    public func loadImmediately(_ input: Input, in context: LoadContext) -> Output? {
        immediately(input, context)
    }

    @inlinable
    public func load(_ input: Input, in context: LoadContext) async throws -> Output {
        try await body(input, context)
    }
}

extension AnyLoader: LoaderDescribing {}

extension Loader {
    /// Erases this loader's concrete type.
    public func eraseToAnyLoader() -> AnyLoader<Input, Output> {
        AnyLoader(self)
    }
}

