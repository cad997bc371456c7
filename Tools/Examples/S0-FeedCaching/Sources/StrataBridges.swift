import Strata

/// Any Strata loader of the feed, seen as a ``FeedRepository``.
///
/// This is how a chain built from Strata's operators plugs into code that only knows the article's
/// protocol:
///
/// ```swift
/// let repository = StrataFeedRepository(remote.loader.servingStaleOnError(in: store, key: "feed"))
/// ```
public struct StrataFeedRepository<Base: Loader>: FeedRepository where Base.Input == Void, Base.Output == [FeedItem] {
    /// The wrapped loader.
    public let loader: Base

    /// Wraps `loader`.
    public init(_ loader: Base) {
        self.loader = loader
    }

    public func fetchFeed() async throws -> [FeedItem] {
        try await loader.load()
    }
}

extension StrataFeedRepository: CustomStringConvertible {
    /// The wrapped loader's description.
    public var description: String {
        (loader as? CustomStringConvertible)?.description ?? "\(Base.self)"
    }
}

/// Any ``FeedRepository`` seen as a Strata loader, so Strata's operators can decorate it; built by
/// ``FeedRepository/asLoader()``.
public struct FeedRepositoryLoader<Repository: FeedRepository>: Loader {
    public typealias Input = Void
    public typealias Output = [FeedItem]

    /// The wrapped repository.
    public let repository: Repository

    public func load(_ input: Void) async throws -> [FeedItem] {
        try await repository.fetchFeed()
    }
}

extension FeedRepositoryLoader: CustomStringConvertible {
    /// The repository's description, or its type name.
    public var description: String { describeRepository(repository) }
}

extension FeedRepository {
    /// This repository as a Strata `Loader<Void, [FeedItem]>`.
    ///
    /// ```swift
    /// let cached = myRepository.asLoader().servingStaleOnError(in: store, key: "feed")
    /// ```
    public func asLoader() -> FeedRepositoryLoader<Self> {
        FeedRepositoryLoader(repository: self)
    }
}

/// A repository's name for events and logs: its description, or its type name.
func describeRepository(_ repository: any FeedRepository) -> String {
    (repository as? CustomStringConvertible)?.description ?? "\(type(of: repository))"
}
