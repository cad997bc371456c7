import Foundation

/// Decodes a loader's bytes with a `JSONDecoder`; built by ``Loader/decoding(_:decoder:)``.
public struct DecodingLoader<Base: Loader, Value: Decodable & Sendable>: Loader where Base.Output: DecodableBody {
    public typealias Input = Base.Input
    public typealias Output = Value

    public let base: Base
    let makeDecoder: @Sendable () -> JSONDecoder

    public func load(_ input: Input) async throws -> Value {
        try await load(input, in: .current)
    }

    /// `@concurrent`: decoding a large body is CPU work that must not hold the caller's actor (the
    /// main actor, in an app), so the load runs on the global executor.
    @concurrent
    public func load(_ input: Input, in context: LoadContext) async throws -> Value {
        let body = try await base.load(input, in: context)
        do {
            return try makeDecoder().decode(Value.self, from: body.bodyData)
        } catch {
            throw body.decodingFailure(type: Value.self, error: error)
        }
    }
}

extension DecodingLoader: LoaderDescribing {
    public var loaderNode: LoaderNode { LoaderNode(label: "decoding \(Value.self)", children: [base.chainNode]) }
}

extension Loader where Output: DecodableBody {
    /// Decodes the loaded bytes (or HTTP body) as JSON into `type`.
    ///
    /// - Parameters:
    ///   - type: the type to decode.
    ///   - decoder: makes the decoder for each load, for example to set a date strategy. A
    ///   factory rather than an instance because `JSONDecoder` is not `Sendable` on every platform
    ///   Strata supports, and a decoder's strategies are mutable state.
    public func decoding<Value: Decodable & Sendable>(
        _ type: Value.Type = Value.self,
        decoder: @escaping @Sendable () -> JSONDecoder = { JSONDecoder() }
    ) -> DecodingLoader<Self, Value> {
        DecodingLoader(base: self, makeDecoder: decoder)
    }
}
