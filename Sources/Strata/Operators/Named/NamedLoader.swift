/// Gives a loader a name for error messages, provenance and chain trees; built by ``Loader/named(_:)``.
public struct NamedLoader<Base: Loader>: Loader {
    public typealias Input = Base.Input
    public typealias Output = Base.Output

    public let base: Base
    public let name: String

    @usableFromInline
    init(base: Base, name: String) {
        self.base = base
        self.name = name
    }

    @inlinable @inline(__always)
    public func load(_ input: Input) async throws -> Output {
        try await loadTryingImmediately(input)
    }

    /// The name goes down with the context (an inner name wins for the tiers beneath it); nothing
    /// is bound. A name is read only by the recorders around it, so with none the context passes
    /// unchanged (an observer inside, such as a `logged()` of the tier itself, reports the tiers
    /// inside it by their own names).
    @inlinable
    public func load(_ input: Input, in context: LoadContext) async throws -> Output {
        guard context.isRecording else { return try await base.load(input, in: context) }
        return try await base.load(input, in: context.named(name))
    }

    @inlinable
    public func loadImmediately(_ input: Input, in context: LoadContext) -> Output? {
        guard context.isRecording else { return base.loadImmediately(input, in: context) }
        return base.loadImmediately(input, in: context.named(name))
    }
}

extension NamedLoader: LoaderDescribing {
    public var loaderNode: LoaderNode {
        LoaderNode(label: "named \"\(name)\"", summary: name, children: [base.chainNode])
    }
}

extension Loader {
    /// Names this loader: errors (``FallbackError``), provenance and descriptions show `name`.
    ///
    /// ```swift
    /// let freshLocal = store.loader(key: "feed", freshness: .maxAge(.seconds(24 * 3600))).named("fresh local")
    /// ```
    @inlinable
    public func named(_ name: String) -> NamedLoader<Self> {
        NamedLoader(base: self, name: name)
    }
}
