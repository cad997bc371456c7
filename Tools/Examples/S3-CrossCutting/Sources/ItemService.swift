/// Loads the items a screen shows.
///
/// The article's service: it cannot fail (an empty list is its "nothing to show"), and it knows
/// nothing of analytics, threads or screens. Those are added around it by decorators.
public protocol ItemService: Sendable {
    /// The items to show.
    func loadItem() async -> [String]
}
