import Dispatch
import Foundation

/// Delivers a ``UserDataLoader``'s completion on a queue chosen at composition time: the general
/// form of ``MainDispatchQueueDecorator``.
///
/// - Completion already running on `queue`: called right away, synchronously.
/// - Completion anywhere else: dispatched with `queue.async`.
///
/// "Already on `queue`" is detected with a queue-specific value (`DispatchQueue.getSpecific`): a
/// thread says nothing about which serial queue it is running. The decorator tags `queue` when it
/// is created. Code running on a queue that targets `queue` also counts as being on it (Dispatch looks
/// the value up along the target chain), which is safe: such code is serialised with `queue`'s own
/// work.
///
/// ```swift
/// let loader = QueueDeliveringDecorator(decoratee: remote, queue: databaseQueue)
/// ```
public struct QueueDeliveringDecorator: UserDataLoader {
    /// The loader whose completions are moved.
    public let decoratee: any UserDataLoader
    /// Where completions are delivered.
    public let queue: DispatchQueue
    private let token: QueueToken

    /// Delivers `decoratee`'s completions on `queue`.
    public init(decoratee: any UserDataLoader, queue: DispatchQueue) {
        self.decoratee = decoratee
        self.queue = queue
        self.token = QueueToken.of(queue)
    }

    /// Whether the calling code runs on ``queue`` (or on a queue that targets it).
    public var isOnQueue: Bool {
        token.isCurrent
    }

    public func fetchUserData(completion: @escaping @Sendable (Result<UserData, any Error>) -> Void) {
        decoratee.fetchUserData { [queue, token] result in
            if token.isCurrent {
                completion(result)
            } else {
                queue.async { completion(result) }
            }
        }
    }
}

/// The tag that marks a queue, set as the queue's specific value under one shared key.
///
/// A queue gets one token, whichever decorator tags it first, and keeps it for its lifetime (the
/// queue retains its specific values). Identity is the token's, not the `DispatchQueue` object's:
/// on Linux `DispatchQueue.main` returns a new wrapper object on every access, so the wrapper's
/// identity cannot name the queue. A token found through a target queue names that target, not
/// the queue asked about.
final class QueueToken: Sendable {
    private static let key = DispatchSpecificKey<QueueToken>()
    /// Serialises tagging, so two decorators created at once on one queue share one token.
    private static let tagging = NSLock()

    private init() {}

    /// The token of `queue`, tagging the queue first if no decorator has.
    static func of(_ queue: DispatchQueue) -> QueueToken {
        tagging.lock()
        defer { tagging.unlock() }
        if let existing = queue.getSpecific(key: key) { return existing }
        let token = QueueToken()
        queue.setSpecific(key: key, value: token)
        return token
    }

    /// Whether the calling code runs on the queue this token tags.
    var isCurrent: Bool {
        DispatchQueue.getSpecific(key: Self.key) === self
    }
}
