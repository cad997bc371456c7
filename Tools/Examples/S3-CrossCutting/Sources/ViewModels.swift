import Observation

/// The items screen's state, platform-neutral: a SwiftUI view, a command-line printer or a web page
/// can render it.
///
/// It is `@MainActor`, so `load()` awaits the service off the main actor and writes the result back
/// on it: in Swift concurrency that is the whole of "deliver on main".
@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
@MainActor
@Observable
public final class ItemsViewModel {
    /// What the last load produced.
    public private(set) var items: [String] = []
    /// Whether a load is running.
    public private(set) var isLoading = false

    @ObservationIgnored private let service: any ItemService

    /// A view model showing what `service` loads.
    public init(service: any ItemService) {
        self.service = service
    }

    /// Loads the items and shows them.
    public func load() async {
        isLoading = true
        items = await service.loadItem()
        isLoading = false
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
