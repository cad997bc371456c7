/// The composition root for the screens: the one place where services, cross-cutting decorators and
/// view models meet.
///
/// Services stay ignorant of analytics and threads, view models of where data comes from. Changing
/// what is tracked, or on which queue results arrive, is a change here and nowhere else.
@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
@MainActor
public enum UIComposer {
    /// The items screen: `service`, tracked by every tracker in `trackers`, feeding an ``ItemsViewModel``.
    ///
    /// `ItemsViewModel(service: AnalyticsDecorator(decoratee: service, tracker: CompositeTracker(trackers)))`
    public static func itemsScreen(service: any ItemService, trackers: [any Tracker]) -> ItemsViewModel {
        let tracked = AnalyticsDecorator(decoratee: service, tracker: CompositeTracker(trackers))
        return ItemsViewModel(service: tracked)
    }

    /// The profile screen: `loader`'s completions moved to the main queue, feeding a
    /// ``UserProfileViewModel``.
    public static func profileScreen(loader: any UserDataLoader) -> UserProfileViewModel {
        UserProfileViewModel(loader: MainDispatchQueueDecorator(decoratee: loader))
    }
}
