import Foundation
import Logging
@_spi(StrataInternals) import Strata

/// `strata fetch`: an offline-first fetch of any HTTP resource, for scripts and people.
///
/// The chain: fresh cache (`maxAge`) → remote (with retries, saved to the cache) → stale cache
/// (`maxStale`, unbounded by default) → the `--default` file. The body goes to `stdout`; where it came
/// from and its age go to `stderr`.
public struct Fetcher: Sendable {
    /// Where `strata fetch` keeps its cache.
    public enum StoreKind: String, Sendable, CaseIterable {
        /// One file per URL in the cache directory (`FileStore`).
        case file
        /// One SQLite database, `fetch.sqlite`, in the cache directory (`SQLiteStore`).
        case sqlite
        /// A PostgreSQL table shared by every process and host that uses it (`PostgresStore`).
        case postgres
    }

    public struct Options: Sendable {
        public var url: URL
        public var cacheDirectory: URL
        /// Which store caches bodies.
        public var store: StoreKind = .file
        /// The database for ``StoreKind/postgres``: `postgres://user:password@host:port/database`.
        public var postgresURL: String?
        public var maxAge: Duration
        public var maxStale: Duration?
        public var retries: Int
        public var timeout: Duration?
        public var defaultFile: URL?
        public var json: Bool
        public var verbose: Bool
        /// The largest response body accepted (``Fetcher/defaultMaxBodyBytes`` unless set); `nil`: no
        /// limit. A larger body fails the remote tier with `HTTPError.bodyTooLarge` and is not cached.
        public var maxBodyBytes: Int? = Fetcher.defaultMaxBodyBytes

        public init(url: URL, cacheDirectory: URL, maxAge: Duration = .seconds(300), maxStale: Duration? = nil,
                    retries: Int = 2, timeout: Duration? = .seconds(30), defaultFile: URL? = nil,
                    json: Bool = false, verbose: Bool = false) {
            self.url = url
            self.cacheDirectory = cacheDirectory
            self.maxAge = maxAge
            self.maxStale = maxStale
            self.retries = retries
            self.timeout = timeout
            self.defaultFile = defaultFile
            self.json = json
            self.verbose = verbose
        }
    }

    /// The default `--max-body`: 8 MB (8 × 1024 × 1024 bytes).
    public static let defaultMaxBodyBytes = 8 * 1024 * 1024

    /// The documented exit codes.
    public enum ExitCode: Int32, Sendable {
        /// A body was served (from any tier).
        case served = 0
        /// Nothing could be served: every tier failed. One line on stderr says why.
        case nothingServed = 1
        /// Bad flags or a bad URL (ArgumentParser's usage error code).
        case usage = 64
    }

    let options: Options
    let client: any HTTPTransport
    let now: @Sendable () -> Date

    public init(options: Options, client: any HTTPTransport = URLSessionHTTPClient.shared, now: @escaping @Sendable () -> Date = { Date() }) {
        self.options = options
        self.client = client
        self.now = now
    }

    /// The default cache directory: the user's cache directory (`~/.cache` on Linux,
    /// `~/Library/Caches` on Apple platforms), then `strata/fetch`.
    public static var defaultCacheDirectory: URL {
        let caches = FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask).first
            ?? FileManager.default.temporaryDirectory
        return caches.appendingPathComponent("strata", isDirectory: true).appendingPathComponent("fetch", isDirectory: true)
    }

    /// Runs the fetch, writing the body with `stdout` and the report with `stderr`; returns the exit code.
    public func run(stdout: @Sendable (Data) -> Void, stderr: @Sendable (String) -> Void) async -> ExitCode {
        let quiet = Logger(label: "strata.fetch", factory: { _ in SwiftLogNoOpLogHandler() })
        let cache: FetchCache
        do {
            cache = try FetchCache.open(options.store, directory: options.cacheDirectory, postgresURL: options.postgresURL, logger: quiet)
        } catch let error as FetchCache.MissingPostgresURL {
            stderr("strata fetch: \(error)")
            return .usage
        } catch {
            // The cache cannot even be opened: fetch without one, so the network and --default still serve.
            stderr("strata fetch: the \(options.store.rawValue) cache is unavailable (\(Redaction.redactingSecrets(in: "\(error)"))); fetching without it")
            return await run(through: MemoryStore<String, Data>(), stdout: stdout, stderr: stderr)
        }
        let code = await run(through: cache.store, stdout: stdout, stderr: stderr)
        await cache.close()
        return code
    }

    /// Runs the fetch with `store` as the cache.
    ///
    /// The first tier is the library's revalidating HTTP cache (``HTTPLoader/revalidated(in:key:freshness:honorsCacheControl:now:logger:decode:)``):
    /// a copy younger than `--max-age` (and than the server's `max-age`, which can only shorten it) is
    /// served without a request; otherwise the request carries the stored `ETag` / `Last-Modified`,
    /// a 304 serves the stored body and re-stamps it, a 200 replaces it (unless `no-store`).
    func run<S: Store>(
        through store: S, stdout: @Sendable (Data) -> Void, stderr: @Sendable (String) -> Void
    ) async -> ExitCode where S.Key == String, S.Value == Data {
        let quiet = Logger(label: "strata.fetch", factory: { _ in SwiftLogNoOpLogHandler() })
        let key = options.url.absoluteString
        let answer = NetworkAnswer()
        let remote = Self.revalidatingRemote(
            options.url, in: store, maxAge: options.maxAge, timeout: options.timeout, maxBodyBytes: options.maxBodyBytes,
            transport: client, onReply: { answer.record(status: $0.status.code, cacheControl: $0.headerFields.cacheControl) })
            .retrying(.exponential(attempts: options.retries + 1, initialDelay: .milliseconds(250), maxDelay: .seconds(5)))
        let chain = remote.named(Self.remoteTier)
            .fallingBack(to: store.loader(key: key, freshness: options.maxStale.map { .maxAge($0) } ?? .any).named("stale cache"))
            .fallingBack(to: defaults.named("default"))
            .environment(LoadEnvironment(now: now, logger: quiet))
        do {
            let served = try await chain.loadServed()
            stdout(served.value)
            report(Outcome(served, answer: answer.value), stderr: stderr)
            return .served
        } catch {
            reportFailure(error, stderr: stderr)
            return .nothingServed
        }
    }

    /// The name of the first tier (cache, then network) in reports and failure lists.
    static let remoteTier = "remote"

    private var defaults: AnyLoader<Void, Data> {
        guard let file = options.defaultFile else {
            return AnyLoader("default") { throw NoDefault() }
        }
        return BundledLoader(fileURL: file).eraseToAnyLoader()
    }

    private struct NoDefault: Error, CustomStringConvertible {
        var description: String { "no --default file given" }
    }

    private func report(_ outcome: Outcome, stderr: (String) -> Void) {
        let served = outcome.served
        if options.verbose {
            for event in served.events { stderr("strata fetch: " + Redaction.redactingSecrets(in: "\(event)")) }
        }
        if options.json {
            stderr(json(outcome))
            return
        }
        let age = served.provenance.age.map { "age \(($0).formattedAge)" } ?? "age unknown"
        let how: String
        switch outcome.kind {
        case .downloaded(let status, let noStore):
            let saved = outcome.savedToCache ? ", saved to the cache" : noStore ? ", not cached: Cache-Control no-store" : ""
            how = "downloaded: \(status), \(age)\(saved)"
        case .revalidated:
            how = outcome.restamped
                ? "revalidated: 304 Not Modified, served the cached copy, fresh again"
                : "revalidated: 304 Not Modified, served the cached copy"
        case .cache, .other:
            let saved = outcome.savedToCache ? ", saved to the cache" : ""
            how = "\(age)\(saved)"
        }
        stderr("strata fetch: served from \(outcome.tier) (\(how)), \(served.value.count) bytes")
    }

    private func json(_ outcome: Outcome) -> String {
        let served = outcome.served
        var object: [String: Any] = [
            "url": Redaction.redactedString(for: options.url),
            "servedFrom": outcome.tier,
            "origin": "\(served.provenance.origin)",
            "bytes": served.value.count,
        ]
        switch outcome.kind {
        case .downloaded(let status, _): object["httpStatus"] = status
        case .revalidated: object["httpStatus"] = 304
        case .cache, .other: break
        }
        object["revalidated"] = outcome.kind == .revalidated
        object["savedToCache"] = outcome.savedToCache || outcome.restamped
        if let age = served.provenance.age {
            object["ageSeconds"] = age / .seconds(1)
        }
        if let storedAt = served.provenance.storedAt {
            object["storedAt"] = ISO8601DateFormatter().string(from: storedAt)
        }
        object["failedTiers"] = served.events.compactMap { event -> [String: String]? in
            guard case .tierFailed(let tier, let error) = event else { return nil }
            return ["tier": tier, "error": Redaction.redactingSecrets(in: "\(error)")]
        }
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    private func reportFailure(_ error: any Error, stderr: (String) -> Void) {
        guard let fallback = error as? FallbackError else {
            stderr("strata fetch: nothing served: " + Redaction.redactingSecrets(in: "\(error)"))
            return
        }
        let reasons = fallback.failures.map { "\($0.tier): \(Self.shortReason($0.error))" }
        if options.json {
            let object: [String: Any] = [
                "url": Redaction.redactedString(for: options.url), "servedFrom": NSNull(),
                "failedTiers": fallback.failures.map { ["tier": $0.tier, "error": Redaction.redactingSecrets(in: "\($0.error)")] },
            ]
            let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
            stderr(String(decoding: data, as: UTF8.self))
        } else {
            stderr("strata fetch: nothing to serve for \(Redaction.redactedString(for: options.url)): " + reasons.joined(separator: "; "))
        }
        if options.verbose {
            for failure in fallback.failures { stderr("strata fetch:   \(failure.tier): " + Redaction.redactingSecrets(in: "\(failure.error)")) }
        }
    }

    /// `error` in a few words for a report line: `nothing cached`, `HTTP 503`, the transport's
    /// reason (`could not connect (connection refused)`), secrets masked.
    static func shortReason(_ error: any Error) -> String {
        switch error {
        case CacheLoadError.empty: return "nothing cached"
        case CacheLoadError.expired(_, _, _, let age, _): return "cached copy too old (\(age.formattedAge))"
        case HTTPError.transport(_, let reason, _): return reason
        case HTTPError.status(let code, _, _, _): return "HTTP \(code)"
        case HTTPError.bodyTooLarge(_, let limit, _, _): return "response larger than \(formatByteCount(limit)) (--max-body)"
        default: return Redaction.redactingSecrets(in: "\(error)")
        }
    }
}

/// `bytes` for people: `8 MB`, `512 KB`, `1.5 GB` (powers of 1024, as `--max-body` reads them), or
/// `N bytes` below 1 KB.
func formatByteCount(_ bytes: Int) -> String {
    let units: [(String, Double)] = [("GB", 1_073_741_824), ("MB", 1_048_576), ("KB", 1024)]
    for (name, size) in units where Double(bytes) >= size {
        let value = Double(bytes) / size
        let text = value == value.rounded() ? String(Int(value)) : String(format: "%.1f", value)
        return "\(text) \(name)"
    }
    return "\(bytes) bytes"
}

extension Fetcher {
    /// What the network said to the first tier, as seen by its decoder (which only sees 2xx answers).
    struct Answer: Sendable, Equatable {
        var status: Int
        var noStore: Bool
    }

    /// The last 2xx answer of one run (written by the decoder, read after the load).
    final class NetworkAnswer: Sendable {
        private let answer = Locked<Answer?>(nil)

        func record(status: Int, cacheControl: CacheControl) {
            answer.withLock { $0 = Answer(status: status, noStore: cacheControl.noStore) }
        }

        var value: Answer? { answer.withLock { $0 } }
    }

    /// How one fetch was served, in the words of the report.
    struct Outcome {
        enum Kind: Equatable {
            /// The first tier served a stored copy without a request (fresh for `--max-age` and the server).
            case cache
            /// The server sent the body (`status` 2xx); `noStore` when it said `Cache-Control: no-store`.
            case downloaded(status: Int, noStore: Bool)
            /// The server answered 304 Not Modified and the stored body was served.
            case revalidated
            /// Another tier (stale cache, default) served.
            case other
        }

        let served: Served<Data>
        let kind: Kind

        init(_ served: Served<Data>, answer: Answer?) {
            self.served = served
            let provenance = served.provenance
            if provenance.tier != Fetcher.remoteTier {
                kind = .other
            } else if provenance.origin != .remote {
                kind = .cache
            } else if let answer {
                kind = .downloaded(status: answer.status, noStore: answer.noStore)
            } else {
                // The first tier served from the network without decoding a body: only a 304 does that.
                kind = .revalidated
            }
        }

        /// The tier as the report names it: the first tier is "fresh cache" when it served a stored
        /// copy without asking, "remote" when the server answered.
        var tier: String { kind == .cache ? "fresh cache" : served.provenance.tier }

        /// Whether the body was written to the cache.
        var savedToCache: Bool { served.events.contains { if case .cacheWritten = $0 { true } else { false } } }

        /// Whether a 304 re-stamped the stored copy, so it is fresh again for `--max-age`.
        var restamped: Bool { served.events.contains { if case .revalidated = $0 { true } else { false } } }
    }
}
