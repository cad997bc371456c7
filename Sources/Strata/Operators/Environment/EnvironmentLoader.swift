/// Runs its base loader inside a ``LoadEnvironment``; built by ``Loader/environment(_:)`` and
/// ``Loader/environment(_:_:)``.
///
/// Transparent in the chain's description: the environment is not a tier.
public struct EnvironmentLoader<Base: Loader>: Loader {
    public typealias Input = Base.Input
    public typealias Output = Base.Output

    public let base: Base
    @usableFromInline let adjust: @Sendable (inout LoadEnvironment) -> Void

    init(base: Base, adjust: @escaping @Sendable (inout LoadEnvironment) -> Void) {
        self.base = base
        self.adjust = adjust
    }

    /// `@inlinable`: the outermost operator of most chains, so the whole chain inside it is
    /// specialised in the caller's module (an opaque call here would leave every operator below it
    /// generic, paying a metadata lookup per generic type per load).
    @inlinable @inline(__always)
    public func load(_ input: Input) async throws -> Output {
        try await loadTryingImmediately(input)
    }

    @inlinable
    public func load(_ input: Input, in context: LoadContext) async throws -> Output {
        var environment = context.environment
        adjust(&environment)
        return try await base.load(input, in: context.with(environment))
    }

    @inlinable
    public func loadImmediately(_ input: Input, in context: LoadContext) -> Output? {
        var environment = context.environment
        adjust(&environment)
        return base.loadImmediately(input, in: context.with(environment))
    }
}

extension EnvironmentLoader: LoaderDescribing {
    public var loaderNode: LoaderNode { base.chainNode }
}

extension Loader {
    /// Runs this loader, and every operator inside it, in `environment`.
    ///
    /// Put it at the outside of a chain to give time and logging once:
    ///
    /// ```swift
    /// let feed = remote
    ///     .retrying(.exponential(attempts: 3))
    ///     .writingThrough(in: files, key: "feed")
    ///     .environment(LoadEnvironment(logger: appLogger))
    /// ```
    public func environment(_ environment: LoadEnvironment) -> EnvironmentLoader<Self> {
        EnvironmentLoader(base: self) { $0 = environment }
    }

    /// Overrides one field of the surrounding environment for this loader and those inside it.
    ///
    /// ```swift
    /// // This one cache reports to its own logger; the rest of the chain keeps the outer one.
    /// let thumbnails = remote.writingThrough(in: thumbnailStore, key: "t").environment(\.logger, quietLogger)
    /// ```
    public func environment<Value: Sendable>(
        _ field: WritableKeyPath<LoadEnvironment, Value> & Sendable, _ value: Value
    ) -> EnvironmentLoader<Self> {
        EnvironmentLoader(base: self) { $0[keyPath: field] = value }
    }
}
