import ArgumentParser
import Foundation
import Logging
import StrataProxy

/// `strata proxy`.
public struct ProxyCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "proxy",
        abstract: "Run a caching HTTP proxy: one node on memory, or a node of a fleet that shares one PostgreSQL.",
        discussion: """
            Without --postgres-url the node runs alone, on memory (with --cache-dir, also on files
            that survive a restart). With --postgres-url it is a node of a fleet: a GET (or HEAD)
            goes memory → PostgreSQL → upstream. The proxy is a shared cache in RFC
            9111's sense: it never stores a response marked private or no-store, nor one to a request
            with Authorization unless the response allows it (public, s-maxage, must-revalidate);
            it honours s-maxage, max-age, Expires, Vary, Age and its clients' conditional requests.
            A stale response is revalidated with the upstream (If-None-Match, If-Modified-Since),
            served stale when the upstream fails or is slower than --soft-timeout (the revalidation
            goes on in the background), and a hit past 80 % of its lifetime starts one background
            revalidation. A miss takes the key's lock in PostgreSQL: one node of the fleet fetches,
            the others wait for what it stores (up to --lock-timeout, then fetch anyway).
            Other methods pass through; a success removes the stored responses of the paths they
            touched, on every node. Responses carry X-Cache (HIT, MISS, REVALIDATED, EXPIRED, STALE,
            PASS, BYPASS), X-Cache-Tier (memory, shared, upstream) and X-Strata-Node.

            Controls listen on their own port (--admin-port, default --port + 1; --admin-host,
            default loopback), never on the public one, whose /_strata/ paths reach the upstream.
            Every control that changes something needs --admin-token (send Authorization: Bearer
            TOKEN); reads need it too on an --admin-host other than loopback. Requests a browser
            sends for another site are refused.
              POST /_strata/invalidate?tag=T&mode=expire|remove     responses tagged T (Cache-Tag,
                                                                     Surrogate-Key), on every node
              POST /_strata/invalidate?prefix=/path&mode=...        paths starting with /path
              POST /_strata/clear?mode=expire|remove                 every stored response
              GET  /_strata/metrics                                  counters (Prometheus text)
              GET  /_strata/health
            expire keeps the responses as stale copies (served if the upstream fails); remove
            deletes them. Start several nodes on one PostgreSQL and one --table: that is the fleet.
            Stop with Ctrl-C or SIGTERM.
            """
    )

    @Option(help: "The upstream's base URL, for example http://127.0.0.1:9000.")
    var upstream: String

    @Option(help: "The port to listen on (0 picks a free one, printed at start).")
    var port = 8080

    @Option(help: "The address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "The port of the controls (/_strata/…); default --port + 1, a free one when --port is 0.")
    var adminPort: Int?

    @Option(help: "The address the controls listen on.")
    var adminHost = "127.0.0.1"

    @Option(help: "The fleet's PostgreSQL URL (default: $STRATA_POSTGRES_URL). Without one (or with \"\"), the node runs alone, on memory.")
    var postgresURL: String?

    @Option(help: "Without PostgreSQL: a directory that keeps the cache across restarts.")
    var cacheDir: String?

    @Option(help: "The memory tier's budget in bytes (bodies and header fields; 256MiB).", transform: ByteCountArgument.init(parsing:))
    var memoryBytes = ByteCountArgument(bytes: 256 * 1024 * 1024, description: "256MiB")

    @Option(help: "The most responses the memory tier keeps (10000).")
    var memoryEntries = 10_000

    @Option(help: "The largest response body that is cached (16MiB); larger ones pass through.", transform: ByteCountArgument.init(parsing:))
    var maxBodyBytes = ByteCountArgument(bytes: 16 * 1024 * 1024, description: "16MiB")

    @Option(help: "The shared table's (or cache directory's) budget in bytes, kept by a sweep (1GiB).", transform: ByteCountArgument.init(parsing:))
    var tableBytes = ByteCountArgument(bytes: 1024 * 1024 * 1024, description: "1GiB")

    @Option(help: "Rows stored longer ago than this are swept from the shared table.", transform: DurationArgument.init(parsing:))
    var tableMaxAge = DurationArgument(.seconds(7 * 24 * 3600), description: "7d")

    @Option(help: "A client connection idle this long is closed.", transform: DurationArgument.init(parsing:))
    var idleTimeout = DurationArgument(.seconds(60), description: "60s")

    @Option(help: "The most client connections open at once.")
    var maxConnections = 4096

    @Option(help: "A targeted cache-control field (RFC 9213) to obey before CDN-Cache-Control and Cache-Control; repeatable.")
    var targetedCacheControl: [String] = []

    @Option(help: "The largest request body passed to the upstream (64MiB); a longer one is cut.", transform: ByteCountArgument.init(parsing:))
    var maxRequestBodyBytes = ByteCountArgument(bytes: 64 * 1024 * 1024, description: "64MiB")

    @Option(help: "The most variants (Vary) kept per target; one more lets go of the least recently stored.")
    var maxVariants = 8

    @Flag(help: "Pass the clients' Forwarded and X-Forwarded-* fields to the upstream (only behind a load balancer that sets them).")
    var trustForwarded = false

    @Option(help: "The cache's table: nodes with the same table form one fleet; other tables are other caches.")
    var table = "strata_proxy"

    @Option(help: "This node's name (default: proxy-<pid>).")
    var node: String?

    @Option(help: "How long a miss waits for the node fetching its key before fetching itself.", transform: DurationArgument.init(parsing:))
    var lockTimeout = DurationArgument(.seconds(5), description: "5s")

    @Option(help: "With a stale copy, how long to wait for the upstream before serving it (0 turns it off).",
            transform: DurationArgument.init(parsing:))
    var softTimeout = DurationArgument(.seconds(1), description: "1s")

    @Option(help: "How long an upstream request may take.", transform: DurationArgument.init(parsing:))
    var hardTimeout = DurationArgument(.seconds(30), description: "30s")

    @Option(help: "How long past its lifetime a response may be served when the upstream fails.", transform: DurationArgument.init(parsing:))
    var maxStale = DurationArgument(.seconds(24 * 3600), description: "1d")

    @Option(help: "Require Authorization: Bearer TOKEN for the /_strata/ controls (health excepted).")
    var adminToken: String?

    @Flag(help: "Log every request's outcome (debug level).")
    var verbose = false

    public init() {}

    public func run() async throws {
        let loopback: Set<String> = ["127.0.0.1", "::1", "localhost"]
        guard loopback.contains(adminHost) || adminToken != nil else {
            throw ValidationError("--admin-host \(adminHost) is reachable from other machines: give --admin-token, so that only holders of the token can read the figures or change the cache")
        }
        guard maxConnections > 0 else { throw ValidationError("--max-connections: at least 1") }
        guard let url = URL(string: upstream), let scheme = url.scheme, ["http", "https"].contains(scheme), url.host != nil else {
            throw ValidationError("--upstream: an http:// or https:// URL, for example http://127.0.0.1:9000")
        }
        // An empty --postgres-url runs the node alone even when STRATA_POSTGRES_URL is set.
        let postgres = (postgresURL ?? ProcessInfo.processInfo.environment["STRATA_POSTGRES_URL"]).flatMap { $0.isEmpty ? nil : $0 }
        if postgres != nil, cacheDir != nil {
            throw ValidationError("--cache-dir is for a node alone: with --postgres-url, PostgreSQL is the shared tier")
        }
        let name = node ?? "proxy-\(ProcessInfo.processInfo.processIdentifier)"
        var options = ProxyNode.Options(upstream: url, node: name, postgresURL: postgres)
        options.host = host
        options.port = port
        options.adminHost = adminHost
        options.adminPort = adminPort
        options.cacheDirectory = cacheDir.map { URL(fileURLWithPath: $0, isDirectory: true) }
        options.memoryByteLimit = memoryBytes.bytes ?? Int.max
        guard memoryEntries > 0 else { throw ValidationError("--memory-entries must be at least 1") }
        options.memoryCountLimit = memoryEntries
        options.maxBodyBytes = maxBodyBytes.bytes ?? Int.max
        options.tableByteLimit = tableBytes.bytes ?? Int.max
        options.tableMaxAge = tableMaxAge.duration
        options.idleTimeout = idleTimeout.duration
        options.maxConnections = maxConnections
        let token = CharacterSet(charactersIn: "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
        for name in targetedCacheControl where name.isEmpty || !name.unicodeScalars.allSatisfy(token.contains) {
            throw ValidationError("--targeted-cache-control: '\(name)' is not a field name")
        }
        options.targetedFields = targetedCacheControl
        options.trustForwardedFields = trustForwarded
        guard maxVariants > 0 else { throw ValidationError("--max-variants: at least 1") }
        options.maxVariants = maxVariants
        options.maxRequestBodyBytes = maxRequestBodyBytes.bytes ?? Int.max
        options.table = table
        options.lockTimeout = lockTimeout.duration
        options.softTimeout = softTimeout.duration > .zero ? softTimeout.duration : nil
        options.hardTimeout = hardTimeout.duration
        options.maxStale = maxStale.duration
        options.adminToken = adminToken
        var logger = Logger(label: "strata.proxy")
        logger.logLevel = verbose ? .debug : .warning
        let proxy = try await ProxyNode.start(options: options, logger: logger)
        StandardOutput.writeLine(
            "strata proxy \(name): listening on http://\(host):\(proxy.port) → \(upstream); controls on http://\(adminHost):\(proxy.adminPort)/_strata/; \(proxy.summary)")
        try await proxy.run()
    }
}
