import ArgumentParser
import Foundation

/// `strata fetch URL`.
public struct FetchCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "fetch",
        abstract: "Fetch an HTTP resource offline-first: fresh cache, then the network, then a stale copy, then a default.",
        discussion: """
            The body goes to standard output. Where it came from (remote, fresh cache, stale cache or \
            default) and its age go to standard error.

            Exit codes:
              0   a body was served (from any tier)
              1   nothing could be served; standard error says why, tier by tier
              64  bad flags or a bad URL

            Revalidation: the cached copy keeps the server's ETag and Last-Modified. Past --max-age \
            the request carries If-None-Match / If-Modified-Since; a 304 Not Modified serves the \
            cached copy and makes it fresh again for --max-age. The server's Cache-Control can only \
            shorten --max-age: a copy is served without asking only while younger than both \
            --max-age and the server's max-age (or Expires); no-cache means ask every time; \
            no-store means never cached (a copy cached earlier stays as the stale fallback).

            Durations: 500ms, 30s, 10m, 2h, 7d, or a number of seconds, up to 100 years.
            Sizes: 512KB, 8MB, 1GB (powers of 1024), or a number of bytes; none for no limit.
            """
    )

    @Argument(help: "The http or https URL to fetch.")
    var url: String

    @OptionGroup var cache: CacheStoreOptions

    @Option(
        help: "Serve a cached copy younger than this without asking the network; past it, revalidate (304) or download.",
        transform: DurationArgument.init(parsing:))
    var maxAge: DurationArgument = DurationArgument(.seconds(300), description: "5m")

    @Option(
        help: "When the network fails, serve a cached copy only if younger than this (default: any age).",
        transform: DurationArgument.init(parsing:))
    var maxStale: DurationArgument?

    @Option(help: "Retries after a transient network failure (connection errors, 408, 429, 5xx).")
    var retries: Int = 2

    @Option(help: "Give up on a request after this long.", transform: DurationArgument.init(parsing:))
    var timeout: DurationArgument = DurationArgument(.seconds(30), description: "30s")

    @Option(name: .customLong("default"), help: "A file to serve when there is neither network nor cache.")
    var defaultFile: String?

    @Option(
        help: "The largest response body to accept; a larger one is refused while it is read, not cached, and the next tier serves.",
        transform: ByteCountArgument.init(parsing:))
    var maxBody: ByteCountArgument = ByteCountArgument(bytes: Fetcher.defaultMaxBodyBytes, description: "8MB")

    @Flag(help: "Report provenance on standard error as one JSON object.")
    var json = false

    @Flag(help: "Report every tier tried, retry and cache write on standard error.")
    var verbose = false

    /// Hidden, for tests: the wall-clock time this fetch takes as "now" (an ISO 8601 date and time,
    /// such as `2026-01-01T12:00:00Z`), so a test can run the binary "ten minutes later" without
    /// waiting. It stamps what is cached and ages what is read; the network is not affected.
    @Option(help: ArgumentHelp("For tests: the time to take as now (ISO 8601, such as 2026-01-01T12:00:00Z).", visibility: .hidden),
            transform: FetchCommand.parseNow)
    var now: Date?

    public init() {}

    public func validate() throws {
        _ = try HTTPURLArgument.parse(url)
        guard (0...10).contains(retries) else { throw ValidationError("--retries must be between 0 and 10") }
        guard timeout.duration > .zero else { throw ValidationError("--timeout must be longer than 0 (for example 30s)") }
        if let defaultFile, !FileManager.default.fileExists(atPath: defaultFile) {
            throw ValidationError("--default file '\(defaultFile)' does not exist")
        }
    }

    public func run() async throws {
        var options = Fetcher.Options(
            url: try HTTPURLArgument.parse(url),
            cacheDirectory: cache.cacheDirectory,
            maxAge: maxAge.duration, maxStale: maxStale?.duration, retries: retries, timeout: timeout.duration,
            defaultFile: defaultFile.map { URL(fileURLWithPath: $0) }, json: json, verbose: verbose)
        options.store = cache.store
        options.maxBodyBytes = maxBody.bytes
        options.postgresURL = cache.resolvedPostgresURL
        let fixedNow = now
        let clock: @Sendable () -> Date = { fixedNow ?? Date() }
        let code = await Fetcher(options: options, now: clock).run(
            stdout: { FileHandle.standardOutput.write($0) },
            stderr: { FileHandle.standardError.write(Data(($0 + "\n").utf8)) })
        if code != .served { throw ExitCode(code.rawValue) }
    }
}

extension FetchCommand {
    /// `--now`: an ISO 8601 date and time with a time zone (`2026-01-01T12:00:00Z`, fractional
    /// seconds allowed).
    static func parseNow(_ text: String) throws -> Date {
        let plain = ISO8601DateFormatter()
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions.insert(.withFractionalSeconds)
        guard let date = plain.date(from: text) ?? fractional.date(from: text) else {
            throw InvalidArgument("not an ISO 8601 date and time such as 2026-01-01T12:00:00Z")
        }
        return date
    }
}

extension Fetcher.StoreKind: ExpressibleByArgument {}
