import Foundation
import Logging
@_spi(StrataInternals) import Strata
import StrataQueries

/// `strata watch`: a live query on one URL, one line per change of its snapshot, until the task
/// running it is cancelled.
///
/// The query (``QueryClient``, ``Query``) loads through `strata fetch`'s first tier, the
/// revalidating HTTP cache in the same store (a copy younger than `maxAge` is served without
/// asking, an older one is revalidated: 304 or a new body), and shows the cached copy of any age
/// while it loads. Its interval refetches every `every`. When a request never reaches the server,
/// a ``ServerProbe`` takes the client offline, so the query reads `paused (offline)` and keeps
/// showing the cached copy (its age growing), and probes once per interval; the first request that
/// gets through recovers it.
///
/// Time comes from `environment` (its clock ticks the interval and the probes, its `now` ages the
/// copies): the command passes the real one, a test a `ManualClock`'s.
public struct Watcher: Sendable {
    /// What to watch and how.
    public struct Options: Sendable {
        /// The http or https URL.
        public var url: URL
        /// The cache directory (`--cache-dir`).
        public var cacheDirectory: URL
        /// Which store caches bodies (`--store`).
        public var store: Fetcher.StoreKind = .file
        /// The database for ``Fetcher/StoreKind/postgres``.
        public var postgresURL: String?
        /// A copy younger than this is served without a request (`--max-age`); `.zero` revalidates
        /// at every interval.
        public var maxAge: Duration
        /// The refetch interval, and the probes' while the server is away (`--every`).
        public var every: Duration
        /// How long one request may take.
        public var timeout: Duration?
        /// The largest response body accepted (`--max-body`); `nil`: no limit.
        public var maxBodyBytes: Int? = Fetcher.defaultMaxBodyBytes
        /// Lines as JSON objects (`--json`) rather than text.
        public var json: Bool

        public init(url: URL, cacheDirectory: URL, maxAge: Duration = .zero, every: Duration = .seconds(5),
                    timeout: Duration? = .seconds(10), json: Bool = false) {
            self.url = url
            self.cacheDirectory = cacheDirectory
            self.maxAge = maxAge
            self.every = every
            self.timeout = timeout
            self.json = json
        }
    }

    let options: Options
    let transport: any HTTPTransport
    let environment: LoadEnvironment

    /// A watch of `options.url` through `transport`, on `environment`'s clocks (its logger is not
    /// used: the watch reports in its lines).
    public init(options: Options, transport: any HTTPTransport = URLSessionHTTPClient.shared, environment: LoadEnvironment = .live) {
        self.options = options
        self.transport = transport
        self.environment = LoadEnvironment(
            now: environment.now, clock: environment.clock,
            logger: Logger(label: "strata.watch", factory: { _ in SwiftLogNoOpLogHandler() }))
    }

    /// Watches until the calling task is cancelled, writing each line with `stdout` and what is not
    /// a snapshot (the cache cannot be opened) with `stderr`.
    public func run(stdout: @escaping @Sendable (String) -> Void, stderr: @escaping @Sendable (String) -> Void) async {
        let cache: FetchCache
        do {
            cache = try FetchCache.open(options.store, directory: options.cacheDirectory, postgresURL: options.postgresURL, logger: environment.logger)
        } catch {
            stderr("strata watch: the \(options.store.rawValue) cache is unavailable (\(Redaction.redactingSecrets(in: "\(error)"))); watching without it")
            await watch(through: MemoryStore<String, Data>(), stdout: stdout)
            return
        }
        await watch(through: cache.store, stdout: stdout)
        await cache.close()
    }

    /// The query's policy: the interval refetches a copy older than `--max-age`, but never one
    /// younger than half the interval (a load that has just answered — a probe that found the
    /// server again — is not followed by another at the same tick). No foreground, no retries of
    /// its own: the next interval is the retry.
    var policy: QueryPolicy {
        QueryPolicy(staleAfter: max(options.maxAge, options.every / 2), refetchOnForeground: false, refetchInterval: options.every)
    }

    /// Watches with `store` as the cache.
    func watch<S: Store>(through store: S, stdout: @escaping @Sendable (String) -> Void) async where S.Key == String, S.Value == Data {
        let client = QueryClient(environment: environment)
        let probe = ServerProbe(client: client)
        let remote = Fetcher.revalidatingRemote(
            options.url, in: store, maxAge: options.maxAge, timeout: options.timeout, maxBodyBytes: options.maxBodyBytes,
            transport: transport)
        // Weak: the chain lives in the client's query, and the probe holds the client.
        let chain = UnreachableReportingLoader(base: remote.named(Fetcher.remoteTier)) { [weak probe] in probe?.serverUnreachable() }
        let key = options.url.absoluteString
        let query = client.query(
            ["strata watch", .name(key)], policy: policy, cached: store.loader(key: key, freshness: .any).named("cache"), chain: chain)
        let (options, now) = (options, environment.now)
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                var previous: QueryPhase?
                var last: QuerySnapshot<Data>?
                for await snapshot in query.snapshots() {
                    // The query's own staleness flag turning is not a change a line shows (the
                    // line judges the age against --max-age itself).
                    if var unflagged = last {
                        unflagged.isStale = snapshot.isStale
                        if unflagged == snapshot { continue }
                    }
                    last = snapshot
                    // Only a probe takes a load paused offline to fetching (the client going online).
                    let probe = previous == .paused(.offline)
                    previous = snapshot.phase
                    let line = WatchLine(snapshot, now: now(), maxAge: options.maxAge, probe: probe)
                    if line.isBlank { continue }
                    stdout(options.json ? line.json : line.text)
                }
            }
            group.addTask { [clock = environment.clock] in
                await probe.run(every: options.every, on: clock) { query.current.isFetching }
            }
            // Both run until the task is cancelled; the first to end ends the other.
            await group.next()
            group.cancelAll()
        }
        probe.finish()
    }
}
