#if Inspector
import Foundation
import Hummingbird
import Logging
import ServiceLifecycle
import Strata

/// The inspector of a running app: every live query with its state, provenance, chain and value;
/// the loads in flight and a timeline of recent ones; the outboxes' entries and dead letters; the
/// circuit breakers. A page (`GET <path>`) and a JSON API an app mounts in its own Hummingbird
/// server, or serves on its own (``application(host:port:)``, loopback by default).
///
/// ```swift
/// let inspector = StrataInspector(queries: queries, outboxes: [outbox], circuits: [api])
/// inspector.addRoutes(to: router)          // GET /inspector, /inspector/api/…
/// print("inspector token:", inspector.token)
/// ```
///
/// - Every request that changes state (refetch, invalidate, remove, force an error, offline) is a
///   `POST` that must carry the session's ``token`` in the `X-Strata-Token` header: `403` without
///   it. The page reads the token from itself; another site's page cannot read it, and a
///   cross-origin request cannot set the header without a preflight the inspector never grants.
///   The token stops requests forged by other sites; it does not hide the page from whoever can
///   reach the server. So it listens on loopback by default, and answers only requests addressed
///   to ``allowedHosts`` (loopback names by default: DNS rebinding gets `403`).
/// - Secrets are redacted as in logs (``Redaction``) in the page, the events and the export: in
///   errors, chains, tiers, URLs, and in values the members named like secrets.
/// - An app that never builds one pays nothing: the client records its load timeline only while
///   an inspector follows its changes.
public struct StrataInspector: Sendable {
    /// The client whose queries are shown.
    public let queries: QueryClient
    public let outboxes: [Outbox]
    public let circuits: [any InspectedCircuit]
    /// The session's token, sent by the page with every state-changing request.
    public let token: String
    /// The host names requests must be addressed to (their `Host`, without the port), or `nil` for
    /// any. By default the loopback names: a page of another site that points its own name at
    /// 127.0.0.1 (DNS rebinding) gets `403`, not the page and its token.
    public let allowedHosts: Set<String>?

    /// The loopback names requests may address: `127.0.0.1`, `localhost`, `[::1]`.
    public static let loopbackHosts: Set<String> = ["127.0.0.1", "localhost", "[::1]"]

    /// An inspector of `queries` (and of `outboxes` and `circuits`), with a new random token unless
    /// one is given, answering requests addressed to `allowedHosts` only (mounted in a server
    /// reached by another name, list it; `nil` accepts any).
    public init(
        queries: QueryClient, outboxes: [Outbox] = [], circuits: [any InspectedCircuit] = [], token: String? = nil,
        allowedHosts: Set<String>? = StrataInspector.loopbackHosts
    ) {
        self.queries = queries
        self.outboxes = outboxes
        self.circuits = circuits
        self.token = token ?? Self.makeToken()
        self.allowedHosts = allowedHosts
    }

    /// The header a state-changing request carries the token in.
    public static let tokenHeader = HTTPField.Name("X-Strata-Token")!

    /// 32 random bytes, hex.
    static func makeToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<32).map { _ in String(format: "%02x", UInt8.random(in: .min ... .max, using: &generator)) }.joined()
    }

    /// Everything shown now.
    public func state() async -> InspectorState {
        var views: [InspectorState.OutboxView] = []
        for outbox in outboxes { views.append(await .of(outbox)) }
        return InspectorState(
            generatedAt: queries.environment.now(), online: queries.isOnline, queries: queries.inspect(),
            loads: queries.recentLoads, outboxes: views,
            circuits: circuits.map { .init(name: $0.name, state: $0.state.description) })
    }

    /// Adds the inspector's routes under `path` to `router`: the page at `path`, the API under
    /// `path/api`.
    public func addRoutes<Context: RequestContext>(to router: Router<Context>, at path: String = "inspector") {
        let group = router.group(RouterPath(path))
        group.get { request, _ in
            try self.checkHost(request)
            return self.page()
        }
        group.get("api/state") { request, _ in
            try self.checkHost(request)
            return try await self.json(self.state())
        }
        group.get("api/export") { request, _ in
            try self.checkHost(request)
            var response = try await self.json(self.state())
            response.headers[.contentDisposition] = "attachment; filename=\"strata-inspector.json\""
            return response
        }
        group.get("api/events") { request, _ in
            try self.checkHost(request)
            return self.events()
        }
        group.post("api/queries/:action") { request, context in
            try self.authorize(request)
            guard let key = request.uri.queryParameters.get("key"), let query = self.queries.query(described: key) else {
                throw HTTPError(.notFound, message: "no query with that key")
            }
            switch context.parameters.get("action") {
            case "refetch": query.refetch()
            case "invalidate": query.invalidate()
            case "remove":
                // Removed while a screen observes it, the screen would keep a query the client no
                // longer tells of writes, invalidations or the network.
                guard query.inspection().observers == 0 else {
                    throw HTTPError(.conflict, message: "the query is observed; remove it once no screen shows it")
                }
                self.queries.remove(query.key)
            case "fail": query.failNextLoad(InjectedFailure("forced from the inspector"))
            default: throw HTTPError(.notFound, message: "no such action")
            }
            return Response(status: .noContent)
        }
        group.post("api/network") { request, _ in
            try self.authorize(request)
            guard let online = request.uri.queryParameters.get("online").flatMap(Bool.init) else {
                throw HTTPError(.badRequest, message: "online=true or online=false")
            }
            self.queries.setOnline(online)
            for outbox in self.outboxes { outbox.connectivityChanged(isOnline: online) }
            return Response(status: .noContent)
        }
    }

    /// An application serving only the inspector, on `host` (loopback by default) and `port` (0:
    /// any free port; `onServerRunning` tells which).
    public func application(
        host: String = "127.0.0.1", port: Int = 0, onServerRunning: @escaping @Sendable (Int) -> Void = { _ in }
    ) -> some ApplicationProtocol {
        Self.application(host: host, port: port, serverName: "strata-inspector", routes: { addRoutes(to: $0) }, onServerRunning: onServerRunning)
    }

    /// Serves the inspector on `host` (loopback by default) and `port` (0: any free port) while
    /// `body` runs, given the port it listens on; stops when `body` returns or throws.
    public func serving<Result: Sendable>(
        host: String = "127.0.0.1", port: Int = 0, _ body: (Int) async throws -> Result
    ) async throws -> Result {
        try await Self.serving(host: host, port: port, serverName: "strata-inspector", routes: { addRoutes(to: $0) }, body)
    }

    /// Serves the routes `routes` adds (an app's page with the inspector mounted beside it) on
    /// `host` (loopback by default) and `port` (0: any free port) while `body` runs, given the port
    /// it listens on; stops when `body` returns or throws.
    public static func serving<Result: Sendable>(
        host: String = "127.0.0.1", port: Int = 0, serverName: String,
        routes: @escaping (Router<BasicRequestContext>) -> Void, _ body: (Int) async throws -> Result
    ) async throws -> Result {
        let (ports, announce) = AsyncStream.makeStream(of: Int.self)
        let app = application(host: host, port: port, serverName: serverName, routes: routes) { port in
            announce.yield(port)
            announce.finish()
        }
        // Stopped by a graceful shutdown, never by cancelling its task: a connection accepted just
        // as the task is cancelled would never be served, and NIO traps on it ("Deinited
        // NIOAsyncWriter without calling finish()", apple/swift-nio#3481). Gracefully, the server
        // stops accepting, ends the event streams (they end on graceful shutdown), and serves or
        // closes every connection it has.
        let group = ServiceGroup(configuration: .init(services: [app], gracefulShutdownSignals: [], logger: quietLogger(serverName)))
        let running = Task {
            defer { announce.finish() }
            try await group.run()
        }
        var bound: Int?
        for await announced in ports { bound = announced }
        guard let bound else {
            // It failed to start, or this task was cancelled while it started: stop it either way.
            await group.triggerGracefulShutdown()
            try await running.value
            throw HTTPError(.internalServerError, message: "\(serverName) did not start on \(host):\(port)")
        }
        let outcome: Swift.Result<Result, any Error>
        do {
            outcome = .success(try await body(bound))
        } catch {
            outcome = .failure(error)
        }
        await group.triggerGracefulShutdown()
        _ = await running.result
        return try outcome.get()
    }

    /// Hummingbird's own log says only that it started and, at `error`, that its channels were
    /// cancelled on a normal stop: neither is news to whoever started it.
    static func quietLogger(_ label: String) -> Logger {
        var logger = Logger(label: label)
        logger.logLevel = .critical
        return logger
    }

    static func application(
        host: String, port: Int, serverName: String, routes: (Router<BasicRequestContext>) -> Void,
        onServerRunning: @escaping @Sendable (Int) -> Void
    ) -> some ApplicationProtocol {
        let router = Router()
        routes(router)
        return Application(
            router: router, configuration: .init(address: .hostname(host, port: port), serverName: serverName),
            onServerRunning: { channel in onServerRunning(channel.localAddress?.port ?? port) }, logger: quietLogger(serverName))
    }

    /// Refuses (`403`) a request addressed to a host not in ``allowedHosts``, or that does not
    /// carry the session's token in `X-Strata-Token`: what every state-changing route demands, the
    /// inspector's and an app's own beside it.
    public func authorize(_ request: Request) throws {
        try checkHost(request)
        guard request.headers[Self.tokenHeader] == token else {
            throw HTTPError(.forbidden, message: "this action needs the inspector's token (header X-Strata-Token)")
        }
    }

    /// Refuses (`403`) a request addressed to a host not in ``allowedHosts``.
    public func checkHost(_ request: Request) throws {
        guard let allowedHosts else { return }
        let authority = request.head.authority ?? ""
        guard allowedHosts.contains(Self.hostName(of: authority)) else {
            throw HTTPError(.forbidden, message: "the inspector answers requests addressed to \(allowedHosts.sorted().joined(separator: ", ")) only")
        }
    }

    /// `host` of `host:port`, `[::1]` of `[::1]:port`, lowercased.
    static func hostName(of authority: String) -> String {
        let lowered = authority.lowercased()
        if lowered.hasPrefix("["), let close = lowered.firstIndex(of: "]") { return String(lowered[...close]) }
        return String(lowered.split(separator: ":", maxSplits: 1).first ?? "")
    }

    private func json(_ value: some Encodable) throws -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.dateEncodingStrategy = .iso8601
        let data = try encoder.encode(value)
        return Response(
            status: .ok, headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    /// Server-sent events: `change` whenever a query publishes or a load starts or ends, or an
    /// outbox's status changes (merged when they come faster than the page reads). The stream ends
    /// when the server shuts down gracefully.
    private func events() -> Response {
        let queries = self.queries
        let outboxes = self.outboxes
        let body = ResponseBody { writer in
            // Subscribed when the body runs: a client gone before then leaves no subscription.
            let changes = queries.changes()
            try await writer.write(ByteBuffer(string: "retry: 1000\nevent: change\ndata: {}\n\n"))
            try await withThrowingTaskGroup(of: Void.self) { group in
                let (merged, signal) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
                group.addTask { for await _ in changes { signal.yield() } }
                for outbox in outboxes {
                    group.addTask { for await _ in outbox.statusUpdates() { signal.yield() } }
                }
                for await _ in merged.cancelOnGracefulShutdown() {
                    try await writer.write(ByteBuffer(string: "event: change\ndata: {}\n\n"))
                }
                group.cancelAll()
            }
            try await writer.finish(nil)
        }
        return Response(
            status: .ok, headers: [.contentType: "text/event-stream", .cacheControl: "no-store"], body: body)
    }

    private func page() -> Response {
        let html = InspectorPage.html.replacingOccurrences(of: "{{TOKEN}}", with: token)
        return Response(
            status: .ok,
            headers: [
                .contentType: "text/html; charset=utf-8", .cacheControl: "no-store",
                .contentSecurityPolicy: "default-src 'self'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; connect-src 'self'",
            ],
            body: .init(byteBuffer: ByteBuffer(string: html)))
    }
}
#endif
