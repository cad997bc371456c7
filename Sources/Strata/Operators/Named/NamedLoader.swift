/// Gives a loader a name for error messages, provenance and chain trees; built by ``Loader/named(_:)``.
public struct NamedLoader<Base: Loader>: Loader {
    public typealias Input = Base.Input
    public typealias Output = Base.Output

    public let base: Base
    public let name: String
    /// The base took the name when this operator was built (a leaf that reports its own tier, such
    /// as a store's loader), so a load is a plain forward: no task-local binding per load.
    @usableFromInline let baseCarriesName: Bool

    @usableFromInline
    init(base: Base, name: String) {
        if let leaf = base as? any TierNameCarrying, let named = leaf.carryingTierName(name) as? Base {
            self.base = named
            self.baseCarriesName = true
        } else {
            self.base = base
            self.baseCarriesName = false
        }
        self.name = name
    }

    @inlinable
    public func load(_ input: Input) async throws -> Output {
        // Names matter only to someone recording provenance; otherwise this is a plain forward.
        guard !baseCarriesName, LoadRecorder.isRecording else { return try await base.load(input) }
        return try await loadNamed(input)
    }

    @inlinable
    func loadNamed(_ input: Input) async throws -> Output {
        try await LoadRecorder.naming(name) { try await base.load(input) }
    }
}

/// A name around a name changes nothing: the inner one wins for every tier beneath it, whether it
/// was carried or bound.
extension NamedLoader: TierNameCarrying {
    func carryingTierName(_ name: String) -> Self { self }
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
