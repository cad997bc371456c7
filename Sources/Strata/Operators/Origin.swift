import Foundation

/// Reports an origin for values from a loader that does not report one itself; built by
/// ``Loader/origin(_:)``.
public struct OriginLoader<Base: Loader>: Loader {
    public typealias Input = Base.Input
    public typealias Output = Base.Output

    public let base: Base
    public let origin: Origin

    public func load(_ input: Input) async throws -> Output {
        let value = try await base.load(input)
        LoadRecorder.record(.served(Provenance(origin: origin, tier: LoadRecorder.tierName(default: describeLoader(base)), age: .zero)))
        return value
    }
}

extension OriginLoader: LoaderDescribing {
    public var loaderNode: LoaderNode { LoaderNode(label: "origin(\(origin))", children: [Strata.loaderNode(of: base)]) }
}

extension Loader {
    /// Marks values from this loader as coming from `origin` (age zero), for loaders of your own that
    /// Strata cannot classify: `myGRPCClient.origin(.remote)`.
    public func origin(_ origin: Origin) -> OriginLoader<Self> {
        OriginLoader(base: self, origin: origin)
    }
}
