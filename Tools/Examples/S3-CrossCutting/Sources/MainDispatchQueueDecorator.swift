/// Delivers a ``UserDataLoader``'s completion on the main queue.
///
/// - Completion already running on the main queue: called right away, synchronously, so a loader
///   that answers from memory updates the screen in the same turn, without a flicker.
/// - Completion anywhere else: dispatched with `DispatchQueue.main.async`.
///
/// The decoratee stays free to call back from whatever thread its work ends on; the screen can rely
/// on main. For another queue, see ``QueueDeliveringDecorator``, which this decorator specialises.
///
/// ## Main queue, not main thread
/// "Already on main" is asked of the main *queue* (a queue-specific value), not of
/// `Thread.isMainThread`. On Apple platforms the two agree inside an app. On Linux they do not once
/// a program has an async `main` (as `swift run` tools and `swift test` do): the runtime calls
/// `dispatch_main()`, which retires the main thread, and from then on the main queue, and with it
/// the `MainActor`, is drained by a worker thread. Code there is on the main queue and isolated to
/// the main actor, but `Thread.isMainThread` is `false`; a thread check would dispatch when it should
/// deliver at once, and a screen checking the thread would wrongly think it is off main.
public struct MainDispatchQueueDecorator: UserDataLoader {
    /// The loader whose completions are moved to main.
    public var decoratee: any UserDataLoader { delivering.decoratee }
    private let delivering: QueueDeliveringDecorator

    /// Delivers `decoratee`'s completions on the main queue.
    public init(decoratee: any UserDataLoader) {
        self.delivering = QueueDeliveringDecorator(decoratee: decoratee, queue: .main)
    }

    /// Whether the calling code runs on the main queue.
    public static var isOnMainQueue: Bool {
        mainQueueToken.isCurrent
    }

    private static let mainQueueToken = QueueToken.of(.main)

    public func fetchUserData(completion: @escaping @Sendable (Result<UserData, any Error>) -> Void) {
        delivering.fetchUserData(completion: completion)
    }
}
