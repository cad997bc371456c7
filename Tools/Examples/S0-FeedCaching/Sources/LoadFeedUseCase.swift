import Strata

/// Loads the feed for a screen. It knows only the ``FeedRepository`` protocol, so the same use case
/// runs over the network, a cache, a logger, or a test stub.
///
/// It is also a Strata `Loader<Void, [FeedItem]>`, so a caller can ask where the feed came from:
///
/// ```swift
/// let served = try await useCase.loadServed()
/// print(served.provenance)   // "disk via UserDefaultsStore(standard) [any], age 2h 0m"
/// ```
/// Provenance is reported by the Strata parts of the repository chain (HTTP, stores); a repository
/// that reports nothing is served with origin `unknown`.
public struct LoadFeedUseCase: Loader {
    public typealias Input = Void
    public typealias Output = [FeedItem]

    private let repository: any FeedRepository

    /// A use case over `repository`.
    public init(repository: any FeedRepository) {
        self.repository = repository
    }

    /// Loads the feed.
    public func execute() async throws -> [FeedItem] {
        try await repository.fetchFeed()
    }

    public func load(_ input: Void) async throws -> [FeedItem] {
        try await execute()
    }
}

extension LoadFeedUseCase: CustomStringConvertible {
    /// `load feed from <repository>`.
    public var description: String { "load feed from \(describeRepository(repository))" }
}
