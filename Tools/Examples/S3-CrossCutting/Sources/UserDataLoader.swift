/// The user shown on the profile screen.
public struct UserData: Codable, Equatable, Hashable, Sendable {
    /// The user's display name.
    public var name: String
    /// The user's e-mail address.
    public var email: String

    /// Creates a user.
    public init(name: String, email: String) {
        self.name = name
        self.email = email
    }
}

/// Loads the user with a completion handler, the pre-async style of the threading article.
///
/// ## Contract
/// - `completion` is called exactly once.
/// - It may be called on any thread or queue, and may be called before `fetchUserData` returns.
///   Callers that need a particular queue are given one by a decorator
///   (``MainDispatchQueueDecorator``, ``QueueDeliveringDecorator``), not by the loader.
public protocol UserDataLoader: Sendable {
    /// Loads the user and reports the outcome through `completion`.
    func fetchUserData(completion: @escaping @Sendable (Result<UserData, any Error>) -> Void)
}
