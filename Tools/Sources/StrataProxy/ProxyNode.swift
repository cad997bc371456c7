import AsyncHTTPClient
import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
@_spi(StrataInternals) import Strata
import StrataAsyncHTTPClient
import StrataPostgres

/// One running node of the caching proxy: its shared tier (PostgreSQL with its backplane and
/// fleet lock, a directory of files, or none), its upstream client, its HTTP server and its
/// control listener.
///
/// ```swift
/// var options = ProxyNode.Options(upstream: upstream, node: "node-1", postgresURL: url)
/// options.port = 8080
/// let node = try await ProxyNode.start(options: options, logger: logger)
/// try await node.run()   // until SIGTERM or SIGINT
/// ```
public final class ProxyNode: Sendable {
    let proxy: CachingProxy
    let backplane: PostgresBackplane?
    let client: HTTPClient
    let running: Task<Void, any Error>
    let admin: Task<Void, any Error>
    let sweeper: Task<Void, Never>?
    /// The port it listens on.
    public let port: Int
    /// The port its controls (`/_strata/…`) listen on.
    public let adminPort: Int
    /// What the node stands on, in one line: a fleet member, or a node alone.
    public let summary: String

    private init(
        proxy: CachingProxy, backplane: PostgresBackplane?, client: HTTPClient, running: Task<Void, any Error>,
        admin: Task<Void, any Error>, sweeper: Task<Void, Never>?, port: Int, adminPort: Int, summary: String
    ) {
        self.proxy = proxy
        self.backplane = backplane
        self.client = client
        self.running = running
        self.admin = admin
        self.sweeper = sweeper
        self.port = port
        self.adminPort = adminPort
        self.summary = summary
    }

    /// The options of a node (``start(options:logger:)``).
    public struct Options: Sendable {
        public var upstream: URL
        public var node: String
        /// The fleet's PostgreSQL; `nil` runs one node alone, on memory (and ``cacheDirectory``).
        public var postgresURL: String?
        /// Without PostgreSQL, a directory that keeps the cache across restarts.
        public var cacheDirectory: URL?
        public var table = "strata_proxy"
        public var host = "127.0.0.1"
        public var port = 8080
        /// Where the controls listen: loopback by default.
        public var adminHost = "127.0.0.1"
        /// The controls' port: `nil` is ``port`` + 1 (a free one when ``port`` is 0).
        public var adminPort: Int?
        public var lockTimeout: Duration = .seconds(5)
        public var softTimeout: Duration? = .seconds(1)
        public var hardTimeout: Duration = .seconds(30)
        public var maxStale: Duration = .seconds(24 * 3600)
        public var refreshAheadFraction: Double? = 0.8
        public var memoryCountLimit = 10_000
        /// The memory tier's budget: the bytes of the bodies and header fields it keeps.
        public var memoryByteLimit = 256 * 1024 * 1024
        /// The largest response body the proxy caches.
        public var maxBodyBytes = 16 * 1024 * 1024
        /// The shared table's budget: the bytes of its values, kept by a sweep.
        public var tableByteLimit = 1024 * 1024 * 1024
        /// Rows stored longer ago than this are swept from the shared table.
        public var tableMaxAge: Duration = .seconds(7 * 24 * 3600)
        /// How often the table's budget is swept.
        public var sweepInterval: Duration = .seconds(60)
        /// A client connection that sends nothing for this long is closed.
        public var idleTimeout: Duration = .seconds(60)
        /// The most client connections open at once; more wait to be accepted.
        public var maxConnections = 4096
        /// How long the start waits for PostgreSQL before serving without it (it keeps trying).
        public var postgresStartTimeout: Duration = .seconds(3)
        public var adminToken: String?
        /// Targeted cache-control fields (RFC 9213) this proxy obeys before `CDN-Cache-Control`
        /// and `Cache-Control`, in order (for example `Strata-Cache-Control`).
        public var targetedFields: [String] = []
        /// Pass the clients' `Forwarded` and `X-Forwarded-*` fields on (behind a load balancer that
        /// sets them); dropped otherwise.
        public var trustForwardedFields = false
        /// The most `Vary` variants kept per target.
        public var maxVariants = 8
        /// The largest request body passed to the upstream: a longer one is cut (the client gets
        /// `413`, or the upstream's error), so an endless body costs the node a bounded amount.
        public var maxRequestBodyBytes = 64 * 1024 * 1024

        public init(upstream: URL, node: String, postgresURL: String?) {
            self.upstream = upstream
            self.node = node
            self.postgresURL = postgresURL
        }
    }

    /// Connects to PostgreSQL when given (a database that does not answer within
    /// ``Options/postgresStartTimeout`` is not waited for: the node serves from memory and the
    /// upstream, and its backplane keeps connecting), and serves on `options.host:port` and its
    /// controls on `options.adminHost:adminPort` (port 0 picks a free one: see ``port``).
    public static func start(options: Options, logger: Logger) async throws -> ProxyNode {
        let sharedTier: ProxySharedTier
        var backplane: PostgresBackplane?
        var lock: PostgresFleetLock?
        let summary: String
        if let url = options.postgresURL {
            // Bodies travel as bytes (BinaryCodec: a body is its own bytes, not base64 in JSON), in
            // rows of format version 1 (the JSON rows of version 0 are left alone, never read);
            // the row limit is the largest cacheable body and room for its header fields.
            let store = try PostgresStore<StoredResponse>(url: url, codec: BinaryCodec<StoredResponse>(), options: PostgresStoreOptions(table: options.table, logger: logger))
            store.formatVersion = 1
            store.maxValueBytes = Self.rowLimit(forBodyBytes: options.maxBodyBytes)
            store.tagEntries { _, response in response.tags }
            backplane = try PostgresBackplane(announcingFor: store, node: options.node, logger: logger)
            lock = try PostgresFleetLock(for: store, node: options.node, logger: logger)
            sharedTier = ProxySharedTier(backing: .postgres(store))
            summary = "a fleet node on PostgreSQL (table \(options.table))"
        } else if let directory = options.cacheDirectory {
            sharedTier = ProxySharedTier(backing: .files(FileStore<StoredResponse>(
                directory: directory, codec: BinaryCodec<StoredResponse>(), byteLimit: options.tableByteLimit,
                synchronizesWrites: false, logger: logger)))
            summary = "one node on memory and files in \(directory.path) (no --postgres-url: nothing is shared with other nodes)"
        } else {
            sharedTier = ProxySharedTier(backing: .none)
            summary = "one node on memory (no --postgres-url: nothing is shared, nothing survives a restart)"
        }
        let memory = MemoryStore<String, StoredResponse>(
            countLimit: options.memoryCountLimit, costLimit: options.memoryByteLimit, cost: { $0.byteCount })
        let environment = LoadEnvironment(logger: logger)
        // Writes that wait for PostgreSQL are tried again at most 2 s apart: a write made while it
        // was away reaches the table, and the other nodes, within 2 s of its return. At most 256
        // wait (the newest of each key): an outage does not grow the node past its budgets.
        let cache: CachingProxy.Cache = if let backplane {
            TieredStore(
                memory: memory, shared: sharedTier, backplane: backplane, environment: environment,
                firstRetryDelay: .milliseconds(250), maxRetryDelay: .seconds(2), sharedTierWriting: .inBackground,
                maxWaitingWrites: 256)
        } else {
            TieredStore(
                memory: memory, shared: sharedTier, environment: environment,
                firstRetryDelay: .milliseconds(250), maxRetryDelay: .seconds(2), sharedTierWriting: .inBackground,
                maxWaitingWrites: 256)
        }
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        configuration.decompression = .disabled
        let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
        var settings = CachingProxy.Settings(
            upstream: options.upstream, node: options.node, lockTimeout: options.lockTimeout, softTimeout: options.softTimeout,
            hardTimeout: options.hardTimeout, maxStale: options.maxStale, refreshAheadFraction: options.refreshAheadFraction,
            adminToken: options.adminToken)
        settings.maxBodyBytes = options.maxBodyBytes
        settings.targetedFields = options.targetedFields.compactMap { HTTPField.Name($0) } + SharedCachePolicy.defaultTargetedFields
        settings.trustForwardedFields = options.trustForwardedFields
        settings.maxVariants = max(1, options.maxVariants)
        settings.adminIsLoopback = ["127.0.0.1", "::1", "localhost"].contains(options.adminHost)
        let proxy = CachingProxy(
            settings: settings, cache: cache, lock: lock, transport: AsyncHTTPTransport(client: client), logger: logger)
        if let backplane {
            let listening = await raceAgainstDeadline(clock: ContinuousClock(), duration: options.postgresStartTimeout) {
                try await backplane.waitUntilListening()
            }
            if case .deadline = listening {
                logger.warning(
                    "PostgreSQL does not answer: serving from memory and the upstream; the node keeps connecting, and empties its memory tier when it does",
                    metadata: ["node": "\(options.node)"])
            }
        }

        let router = Router()
        router.add(middleware: ProxyResponder(proxy: proxy, maxRequestBodyBytes: options.maxRequestBodyBytes))
        // The public listener: fresh memory hits are answered on the event loop (ProxyFastPath, in
        // front of the conversion to swift-http-types), which also closes idle connections (its
        // IdleStateHandler sees every read and write).
        let idle = TimeAmount.nanoseconds(
            options.idleTimeout.components.seconds * 1_000_000_000 + options.idleTimeout.components.attoseconds / 1_000_000_000)
        let (port, running) = try await serve(
            router, host: options.host, port: options.port, name: nil, options: options, logger: logger,
            server: .http1(configuration: .init(
                additionalChannelHandlers: [ProxyFastPath.Installer(proxy: proxy, idleTimeout: idle)], idleTimeout: nil)))
        let adminRouter = Router()
        adminRouter.add(middleware: AdminResponder(proxy: proxy))
        let adminPort: Int
        let admin: Task<Void, any Error>
        do {
            (adminPort, admin) = try await serve(
                adminRouter, host: options.adminHost, port: options.adminPort ?? (options.port == 0 ? 0 : options.port + 1),
                name: "strata-proxy-admin", options: options, logger: logger, server: nil)
        } catch {
            running.cancel()
            throw error
        }
        let sweeper: Task<Void, Never>? = sharedTier.postgres.map { store in
            Task {
                while !Task.isCancelled {
                    do { try await Task.sleep(for: options.sweepInterval) } catch { return }
                    do {
                        let old = try await store.removeEntries(storedBefore: Date().addingTimeInterval(-(options.tableMaxAge / .seconds(1))))
                        let over = try await store.removeEntries(toFitBytes: options.tableByteLimit)
                        if old + over > 0 {
                            logger.info("swept the shared table", metadata: ["past_max_age": "\(old)", "over_budget": "\(over)"])
                        }
                    } catch {
                        logger.warning("the shared table could not be swept", metadata: ["error": "\(error)"])
                    }
                }
            }
        }
        return ProxyNode(
            proxy: proxy, backplane: backplane, client: client, running: running, admin: admin, sweeper: sweeper, port: port,
            adminPort: adminPort, summary: summary)
    }

    /// The shared table's row limit for bodies of up to `bodyBytes`: the body, and 256 KiB for the
    /// header fields and the rest of the entry (the proxy refuses nothing it may cache).
    static func rowLimit(forBodyBytes bodyBytes: Int) -> Int {
        let (sum, overflow) = bodyBytes.addingReportingOverflow(256 * 1024)
        return overflow ? Int(Int32.max) : min(sum, Int(Int32.max))
    }

    /// Starts a server for `router` on `host:port`; its bound port and its task. `name` is the
    /// `Server` field of its answers; the public listener has none, so the upstream's `Server` (in a
    /// stored response or passed through) reaches the client as the upstream sent it.
    private static func serve(
        _ router: Router<BasicRequestContext>, host: String, port: Int, name: String?, options: Options, logger: Logger,
        server: HTTPServerBuilder?
    ) async throws -> (Int, Task<Void, any Error>) {
        let (announced, portContinuation) = AsyncStream<Int>.makeStream()
        let app = Application(
            router: router,
            server: server ?? .http1(configuration: .init(idleTimeout: .nanoseconds(options.idleTimeout.components.seconds * 1_000_000_000
                + options.idleTimeout.components.attoseconds / 1_000_000_000))),
            configuration: .init(
                address: .hostname(host, port: port), serverName: name,
                availableConnectionsDelegate: MaximumAvailableConnections(options.maxConnections)),
            onServerRunning: { channel in
                portContinuation.yield(channel.localAddress?.port ?? port)
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
            throw ProxyNodeError.didNotStart(host: host, port: port)
        }
        return (bound, running)
    }

    /// Runs until the server stops (SIGTERM or SIGINT), then lets go of its connections.
    public func run() async throws {
        defer { Task { [client] in try? await client.shutdown() } }
        defer { sweeper?.cancel() }
        try await running.value
        admin.cancel()
        _ = try? await admin.value
        await proxy.cache.waitForUnsentWritesBriefly()
        await backplane?.shutdown()
        await proxy.lock?.shutdown()
        await proxy.cache.shared.postgres?.shutdown()
    }
}

extension TieredStore {
    /// Waits up to 2 s for the writes on their way to the shared tier (a shutdown's).
    func waitForUnsentWritesBriefly() async {
        _ = await raceAgainstDeadline(clock: ContinuousClock(), duration: .seconds(2)) { try await self.waitForUnsentWrites() }
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

/// Every request of the public listener, whatever its path and method, goes to the proxy: the
/// upstream's own `/_strata/…` paths included (the controls have their own listener).
struct ProxyResponder<Context: RequestContext>: RouterMiddleware {
    let proxy: CachingProxy
    let maxRequestBodyBytes: Int

    func handle(_ request: Hummingbird.Request, context: Context, next: (Hummingbird.Request, Context) async throws -> Response) async throws -> Response {
        // A body streams to the upstream as it arrives (GET and HEAD bodies are not sent on).
        var stream: HTTPClientRequest.Body?
        var body: LimitedBody<RequestBody>?
        if request.method != .get, request.method != .head {
            let length = request.headers[.contentLength].flatMap { Int64($0) }
            if let length, length > maxRequestBodyBytes {
                return Response(
                    status: .contentTooLarge, headers: [.contentType: "text/plain; charset=utf-8"],
                    body: ResponseBody(byteBuffer: ByteBuffer(string: "strata proxy: the request body is over \(maxRequestBodyBytes) bytes\n")))
            }
            let limited = LimitedBody(base: request.body, limit: maxRequestBodyBytes, length: length.map(Int.init))
            body = limited
            stream = .stream(limited, length: length.map { .known($0) } ?? .unknown)
        }
        let answer = await proxy.handle(CachingProxy.Request(head: request.head, body: nil, stream: stream))
        // The server reads the rest of this request (to find the next one) once this returns: first
        // let a read of the body in progress end, and end the body for the upstream request.
        await body?.close()
        if let streamed = answer.streamed, request.method != .head {
            return Response(status: answer.status, headers: answer.fields, body: ResponseBody(asyncSequence: streamed))
        }
        return Response(status: answer.status, headers: answer.fields, body: ResponseBody(byteBuffer: ByteBuffer(bytes: answer.body)))
    }
}

/// The control listener: `/_strata/…` only.
struct AdminResponder<Context: RequestContext>: RouterMiddleware {
    let proxy: CachingProxy

    func handle(_ request: Hummingbird.Request, context: Context, next: (Hummingbird.Request, Context) async throws -> Response) async throws -> Response {
        let answer = await proxy.admin(CachingProxy.Request(head: request.head, body: nil), path: request.head.path ?? "/")
        return Response(status: answer.status, headers: answer.fields, body: ResponseBody(byteBuffer: ByteBuffer(bytes: answer.body)))
    }
}

/// A request body that ends with an error past `limit` bytes: a body without a length (chunked)
/// that never ends is cut there, and the upstream request with it.
///
/// It is read once. AsyncHTTPClient sends a request again when its pooled connection closes before
/// the request went out (a connection the upstream, or a network in between, reset), and asks the
/// body for another iterator; the client's body can be iterated only once (a second iterator traps
/// the process). So the client's body is asked for its iterator at the first read of any of this
/// body's iterators, once: an attempt that read nothing leaves the body to the next, and a read by a
/// second iterator after the first read fails with ``SentOnce`` (that upstream request fails, and
/// the client gets a 502).
///
/// And it is never read at the same time as the server reads the connection. Once the handler
/// returns, Hummingbird reads what is left of the request from the same stream, and two reads at
/// once trap in SwiftNIO ("only allow a single Iterator"): AsyncHTTPClient's task could still be
/// waiting for the end of the body after the upstream had answered. So a body with a declared
/// length ends at that length without another read, and ``close()`` (called before the handler
/// returns) ends the body and waits for a read in progress.
struct LimitedBody<Base: AsyncSequence & Sendable>: AsyncSequence, Sendable where Base.Element == ByteBuffer {
    typealias Element = ByteBuffer
    let base: Base
    let limit: Int
    /// The length the request declared: the body ends there, with no read after its last byte.
    let length: Int?
    /// Shared by every copy of this body and its iterators.
    let state = Locked(ReadState())

    struct ReadState: Sendable {
        /// Whether an iterator has read.
        var claimed = false
        /// Whether a read of the client's body is in progress.
        var reading = false
        /// Whether the handler is done with the body: reads end it.
        var closed = false
        /// Who waits for the read in progress to end (``close()``).
        var idle: [CheckedContinuation<Void, Never>] = []
    }

    init(base: Base, limit: Int, length: Int? = nil) {
        self.base = base
        self.limit = limit
        self.length = length
    }

    /// Ends the body for its readers and returns once no read of it is in progress.
    ///
    /// It does not return early when its task is cancelled: returning while a read is in progress
    /// is what traps. That read ends when the client sends its next bytes or its connection closes
    /// (the idle timeout closes a silent one).
    func close() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let waits = state.withLock { state -> Bool in
                state.closed = true
                guard state.reading else { return false }
                state.idle.append(continuation)
                return true
            }
            if !waits { continuation.resume() }
        }
    }

    struct TooLarge: Error, CustomStringConvertible {
        var limit: Int
        var description: String { "the request body is over \(limit) bytes" }
    }

    struct SentOnce: Error, CustomStringConvertible {
        var description: String { "the request body was read once already (the upstream connection closed, and it cannot be sent again)" }
    }

    enum ReadStart { case read, ended, sentOnce }

    struct AsyncIterator: AsyncIteratorProtocol {
        let body: LimitedBody
        /// The client's body's iterator, once this iterator has claimed it.
        var base: Base.AsyncIterator?
        var seen = 0

        mutating func next() async throws -> ByteBuffer? {
            if let length = body.length, seen >= length { return nil }
            let claims = base == nil
            let start = body.state.withLock { state -> ReadStart in
                if state.closed { return .ended }
                if claims {
                    if state.claimed { return .sentOnce }
                    state.claimed = true
                }
                state.reading = true
                return .read
            }
            switch start {
            case .ended: return nil
            case .sentOnce: throw SentOnce()
            case .read: break
            }
            defer {
                // Resumed after the lock: a waiter's task runs its handler's return from here.
                let waiting = body.state.withLock { state -> [CheckedContinuation<Void, Never>] in
                    state.reading = false
                    defer { state.idle = [] }
                    return state.idle
                }
                for continuation in waiting { continuation.resume() }
            }
            var iterator = base ?? body.base.makeAsyncIterator()
            defer { base = iterator }
            guard let buffer = try await iterator.next() else { return nil }
            seen += buffer.readableBytes
            if seen > body.limit { throw TooLarge(limit: body.limit) }
            return buffer
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(body: self) }
}
