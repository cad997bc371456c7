import Observation
import Strata
import StrataQueries

/// The items screen's state, platform-neutral: a SwiftUI view, a command-line printer or a web page
/// can render it.
///
/// A live query of the items (Strata's `Query`, observed on the main actor as a `LiveQuery`): the
/// service runs off the main actor and each new state arrives on it, which in Swift concurrency is
/// the whole of "deliver on main". The query keeps one load at a time however often `load()` is
/// called.
@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
@MainActor
@Observable
public final class ItemsViewModel {
    /// What the last load produced.
    public var items: [String] { live?.value ?? [] }
    /// Whether a load is running.
    public var isLoading: Bool { live?.snapshot.isFetching ?? false }

    /// The items query, observed from the first ``load()`` on.
    public private(set) var live: LiveQuery<[String]>?
    @ObservationIgnored private let query: Query<[String]>

    /// A view model showing `query`.
    public init(items query: Query<[String]>) {
        self.query = query
    }

    /// A view model showing what `service` loads, as the query `["items"]` of `queries`.
    public convenience init(service: any ItemService, queries: QueryClient = QueryClient()) {
        self.init(items: queries.query(["items"], chain: ClosureLoader { await service.loadItem() }))
    }

    /// Loads the items (the first call starts observing the query, a later one refetches) and
    /// returns when they are shown.
    public func load() async {
        if let live { live.query.refetch() } else { live = query.observed() }
        try? await live?.settled()
    }
}

/// The profile screen's state, fed by a completion-handler ``UserDataLoader``.
///
/// It assumes that completions arrive on the main queue, where the main actor runs, and checks it
/// (`MainActor.assumeIsolated` stops the program otherwise; under an async `main` on Linux the main
/// queue is not always serviced by the main thread, so the queue is what counts). Making that true is the composition root's job: ``UIComposer``
/// wraps the loader in ``MainDispatchQueueDecorator``.
@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
@MainActor
@Observable
public final class UserProfileViewModel {
    /// What the screen shows.
    public enum State: Equatable, Sendable {
        case idle
        case loading
        case loaded(UserData)
        case failed(String)
    }

    /// The current state.
    public private(set) var state: State = .idle

    @ObservationIgnored private let loader: any UserDataLoader

    /// A view model loading through `loader`, whose completions must arrive on the main queue.
    public init(loader: any UserDataLoader) {
        self.loader = loader
    }

    /// Starts loading the user; ``state`` changes to `.loading`, then to the outcome.
    public func load() {
        state = .loading
        loader.fetchUserData { [weak self] result in
            MainActor.assumeIsolated {
                self?.show(result)
            }
        }
    }

    private func show(_ result: Result<UserData, any Error>) {
        switch result {
        case .success(let user): state = .loaded(user)
        case .failure(let error): state = .failed("\(error)")
        }
    }
}
