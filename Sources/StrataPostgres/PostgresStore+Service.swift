#if Postgres
import Foundation
import Logging
import ServiceLifecycle
@_spi(StrataInternals) import Strata

/// A store is a `Service` (swift-service-lifecycle): a server adds it to its `ServiceGroup`, which
/// runs it for the life of the process and stops it on graceful shutdown.
///
/// ```swift
/// let store = try PostgresStore<[FeedItem]>(url: "postgres://app:secret@db.internal:5432/cache", options: PostgresStoreOptions(maxAge: .seconds(24 * 3600)))
/// let group = ServiceGroup(services: [store], gracefulShutdownSignals: [.sigterm], logger: logger)
/// try await group.run()
/// ```
extension PostgresStore: Service {
    /// Runs the store's periodic maintenance until the task is cancelled or a graceful shutdown
    /// begins, then shuts the store down (``shutdown()``: a client of the store's own is closed, an
    /// application's client is left running).
    ///
    /// The maintenance: a store with a ``maxAge`` sweeps expired rows every minute (as it also does
    /// after inserts), so rows expire even while nobody writes. A store's own client runs from
    /// `init` on whether or not `run()` is called: a store that is not in a service group works,
    /// and is stopped with ``shutdown()``.
    public func run() async throws {
        await cancelWhenGracefulShutdown { [self] in
            await maintain(every: .seconds(Self.sweepInterval), clock: ContinuousClock())
        }
        await shutdown()
    }

    /// Sweeps expired rows every `interval` of `clock` (when the store has a ``maxAge``, and no
    /// insert swept within the interval) until the task is cancelled; `afterPass` follows each pass.
    func maintain<C: Clock<Duration>>(
        every interval: Duration, clock: C, afterPass: @Sendable () -> Void = {}
    ) async {
        while !Task.isCancelled {
            do { try await clock.sleep(for: interval) } catch { return }
            if sweepIsDue(now: now()) { await sweepExpiredRows() }
            afterPass()
        }
    }
}
#endif
