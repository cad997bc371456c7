/// Adds analytics to any ``ItemService``: each load is tracked, and its result is returned unchanged.
///
/// The decorated service knows nothing of analytics, and the tracker nothing of items' origin. They
/// meet here, and only the composition root (``UIComposer``) chooses to put them together.
///
/// ```swift
/// let service = AnalyticsDecorator(decoratee: itemService, tracker: tracker)   // any ItemService
/// ```
public struct AnalyticsDecorator: ItemService {
    /// The service whose loads are tracked.
    public let decoratee: any ItemService
    /// Receives the values of every load.
    public let tracker: any Tracker

    /// Tracks the loads of `decoratee` with `tracker`.
    public init(decoratee: any ItemService, tracker: any Tracker) {
        self.decoratee = decoratee
        self.tracker = tracker
    }

    /// Loads from the decoratee, tracks the values (awaiting the tracker), then returns them as loaded.
    public func loadItem() async -> [String] {
        let items = await decoratee.loadItem()
        await tracker.track(values: items)
        return items
    }
}
