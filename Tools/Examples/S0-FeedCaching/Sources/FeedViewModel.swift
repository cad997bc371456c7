import Observation
import Strata

/// Drives a feed screen: loads through ``LoadFeedUseCase`` and publishes a ``State`` any view can
/// render (SwiftUI, the command line, a web page).
///
/// ```swift
/// let viewModel = FeedComposer.makeFeedViewModel(feedURL: url)
/// await viewModel.load()
/// if case .loaded(let items, let source) = viewModel.state { … }   // source: "saved on this device 2h 0m ago"
/// ```
///
/// The source text comes from Strata's `loadServed()` provenance when the repository chain reports
/// one (Strata's HTTP loader and stores do), and reads "source unknown" otherwise.
@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
@MainActor
@Observable
public final class FeedViewModel {
    /// What the screen shows.
    public enum State: Equatable, Sendable {
        /// Nothing loaded yet.
        case idle
        /// A load is running.
        case loading
        /// The feed, and where it came from in words (``FeedPresenter/sourceText(for:)``).
        case loaded(items: [FeedItem], source: String)
        /// The load failed; `message` is for a person (``FeedPresenter/errorMessage(for:)``).
        case failed(message: String)
    }

    /// The current state; starts ``State/idle``.
    public private(set) var state: State = .idle
    /// Where the shown feed came from, after a successful load.
    public private(set) var provenance: Provenance?

    @ObservationIgnored private let loadFeed: LoadFeedUseCase

    /// A view model loading through `loadFeed`.
    public init(loadFeed: LoadFeedUseCase) {
        self.loadFeed = loadFeed
    }

    /// Loads the feed: ``State/loading``, then ``State/loaded(items:source:)`` or
    /// ``State/failed(message:)``. A cancelled load goes back to the state before it.
    public func load() async {
        let previous = state
        state = .loading
        do {
            let served = try await loadFeed.loadServed()
            provenance = served.provenance
            state = .loaded(items: served.value, source: FeedPresenter.sourceText(for: served.provenance))
        } catch is CancellationError {
            state = previous
        } catch {
            state = .failed(message: FeedPresenter.errorMessage(for: error))
        }
    }
}
