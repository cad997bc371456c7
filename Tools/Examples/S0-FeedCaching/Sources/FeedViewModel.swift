import Observation
import Strata
import StrataQueries

/// Drives a feed screen: a live query of the feed, loading through ``LoadFeedUseCase``, and a
/// ``State`` any view can render (SwiftUI, the command line, a web page).
///
/// ```swift
/// let viewModel = FeedComposer.makeFeedViewModel(feedURL: url)
/// await viewModel.load()
/// if case .loaded(let items, let source) = viewModel.state { … }   // source: "saved on this device 2h 0m ago"
/// ```
///
/// Strata's `Query` keeps the state (one load at a time, the value kept when a refresh fails, the
/// provenance); this type only says it in the article's words. Give every screen the app's one
/// `QueryClient` (``init(feed:)``) to share one query per key and to refetch when the app tells
/// the client the network came back or the app came to the foreground; the convenience initialiser
/// makes a client of its own, which nothing else signals. The source text comes from the provenance when the repository chain reports one
/// (Strata's HTTP loader and stores do), and reads "source unknown" otherwise.
@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
@MainActor
@Observable
public final class FeedViewModel {
    /// What the screen shows.
    public enum State: Equatable, Sendable {
        /// Nothing loaded yet.
        case idle
        /// A load is running and there is nothing to show yet.
        case loading
        /// The feed, and where it came from in words (``FeedPresenter/sourceText(for:)``); shown
        /// while a refresh runs, and after one fails.
        case loaded(items: [FeedItem], source: String)
        /// The load failed and there is nothing to show; `message` is for a person
        /// (``FeedPresenter/errorMessage(for:)``).
        case failed(message: String)

        /// The state a snapshot of the feed query shows.
        public init(_ snapshot: QuerySnapshot<[FeedItem]>) {
            if let items = snapshot.value {
                self = .loaded(items: items, source: snapshot.provenance.map(FeedPresenter.sourceText(for:)) ?? "source unknown")
            } else if snapshot.isFetching {
                self = .loading
            } else if let error = snapshot.lastError {
                self = .failed(message: FeedPresenter.errorMessage(for: error.underlying))
            } else {
                self = .idle
            }
        }
    }

    /// The current state; ``State/idle`` until the first ``load()``.
    public var state: State { feed.map { State($0.snapshot) } ?? .idle }
    /// Where the shown feed came from.
    public var provenance: Provenance? { feed?.snapshot.provenance }

    /// The feed query, observed from the first ``load()`` on.
    public private(set) var feed: LiveQuery<[FeedItem]>?
    @ObservationIgnored private let query: Query<[FeedItem]>

    /// A view model showing `query`.
    public init(feed query: Query<[FeedItem]>) {
        self.query = query
    }

    /// A view model loading through `loadFeed`, as the query `["feed"]` of `queries`.
    public convenience init(loadFeed: LoadFeedUseCase, queries: QueryClient = QueryClient()) {
        self.init(feed: queries.query(["feed"], chain: loadFeed))
    }

    /// Loads the feed: the first call starts observing the query (which loads), a later one
    /// refetches; returns when the load has answered. Cancelled before its first load answered, the
    /// screen goes back to ``State/idle`` and the load is cancelled.
    public func load() async {
        guard let feed else {
            let feed = query.observed()
            self.feed = feed
            do { try await feed.settled() } catch { self.feed = nil }
            return
        }
        feed.query.refetch()
        try? await feed.settled()
    }
}
