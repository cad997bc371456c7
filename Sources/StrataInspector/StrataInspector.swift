#if Inspector
import Foundation
import Hummingbird
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Strata
import StrataOutbox
import StrataQueries

/// The inspector of a running app: every live query with its state, provenance, chain and value;
/// the loads in flight and a timeline of recent ones; the outboxes' entries and dead letters; the
/// circuit breakers. A page (`GET <path>`) and a JSON API an app mounts in its own Hummingbird
/// server, or serves on its own (``application(host:port:)``, loopback by default).
///
/// ```swift
/// let inspector = StrataInspector(queries: queries, outboxes: [outbox], circuits: [api])
/// let router = Router(context: InspectorRequestContext.self)   // tells each request's peer
/// inspector.addRoutes(to: router)          // GET /inspector, /inspector/api/…
/// print("inspector token:", inspector.token)
/// ```
///
/// - Who can reach it: a request is answered only if it comes from an allowed peer (the address of
///   the connection, which the client cannot forge: ``allowedPeers``, loopback by default) and is
///   addressed to an allowed host name (``allowedHosts``, loopback names by default: DNS rebinding
///   gets `403`). Mounted in a router whose context cannot tell the peer (not a
///   `RemoteAddressRequestContext`, such as `BasicRequestContext`), every request is refused unless
///   the app opts in with `allowedPeers: .any`: use ``InspectorRequestContext``.
/// - Every data route (`api/state`, `api/export`, `api/events`) and every request that changes state
///   (refetch, invalidate, remove, force an error, offline, each a `POST`) must carry the session's
///   ``token`` in the `X-Strata-Token` header (the event stream may carry it as its `token` query
///   parameter instead): `403` without it. The page (`GET <path>`) carries the token, and is
///   answered to allowed peers and hosts only. Another site's page cannot read it, and a
///   cross-origin request cannot set the header without a preflight the inspector never grants.
/// - The page is served with a `Content-Security-Policy` that runs only its own script and style
///   (a new nonce per response) and lets no page frame it.
/// - Secrets are redacted as in logs (``Redaction``) in the page, the events and the export: in
///   errors, chains, tiers, URLs, and in values the members named like secrets.
/// - An app that never builds one pays nothing: the client records its load timeline only while
///   an inspector follows its changes.
public struct StrataInspector: Sendable {
    /// The client whose queries are shown.
    public let queries: QueryClient
    public let outboxes: [Outbox]
    public let circuits: [any InspectedCircuit]
    /// The session's token, sent by the page with every request of the API.
    public let token: String
    /// The host names requests must be addressed to (their `Host`, without the port), or `nil` for
    /// any. By default the loopback names: a page of another site that points its own name at
    /// 127.0.0.1 (DNS rebinding) gets `403`, not the page and its token.
    public let allowedHosts: Set<String>?
    /// The peers requests may come from: the address of the connection, not anything the request
    /// says. Loopback by default.
    public let allowedPeers: AllowedPeers

    /// The loopback names requests may address: `127.0.0.1`, `localhost`, `[::1]`.
    public static let loopbackHosts: Set<String> = ["127.0.0.1", "localhost", "[::1]"]

    /// An inspector of `queries` (and of `outboxes` and `circuits`), with a new random token unless
    /// one is given, answering requests from `allowedPeers` (loopback by default) addressed to
    /// `allowedHosts` only (mounted in a server reached by another name, list it; `nil` accepts any).
    ///
    /// A `token` of your own is escaped wherever the page shows it; an empty one matches no request.
    public init(
        queries: QueryClient, outboxes: [Outbox] = [], circuits: [any InspectedCircuit] = [], token: String? = nil,
        allowedHosts: Set<String>? = StrataInspector.loopbackHosts, allowedPeers: AllowedPeers = .loopback
    ) {
        self.queries = queries
        self.outboxes = outboxes
        self.circuits = circuits
        self.token = token ?? Self.makeToken()
        self.allowedHosts = allowedHosts
        self.allowedPeers = allowedPeers
    }

    /// The header every request but the page's carries the token in.
    public static let tokenHeader = HTTPField.Name("X-Strata-Token")!

    /// The query parameter an event stream's request may carry the token in instead of the header.
    public static let tokenQueryParameter = "token"

    /// 32 random bytes, hex.
    static func makeToken() -> String { randomHex(bytes: 32) }

    /// `count` bytes from the system's secure generator, hex.
    static func randomHex(bytes count: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in String(format: "%02x", UInt8.random(in: .min ... .max, using: &generator)) }.joined()
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
        group.get { request, context in
            try self.checkAccess(request, context: context)
            return self.page(template: InspectorPage.html)
        }
        group.get("api/state") { request, context in
            try self.authorize(request, context: context)
            return try await self.json(self.state())
        }
        group.get("api/export") { request, context in
            try self.authorize(request, context: context)
            var response = try await self.json(self.state())
            response.headers[.contentDisposition] = "attachment; filename=\"strata-inspector.json\""
            return response
        }
        group.get("api/events") { request, context in
            try self.authorizeEventStream(request, context: context)
            return self.events()
        }
        group.post("api/queries/:action") { request, context in
            try self.authorize(request, context: context)
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
        group.post("api/network") { request, context in
            try self.authorize(request, context: context)
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
        Self.application(
            host: host, port: port, serverName: "strata-inspector",
            routes: { (router: Router<InspectorRequestContext>) in addRoutes(to: router) }, onServerRunning: onServerRunning)
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
    /// it listens on; stops when `body` returns or throws. Requests get an
    /// ``InspectorRequestContext``: it tells the peer's address, which the inspector checks.
    public static func serving<Result: Sendable>(
        host: String = "127.0.0.1", port: Int = 0, serverName: String,
        routes: @escaping (Router<InspectorRequestContext>) -> Void, _ body: (Int) async throws -> Result
    ) async throws -> Result {
        try await serving(host: host, port: port, serverName: serverName, context: InspectorRequestContext.self, routes: routes, body)
    }

    /// ``serving(host:port:serverName:routes:_:)`` with requests of a `context` of the app's own.
    /// One that cannot tell the peer's address (not a `RemoteAddressRequestContext`, such as
    /// `BasicRequestContext`) makes the inspector refuse every request, unless `allowedPeers: .any`.
    public static func serving<Context: RequestContext, Result: Sendable>(
        host: String = "127.0.0.1", port: Int = 0, serverName: String, context: Context.Type,
        routes: @escaping (Router<Context>) -> Void, _ body: (Int) async throws -> Result
    ) async throws -> Result where Context: InitializableFromSource<ApplicationRequestContextSource> {
        let (ports, announce) = AsyncStream.makeStream(of: Int.self)
        let (listeners, announceListener) = AsyncStream.makeStream(of: (any Channel).self, bufferingPolicy: .bufferingNewest(1))
        let app = application(
            host: host, port: port, serverName: serverName, routes: routes,
            onServerRunning: { port in
                announce.yield(port)
                announce.finish()
            },
            onListener: { channel in
                announceListener.yield(channel)
                announceListener.finish()
            })
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
        // First stop accepting, and let the event loops run what they had queued: a connection the
        // listener accepted as the server stopped taking connections reaches a server that no
        // longer serves, the same trap (seen under load, an event stream's client reconnecting).
        var iterator = listeners.makeAsyncIterator()
        if let listener = await iterator.next() {
            try? await listener.setOption(ChannelOptions.autoRead, value: false).get()
            for _ in 0..<3 {
                for loop in MultiThreadedEventLoopGroup.singleton.makeIterator() { try? await loop.submit {}.get() }
            }
            // A connection accepted before that is handed to the server's task, which takes it on the
            // cooperative pool, not on an event loop: on a loaded machine it may not have run yet.
            // Give it a moment (a trap seen once in a full, parallel run of the Tools suites).
            try? await Task.sleep(for: .milliseconds(50))
            for loop in MultiThreadedEventLoopGroup.singleton.makeIterator() { try? await loop.submit {}.get() }
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

    static func application<Context: RequestContext>(
        host: String, port: Int, serverName: String, routes: (Router<Context>) -> Void,
        onServerRunning: @escaping @Sendable (Int) -> Void,
        onListener: @escaping @Sendable (any Channel) -> Void = { _ in }
    ) -> some ApplicationProtocol where Context: InitializableFromSource<ApplicationRequestContextSource> {
        let router = Router(context: Context.self)
        routes(router)
        return Application(
            router: router, configuration: .init(address: .hostname(host, port: port), serverName: serverName),
            onServerRunning: { channel in
                onListener(channel)
                onServerRunning(channel.localAddress?.port ?? port)
            }, logger: quietLogger(serverName))
    }

    /// Refuses (`403`) a request from a peer ``allowedPeers`` does not allow, or addressed to a host
    /// not in ``allowedHosts``: what the page demands (it carries the token), and every other route.
    ///
    /// The peer is the address of the connection, read from `context` if it is a
    /// `RemoteAddressRequestContext` (``InspectorRequestContext`` is); from a context that cannot
    /// tell it, the request is refused unless ``allowedPeers`` is ``AllowedPeers/any``.
    public func checkAccess(_ request: Request, context: some RequestContext) throws {
        let peer = (context as? any RemoteAddressRequestContext)?.remoteAddress
        guard allowedPeers.allows(peer) else {
            throw HTTPError(
                .forbidden,
                message: peer == nil
                    ? "the inspector cannot tell where this request comes from (its request context is not a RemoteAddressRequestContext), so it refuses it"
                    : "the inspector does not answer requests from this address")
        }
        if let allowedHosts, !allowedHosts.contains(Self.hostName(of: request.head.authority ?? "")) {
            throw HTTPError(.forbidden, message: "the inspector answers requests addressed to \(allowedHosts.sorted().joined(separator: ", ")) only")
        }
    }

    /// Refuses (`403`) what ``checkAccess(_:context:)`` refuses, and a request that does not carry
    /// the session's token in `X-Strata-Token`: what every data route and every state-changing
    /// route demands, the inspector's and an app's own beside it.
    public func authorize(_ request: Request, context: some RequestContext) throws {
        try checkAccess(request, context: context)
        guard Self.tokensMatch(request.headers[Self.tokenHeader], token) else {
            throw HTTPError(.forbidden, message: "the inspector's token is needed (header X-Strata-Token)")
        }
    }

    /// ``authorize(_:context:)`` for an event stream's route, which also takes the token as the
    /// `token` query parameter.
    ///
    /// A page follows events with `EventSource`, which cannot set a header, so the token goes in its
    /// URL. Not in a cookie: a cookie is sent to every port of the host (another inspector, or any
    /// other local app, would receive or overwrite it), and it would make every request from the
    /// browser carry the token whether or not the page meant to. The URL is the page's own request:
    /// it is not shown, is sent with `Referrer-Policy: no-referrer`, and the stream is `no-store`;
    /// an app that logs full request URLs logs it, which is why the query is accepted here only.
    public func authorizeEventStream(_ request: Request, context: some RequestContext) throws {
        try checkAccess(request, context: context)
        let given = request.headers[Self.tokenHeader] ?? request.uri.queryParameters.get(Self.tokenQueryParameter)
        guard Self.tokensMatch(given, token) else {
            throw HTTPError(.forbidden, message: "the inspector's token is needed (header X-Strata-Token, or the token query parameter)")
        }
    }

    /// Whether `given` is `expected`, in a time that depends on their lengths only: every byte of
    /// `expected` is compared whatever differs first, and a `given` of another length is compared
    /// all the same (and fails). An empty `expected` matches nothing.
    static func tokensMatch(_ given: String?, _ expected: String) -> Bool {
        let given = Array((given ?? "").utf8)
        let expected = Array(expected.utf8)
        var difference = given.count == expected.count ? 0 : 1
        for index in expected.indices {
            difference |= Int(expected[index] ^ (index < given.count ? given[index] : ~expected[index]))
        }
        return difference == 0 && !expected.isEmpty
    }

    /// `host` of `host:port`, `[::1]` of `[::1]:port`, lowercased.
    static func hostName(of authority: String) -> String {
        let lowered = authority.lowercased()
        if lowered.hasPrefix("["), let close = lowered.firstIndex(of: "]") { return String(lowered[...close]) }
        return String(lowered.split(separator: ":", maxSplits: 1).first ?? "")
    }

    /// The header fields of every answer of the API: not cached, not sniffed as another type.
    static let apiHeaders: HTTPFields = [.cacheControl: "no-store", .xContentTypeOptions: "nosniff", SecurityField.referrerPolicy: "no-referrer"]

    private func json(_ value: some Encodable) throws -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.dateEncodingStrategy = .iso8601
        var headers = Self.apiHeaders
        headers[.contentType] = "application/json; charset=utf-8"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: try encoder.encode(value))))
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
        var headers = Self.apiHeaders
        headers[.contentType] = "text/event-stream"
        return Response(status: .ok, headers: headers, body: body)
    }

    /// `template`, an HTML page, served as the inspector serves its own: `{{TOKEN}}` replaced by the
    /// session's token, escaped for HTML (in an attribute or in text; read it from the DOM, never
    /// write `{{TOKEN}}` into a script), `{{NONCE}}` by a new random nonce, the only one the
    /// `Content-Security-Policy` lets run: give it to the page's `<script nonce="{{NONCE}}">` and
    /// `<style nonce="{{NONCE}}">`. The policy allows no other script or style (no `on…=` handler
    /// and no `style=` attribute in the HTML; a script sets styles through `element.style`),
    /// connections to the page's own origin only, and no framing (`frame-ancestors 'none'`,
    /// `X-Frame-Options: DENY`). Serve it after ``checkAccess(_:context:)``: it carries the token.
    public func page(template: String) -> Response {
        let nonce = Self.randomHex(bytes: 16)
        let html = template.replacingOccurrences(of: "{{NONCE}}", with: nonce)
            .replacingOccurrences(of: "{{TOKEN}}", with: Self.htmlEscaped(token))
        var headers = Self.pageHeaders(nonce: nonce)
        headers[.contentType] = "text/html; charset=utf-8"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: html)))
    }

    /// The header fields of a page whose script and style carry `nonce`.
    static func pageHeaders(nonce: String) -> HTTPFields {
        var headers = apiHeaders
        headers[.contentSecurityPolicy] = [
            "default-src 'none'", "script-src 'nonce-\(nonce)'", "style-src 'nonce-\(nonce)'", "connect-src 'self'",
            "img-src 'self'", "base-uri 'none'", "form-action 'self'", "frame-ancestors 'none'",
        ].joined(separator: "; ")
        headers[SecurityField.frameOptions] = "DENY"
        return headers
    }

    /// `text` with the characters that end an HTML attribute, open a tag or start an entity
    /// replaced by entities: safe in text and in a quoted attribute.
    static func htmlEscaped(_ text: String) -> String {
        var escaped = ""
        escaped.reserveCapacity(text.utf8.count)
        for character in text.unicodeScalars {
            switch character {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"": escaped += "&quot;"
            case "'": escaped += "&#39;"
            default: escaped.unicodeScalars.append(character)
            }
        }
        return escaped
    }
}

/// Header fields HTTPTypes does not name.
enum SecurityField {
    static let frameOptions = HTTPField.Name("X-Frame-Options")!
    static let referrerPolicy = HTTPField.Name("Referrer-Policy")!
}

#endif
