import Foundation

/// Reports an origin for values from a loader that does not report one itself; built by
/// ``Loader/originating(from:)``.
public struct OriginatingLoader<Base: Loader>: Loader {
    public typealias Input = Base.Input
    public typealias Output = Base.Output

    public let base: Base
    public let origin: Origin

    public func load(_ input: Input) async throws -> Output {
        try await loadTryingImmediately(input)
    }

    public func load(_ input: Input, in context: LoadContext) async throws -> Output {
        let value = try await base.load(input, in: context)
        context.record(.served(Provenance(origin: origin, tier: context.tierName(default: base.chainSummary), age: .zero)))
        return value
    }

    public func loadImmediately(_ input: Input, in context: LoadContext) -> Output? {
        guard let value = base.loadImmediately(input, in: context) else { return nil }
        context.record(.served(Provenance(origin: origin, tier: context.tierName(default: base.chainSummary), age: .zero)))
        return value
    }
}

extension OriginatingLoader: LoaderDescribing {
    public var loaderNode: LoaderNode { LoaderNode(label: "origin(\(origin))", children: [base.chainNode]) }
}

extension Loader {
    /// Marks values from this loader as coming from `origin` (age zero), for loaders of your own that
    /// Strata cannot classify: `myGRPCClient.originating(from: .remote)`.
    public func originating(from origin: Origin) -> OriginatingLoader<Self> {
        OriginatingLoader(base: self, origin: origin)
    }
}
