import ArgumentParser
import Foundation
import Strata

/// `strata watch URL`.
public struct WatchCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Watch an HTTP resource live: one line per change of what a live query on it shows, until Ctrl-C.",
        discussion: """
            Each line says when, the status (empty, value, failed), the phase and why (fetching \
            because of the first observer, the interval or a reconnect, ", probe" when it checks \
            whether the server is back; paused because offline), what is shown (remote, fresh \
            cache, stale cache) and how old it is, its size, and the failures in a row with the \
            last one's reason. --json prints one JSON object per line with the keys time, status, \
            phase, reason, probe, source, tier, origin, ageSeconds, storedAt, bytes, stale, \
            failureCount and error (null where they do not apply).

            Every --every the copy is refetched if it is older than --max-age: the request carries \
            the cached ETag / Last-Modified, so an unchanged resource costs a 304. The cache is \
            strata fetch's (same --cache-dir and --store): the cached copy is shown while the first \
            request runs, and what watch stores, fetch serves.

            When the server cannot be reached (connection refused, host not found) the phase reads \
            paused (offline) and the cached copy stays shown, its age growing; once per --every one \
            request checks whether the server is back, and the first that gets through recovers.

            Ends on Ctrl-C (SIGINT) or SIGTERM, with exit code 0.

            Durations: 200ms, 5s, 10m, 2h, or a number of seconds. Sizes: 512KB, 8MB, 1GB, a number \
            of bytes, or none.
            """
    )

    @Argument(help: "The http or https URL to watch.")
    var url: String

    @Option(help: "How often to refetch (and, while the server is away, to check whether it is back); default 5s, at least 100ms.",
            transform: DurationArgument.init(parsing:))
    var every: DurationArgument = DurationArgument(.seconds(5), description: "5s")

    @OptionGroup var cache: CacheStoreOptions

    @Option(
        help: "Refetch only a copy at least this old; 0s (the default) revalidates at every --every.",
        transform: DurationArgument.init(parsing:))
    var maxAge: DurationArgument = DurationArgument(.zero, description: "0s")

    @Option(help: "Give up on a request after this long (default 10s).", transform: DurationArgument.init(parsing:))
    var timeout: DurationArgument = DurationArgument(.seconds(10), description: "10s")

    @Option(
        help: "Refuse a response body larger than this (default 8MB, as strata fetch): the load fails, nothing is cached.",
        transform: ByteCountArgument.init(parsing:))
    var maxBody: ByteCountArgument = ByteCountArgument(bytes: Fetcher.defaultMaxBodyBytes, description: "8MB")

    @Flag(help: "Print each change as one JSON object per line.")
    var json = false

    /// The shortest `--every`: a watch is a person's view, not a load test.
    static let shortestInterval = Duration.milliseconds(100)

    public init() {}

    public func validate() throws {
        _ = try HTTPURLArgument.parse(url)
        guard every.duration >= Self.shortestInterval else { throw ValidationError("--every must be at least 100ms") }
        guard timeout.duration > .zero else { throw ValidationError("--timeout must be longer than 0 (for example 10s)") }
    }

    public func run() async throws {
        var options = Watcher.Options(
            url: try HTTPURLArgument.parse(url), cacheDirectory: cache.cacheDirectory, maxAge: maxAge.duration,
            every: every.duration, timeout: timeout.duration, json: json)
        options.maxBodyBytes = maxBody.bytes
        options.store = cache.store
        options.postgresURL = cache.resolvedPostgresURL
        let watcher = Watcher(options: options)
        let standardError: @Sendable (String) -> Void = { FileHandle.standardError.write(Data(($0 + "\n").utf8)) }
        // SIGINT / SIGTERM end the watch (its task is cancelled) and the command returns: exit 0.
        let (stop, stopRequested) = AsyncStream.makeStream(of: Void.self)
        let signals = SignalWaiter.start { stopRequested.yield() }
        defer { signals.forEach { $0.cancel() } }
        standardError("strata watch: \(Redaction.redactedString(for: options.url)) every \(every), Ctrl-C to stop")
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await watcher.run(stdout: StandardOutput.writeLine, stderr: standardError) }
            group.addTask { for await _ in stop { return } }
            await group.next()
            group.cancelAll()
        }
    }
}
