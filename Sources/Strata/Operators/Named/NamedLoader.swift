/// Gives a loader a name for error messages, provenance and chain trees; built by ``Loader/named(_:)``.
public struct NamedLoader<Base: Loader>: Loader {
    public typealias Input = Base.Input
    public typealias Output = Base.Output

    public let base: Base
    public let name: String

    @inlinable
    init(base: Base, name: String) {
        self.base = base
        self.name = name
    }

    @inlinable
    public func load(_ input: Input) async throws -> Output {
        // Names matter only to someone recording provenance; otherwise this is a plain forward.
        guard LoadRecorder.isRecording else { return try await base.load(input) }
        return try await loadNamed(input)
    }

    @inlinable
    func loadNamed(_ input: Input) async throws -> Output {
        try await LoadRecorder.naming(name) { try await base.load(input) }
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
    /// let freshLocal = store.loader(key: "feed", freshness: .maxAge(.hours(24))).named("fresh local")
    /// ```
    @inlinable
    public func named(_ name: String) -> NamedLoader<Self> {
        NamedLoader(base: self, name: name)
    }
}
