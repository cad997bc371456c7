import Foundation
@_spi(StrataInternals) import Strata
import StrataQueries

/// How `strata watch` notices that the server went away and finds it again, without a storm of
/// requests.
///
/// The remote tier calls ``serverUnreachable()`` when a request never reached the server
/// (connection refused, host not found: ``HTTPError/neverReachedTheServer``), *before* its failure
/// reaches the query. The probe tells the query client it is offline, so the query pauses the
/// failed load (`paused (offline)`) and keeps its value; the query's own interval then only joins
/// that paused load. From then on, once per interval, the probe tells the client it is online
/// again, which continues the paused load: one request per interval. A request that fails the same
/// way pauses it again; one that gets through ends the episode, and the query's interval takes over.
final class ServerProbe: Sendable {
    private let client: QueryClient
    /// Whether an episode runs (the server was found unreachable and has not answered since).
    private let probing = Locked(false)
    /// One element per episode that starts.
    private let episodes: AsyncStream<Void>
    private let episodeStarted: AsyncStream<Void>.Continuation

    /// A probe that switches `client` offline and online.
    init(client: QueryClient) {
        self.client = client
        (episodes, episodeStarted) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// A request never reached the server: the client is offline from now on, and an episode of
    /// probes starts unless one runs.
    func serverUnreachable() {
        // Offline before the episode's state is read: an episode deciding to end under the lock
        // either sees the client offline (and goes on), or ends before this starts a new one.
        client.setOnline(false)
        let starts = probing.withLock { probing in
            defer { probing = true }
            return !probing
        }
        if starts { episodeStarted.yield() }
    }

    /// What an episode does at one of its ticks.
    private enum Step {
        /// The client is offline: go online, so the paused load runs once.
        case probe
        /// The last probe still runs: wait for the next tick.
        case wait
        /// A probe got through: the episode is over.
        case end
    }

    /// Runs the episodes, each ticking every `interval` on `clock`, until the task is cancelled.
    /// `isFetching` tells whether the query's load runs now.
    func run(every interval: Duration, on clock: any Clock<Duration>, isFetching: @escaping @Sendable () -> Bool) async {
        for await _ in episodes {
            ticks: while true {
                do { try await clock.sleep(for: interval) } catch { return }
                let step = probing.withLock { probing -> Step in
                    if !client.isOnline { return .probe }
                    if isFetching() { return .wait }
                    probing = false
                    return .end
                }
                switch step {
                case .probe: client.setOnline(true)
                case .wait: continue ticks
                case .end: break ticks
                }
            }
        }
    }

    /// Ends the episodes' stream (``run(every:on:isFetching:)`` returns).
    func finish() {
        episodeStarted.finish()
    }
}

/// A loader that reports a request that never reached the server (``HTTPError/neverReachedTheServer``)
/// to `unreachable` before rethrowing it, so whoever listens acts before the caller hears of the
/// failure. Everything else passes through unchanged.
struct UnreachableReportingLoader<Base: Loader>: Loader {
    typealias Input = Base.Input
    typealias Output = Base.Output

    let base: Base
    let unreachable: @Sendable () -> Void

    func load(_ input: Input) async throws -> Output {
        try await loadTryingImmediately(input)
    }

    func load(_ input: Input, in context: LoadContext) async throws -> Output {
        do {
            return try await base.load(input, in: context)
        } catch let error as HTTPError where error.neverReachedTheServer {
            unreachable()
            throw error
        }
    }

    func loadImmediately(_ input: Input, in context: LoadContext) -> Output? {
        base.loadImmediately(input, in: context)
    }
}
