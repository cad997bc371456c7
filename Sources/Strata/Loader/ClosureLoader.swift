/// A loader backed by a closure: for tests, adapters and one-off sources.
///
/// ```swift
/// let answer = ClosureLoader { (question: String) in 42 }
/// let now = ClosureLoader { Date() }
/// ```
public struct ClosureLoader<Input: Sendable, Output: Sendable>: Loader {
    @usableFromInline let body: @Sendable (Input) async throws -> Output
    /// A short name shown in error messages and chain descriptions.
    public let name: String

    /// Creates a loader that runs `body` for every load.
    public init(_ name: String = "closure", _ body: @escaping @Sendable (Input) async throws -> Output) {
        self.name = name
        self.body = body
    }

    @inlinable
    public func load(_ input: Input) async throws -> Output {
        try await body(input)
    }
}

extension ClosureLoader where Input == Void {
    /// Creates an unkeyed loader that runs `body` for every load.
    public init(_ name: String = "closure", _ body: @escaping @Sendable () async throws -> Output) {
        self.name = name
        self.body = { _ in try await body() }
    }
}

extension ClosureLoader: CustomStringConvertible {
    public var description: String { name }
}
