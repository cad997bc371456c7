@_spi(StrataInternals) import Strata
import StrataQueries

// Waits a test needs to order its steps without sleeping: each suspends until the object under test
// reaches a state, and throws `CancellationError` as soon as the waiting task is cancelled. They
// live in the test kit, not in the products an app ships: no app code should wait on them.

extension CoalescedLoader {
    /// Suspends until `count` callers in all have led or joined a load in flight (a test completes a
    /// held load only after every caller has joined it).
    ///
    /// - Parameter timeout: the longest to wait, in real time (`ContinuousClock`). `nil` waits until
    ///   the callers come or the task is cancelled.
    /// - Throws: `CancellationError` as soon as the waiting task is cancelled; `WaitTimeoutError`
    ///   when `timeout` passes first, naming how many had registered.
    public func waitForWaiters(count: Int, timeout: Duration? = nil) async throws {
        try await awaitWaiters(count: count, timeout: timeout)
    }
}

extension QueryClient {
    /// Suspends until the client holds `count` queries (a test waits for one to be dropped).
    ///
    /// - Throws: `CancellationError` when the waiting task is cancelled.
    public func waitForQueries(_ count: Int) async throws {
        try await awaitQueryCount(count)
    }
}

extension Query {
    /// Suspends until the query has `count` observers (a test waits for an observer's stream to end).
    ///
    /// - Throws: `CancellationError` when the waiting task is cancelled.
    public func waitForObservers(_ count: Int) async throws {
        try await awaitObserverCount(count)
    }
}

extension LiveQuery {
    /// Suspends until this object shows the snapshot its query published last.
    ///
    /// - Throws: `CancellationError` when the waiting task is cancelled.
    public func waitUntilCaughtUp() async throws {
        try await caughtUp()
    }
}

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
extension LiveSelection {
    /// Suspends until this object has taken every snapshot its query published so far.
    ///
    /// - Throws: `CancellationError` when the waiting task is cancelled.
    public func waitUntilCaughtUp() async throws {
        try await caughtUp()
    }
}

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
extension LiveMutation {
    /// Suspends until this object shows its mutation's latest state.
    ///
    /// - Throws: `CancellationError` when the waiting task is cancelled.
    public func waitUntilCaughtUp() async throws {
        try await caughtUp()
    }
}
