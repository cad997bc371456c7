#if Postgres
import Foundation
import ServiceLifecycle

extension PostgresStore: Service {
    /// Runs the store as a swift-service-lifecycle service until graceful shutdown or cancellation,
    /// then stops it (``shutdown()``: a store that owns its client closes its pool; the application's
    /// client is left to the application).
    ///
    /// While it runs, a store with a ``maxAge`` sweeps expired rows every minute even when nothing is
    /// inserted (otherwise it sweeps after inserts). Operations work whether or not `run()` is running.
    ///
    /// ```swift
    /// let shared = try PostgresStore<[FeedItem]>(client: client, configuration: configuration, codec: JSONCodec(), maxAge: .days(1))
    /// let group = ServiceGroup(services: [client, shared, httpServer], gracefulShutdownSignals: [.sigterm], logger: logger)
    /// try await group.run()
    /// ```
    public func run() async throws {
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                if self.maxAge != nil { await self.sweepExpiredRows() }
                try await Task.sleep(for: .seconds(Self.sweepInterval))
            }
        }
        await shutdown()
    }
}
#endif
