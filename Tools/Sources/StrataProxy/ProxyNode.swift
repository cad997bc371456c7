import AsyncHTTPClient
import Foundation
import Hummingbird
import Logging
import NIOCore
@_spi(StrataInternals) import Strata
import StrataAsyncHTTPClient
import StrataPostgres

/// One running node of the caching proxy: its PostgreSQL store, backplane and fleet lock, its
/// upstream client, and its HTTP server on loopback.
///
/// ```swift
/// var options = ProxyNode.Options(upstream: upstream, node: "node-1", postgresURL: url)
/// options.port = 8080
/// let node = try await ProxyNode.start(options: options, logger: logger)
/// try await node.run()   // until SIGTERM or SIGINT
/// ```
public final class ProxyNode: Sendable {
    let proxy: CachingProxy
    let backplane: PostgresBackplane
    let client: HTTPClient
    let running: Task<Void, any Error>
    /// The port it listens on.
    public let port: Int

    private init(proxy: CachingProxy, backplane: PostgresBackplane, client: HTTPClient, running: Task<Void, any Error>, port: Int) {
        self.proxy = proxy
        self.backplane = backplane
        self.client = client
        self.running = running
        self.port = port
    }

    /// The options of a node (``start(options:)``).
    public struct Options: Sendable {
        public var upstream: URL
        public var node: String
        public var postgresURL: String
        public var table = "strata_proxy"
        public var host = "127.0.0.1"
        public var port = 8080
        public var lockTimeout: Duration = .seconds(5)
        public var softTimeout: Duration? = .seconds(1)
        public var hardTimeout: Duration = .seconds(30)
        public var maxStale: Duration = .seconds(24 * 3600)
        public var refreshAheadFraction: Double? = 0.8
        public var memoryCountLimit = 10_000
        public var adminToken: String?

        public init(upstream: URL, node: String, postgresURL: String) {
            self.upstream = upstream
            self.node = node
            self.postgresURL = postgresURL
        }
    }

    /// Connects to PostgreSQL, starts listening to the fleet, and serves on `options.host:port`
    /// (port 0 picks a free one: see ``port``).
    public static func start(options: Options, logger: Logger) async throws -> ProxyNode {
        let shared = try PostgresStore<StoredResponse>(url: options.postgresURL, table: options.table, logger: logger)
        shared.tagEntries { _, response in response.tags }
        let backplane = try PostgresBackplane(announcingFor: shared, node: options.node, logger: logger)
        let lock = try PostgresFleetLock(for: shared, node: options.node, logger: logger)
        let cache = TieredStore(
            memory: MemoryStore<String, StoredResponse>(countLimit: options.memoryCountLimit), shared: shared, backplane: backplane,
            environment: LoadEnvironment(logger: logger))
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        configuration.decompression = .disabled
        let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
        let settings = CachingProxy.Settings(
            upstream: options.upstream, node: options.node, lockTimeout: options.lockTimeout, softTimeout: options.softTimeout,
            hardTimeout: options.hardTimeout, maxStale: options.maxStale, refreshAheadFraction: options.refreshAheadFraction,
            adminToken: options.adminToken)
        let proxy = CachingProxy(
            settings: settings, cache: cache, lock: lock, transport: AsyncHTTPTransport(client: client), logger: logger)
        try await backplane.waitUntilListening()

        let router = Router()
        router.add(middleware: ProxyResponder(proxy: proxy))
        let (announced, portContinuation) = AsyncStream<Int>.makeStream()
        let app = Application(
            router: router,
            configuration: .init(address: .hostname(options.host, port: options.port), serverName: "strata-proxy"),
            onServerRunning: { channel in
                portContinuation.yield(channel.localAddress?.port ?? options.port)
                portContinuation.finish()
            },
            logger: logger)
        let running = Task {
            defer { portContinuation.finish() }
            try await app.runService(gracefulShutdownSignals: [.sigterm, .sigint])
        }
        var bound: Int?
        for await port in announced { bound = port }
        guard let bound else {
            try await running.value
            throw ProxyNodeError.didNotStart(host: options.host, port: options.port)
        }
        return ProxyNode(proxy: proxy, backplane: backplane, client: client, running: running, port: bound)
    }

    /// Runs until the server stops (SIGTERM or SIGINT), then lets go of its connections.
    public func run() async throws {
        defer { Task { [client] in try? await client.shutdown() } }
        try await running.value
        await backplane.shutdown()
        await proxy.lock.shutdown()
        await proxy.cache.shared.shutdown()
    }
}

/// Why a proxy node did not start.
public enum ProxyNodeError: Error, CustomStringConvertible {
    case didNotStart(host: String, port: Int)

    public var description: String {
        switch self {
        case .didNotStart(let host, let port): "strata proxy could not listen on \(host):\(port)"
        }
    }
}

/// Every request, whatever its path and method, goes to the proxy.
struct ProxyResponder<Context: RequestContext>: RouterMiddleware {
    let proxy: CachingProxy

    func handle(_ request: Hummingbird.Request, context: Context, next: (Hummingbird.Request, Context) async throws -> Response) async throws -> Response {
        var body: Data?
        if request.method != .get, request.method != .head {
            let buffer = try await request.body.collect(upTo: 64 * 1024 * 1024)
            body = Data(buffer.readableBytesView)
        }
        let answer = await proxy.handle(CachingProxy.Request(head: request.head, body: body))
        return Response(status: answer.status, headers: answer.fields, body: ResponseBody(byteBuffer: ByteBuffer(bytes: answer.body)))
    }
}
