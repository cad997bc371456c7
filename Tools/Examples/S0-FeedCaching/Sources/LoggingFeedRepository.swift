import Logging

/// A decorator that logs every feed load and changes nothing else.
///
/// - `info` "feed load started" before the load;
/// - `info` "feed load succeeded" with metadata `count` after a success;
/// - `error` "feed load failed" with metadata `error` (the error's description) and `error.type`
///   after a failure, then rethrows the same error;
/// - `debug` "feed load cancelled" when the task is cancelled (cancellation is not a failure).
///
/// The decorator never chooses where logs go: the application bootstraps swift-log, and the logger is
/// injected.
public struct LoggingFeedRepository: FeedRepository {
    private let decoratee: any FeedRepository
    private let logger: Logger

    /// Decorates `decoratee`, logging through `logger`.
    public init(decoratee: any FeedRepository, logger: Logger) {
        self.decoratee = decoratee
        self.logger = logger
    }

    public func fetchFeed() async throws -> [FeedItem] {
        logger.info("feed load started")
        do {
            let items = try await decoratee.fetchFeed()
            logger.info("feed load succeeded", metadata: ["count": "\(items.count)"])
            return items
        } catch is CancellationError {
            logger.debug("feed load cancelled")
            throw CancellationError()
        } catch {
            logger.error("feed load failed", metadata: ["error": "\(error)", "error.type": "\(type(of: error))"])
            throw error
        }
    }
}

extension LoggingFeedRepository: CustomStringConvertible {
    /// `log(<decoratee>)`.
    public var description: String { "log(\(describeRepository(decoratee)))" }
}
