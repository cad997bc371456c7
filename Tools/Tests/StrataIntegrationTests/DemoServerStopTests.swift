import DemoServer
import Dispatch
import Foundation
@_spi(StrataInternals) import Strata
import StrataTesting
import Testing

/// `stop()` (and `goOffline()`) must return even when a request reaches the hold fault late.
///
/// Hummingbird ends only once every connection's handler has returned. A handler that reaches the
/// hold *after* `goOffline()` released the held requests (its request read before the stop, its task
/// run after it) must not be held: nothing would resume it, `stop()` would never return, and the
/// test would hang with every task suspended, no thread blocked and no timer pending.
@Suite("Demo server: stopping while a request is on its way to the hold", .timeLimit(.minutes(3)))
struct DemoServerStopTests {
    /// The interleaving of the stall, driven step by step: the request's handler is paused just
    /// before the server admits it (the server's `random` draw, taken before admission), the server
    /// starts to stop (it has released the held requests once it reports offline), then the handler
    /// goes on and reaches the hold.
    @Test func aRequestAdmittedAfterTheStopReleasedTheHeldOnesDoesNotKeepTheServerRunning() async throws {
        let gate = AdmissionGate()
        let server = try await DemoServer.start(random: { gate.pauseFirstAdmission() })
        server.faults = .init(holdRequests: true)

        let request = Task { try? await HTTPLoader(url: server.feedURL).load() }
        try await gate.waitUntilPaused()

        let stopping = Task { await server.stop() }
        // `isOnline` turns false after `goOffline()` has released the held requests: what the handler
        // does from here happens after the release, as in the stalled runs.
        while server.isOnline { try await Task.sleep(for: .milliseconds(5)) }
        gate.resume()

        let stopped = await finishes(stopping, within: .seconds(60))
        if !stopped {
            // Unstick it so the run goes on: release the request the stop left held.
            server.releaseHeldRequests()
            await stopping.value
        }
        #expect(stopped, "stop() did not return: a request that reached the hold after the stop's release stayed held")
        request.cancel()
        _ = await request.value
    }

    /// A request held when the server stops is let go (stop releases it), as before.
    @Test func aRequestHeldWhenTheServerStopsIsReleased() async throws {
        let server = try await DemoServer.start()
        server.faults = .init(holdRequests: true)
        let request = Task { try await HTTPLoader(url: server.feedURL).load() }
        await server.waitForRequests(count: 1)

        let stopping = Task { await server.stop() }
        let stopped = await finishes(stopping, within: .seconds(60))
        if !stopped {
            server.releaseHeldRequests()
            await stopping.value
        }
        #expect(stopped)
        _ = await request.result
    }

    /// Whether `task` ends within `limit` (real time), without waiting for it past that. Generous: a
    /// stop takes well under a second, but the whole suite runs on two shared cores.
    func finishes(_ task: Task<Void, Never>, within limit: Duration) async -> Bool {
        let done = Locked(false)
        let watcher = Task {
            await task.value
            done.withLock { $0 = true }
        }
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if done.withLock({ $0 }) { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        watcher.cancel()
        return done.withLock { $0 }
    }
}

/// Pauses the first request the server admits, inside its `random` draw (a synchronous call, so the
/// handler's thread waits on a semaphore until the test lets it go).
final class AdmissionGate: Sendable {
    private let state = Locked((first: true, paused: false))
    private let proceed = DispatchSemaphore(value: 0)

    /// The server's `random`: blocks the first caller until ``resume()``.
    func pauseFirstAdmission() -> Double {
        let isFirst = state.withLock { state -> Bool in
            defer { state.first = false }
            if state.first { state.paused = true }
            return state.first
        }
        if isFirst { proceed.wait() }
        return 0.5
    }

    /// Returns once a handler waits in ``pauseFirstAdmission()``.
    func waitUntilPaused() async throws {
        while !state.withLock({ $0.paused }) { try await Task.sleep(for: .milliseconds(5)) }
    }

    func resume() { proceed.signal() }
}
