import Foundation
import Hummingbird
import ServiceLifecycle
import Logging
import NIOCore
import NIOPosix
@_spi(StrataInternals) import Strata

/// The demo HTTP server: a real Hummingbird server on loopback, started in-process, serving the feed
/// (`GET /feed`) and posts (`GET /posts`, the list; `GET /posts/{id}`, `POST /posts`, `PUT`/`PATCH`/`DELETE /posts/{id}`),
/// with faults a test or a person can turn on.
///
/// `GET /feed` is a well-behaved cacheable resource: it carries a strong `ETag` (a SHA-256 of the
/// body) and a `Last-Modified` (moved forward whenever ``feed`` changes), and answers
/// `If-None-Match` / `If-Modified-Since` with `304 Not Modified` (counted by ``notModifiedCount(path:)``).
/// ``Faults/cacheControl`` adds a `Cache-Control` header to the answers of `GET` requests.
///
/// Writes honour `Idempotency-Key` the way the IETF httpapi draft describes (see
/// ``honoursIdempotencyKeys``, ``idempotencyKeys``, ``appliedWrites``): a repeat of a write that was
/// applied gets the recorded answer and is not applied again. `GET /posts/{id}` sends a strong `ETag`;
/// `PUT`, `PATCH` and `DELETE` honour `If-Match` (412 when it does not match). ``Faults/writeFault``
/// hits writes only: a 5xx, a dropped connection after the write was applied (the lost
/// acknowledgement), a 409, a 422.
///
/// ```swift
/// let server = try await DemoServer.start()          // 127.0.0.1, a port of this process's own
/// server.faults = .init(status: 503)                 // every request fails with 503
/// await server.goOffline()                           // connections refused
/// try await server.goOnline()                        // listening again, same port
/// await server.stop()
/// ```
public final class DemoServer: Sendable {
    /// Faults applied to every request while set.
    public struct Faults: Sendable, Equatable {
        /// Answer with this status (and a short text body) instead of the resource.
        public var status: Int?
        /// The share of requests the status fault hits, from 0 to 1 (1: every request).
        public var errorRate: Double
        /// Apply the status fault to this many more requests only, then stop (`nil`: no limit).
        public var remainingFaults: Int?
        /// Sent as `Retry-After` (seconds) with a fault status.
        public var retryAfterSeconds: Int?
        /// Wait this long before answering (real time; for people trying the server, not for tests).
        public var latency: Duration?
        /// Hold every request until ``DemoServer/releaseHeldRequests()`` (for tests of slow servers
        /// and cancellation, without sleeping). Never past ``DemoServer/goOffline()`` or
        /// ``DemoServer/stop()``: a request held then, or reaching the hold after, answers at once.
        public var holdRequests: Bool
        /// Send only the first half of each body, with a matching `Content-Length` (a valid HTTP
        /// response carrying truncated JSON).
        public var truncateBodies: Bool
        /// Sent as the `Cache-Control` header of every successful `GET` answer (200 and 304), for
        /// example `"max-age=60"`, `"no-cache"` or `"no-store"`; `nil` sends none.
        public var cacheControl: String?
        /// Answer `200` with valid JSON of the wrong shape (an object where the resource is an array,
        /// strings where numbers belong) instead of the resource.
        public var wrongShape: Bool
        /// Send the headers (with the full `Content-Length`) and the first half of the body, then close
        /// the connection: a connection reset mid-body.
        public var resetMidBody: Bool
        /// Answer with a body of this many bytes instead of the resource, generated chunk by chunk as
        /// the client reads it (never held in memory): a success keeps its status (`200`, or `201` for
        /// a post created), and a fault answer (``status``, ``writeFault``, a write the resource
        /// refuses) keeps its status and header fields with this body in place of its text.
        /// ``DemoServer/streamedBodyBytes`` counts what was sent, and
        /// ``DemoServer/waitForStreamedBodies(count:)`` tells how each such body ended. See
        /// ``declaresOversizedLength``.
        public var oversizedBody: Int?
        /// Whether an ``oversizedBody`` carries its `Content-Length` (otherwise it is sent chunked, of
        /// unknown length).
        public var declaresOversizedLength: Bool
        /// Sent as a `Set-Cookie` header with every answer.
        public var setCookie: String?
        /// Header fields added to every answer, as they are: a name may repeat (for tests that
        /// repeated fields reach the client).
        public var extraFields: HTTPFields
        /// Fault-status bodies repeat what the request carried — its path and query, its
        /// `Authorization` and `Cookie` headers — the way careless servers echo tokens in error pages.
        public var echoRequestInErrors: Bool
        /// A fault for writes only (`POST`, `PUT`, `PATCH`, `DELETE`); reads are never hit by it.
        public var writeFault: WriteFault?
        /// Apply ``writeFault`` to this many more writes only, then stop (`nil`: every write).
        public var remainingWriteFaults: Int?

        public init(status: Int? = nil, errorRate: Double = 1, remainingFaults: Int? = nil,
                    retryAfterSeconds: Int? = nil, latency: Duration? = nil,
                    holdRequests: Bool = false, truncateBodies: Bool = false, cacheControl: String? = nil,
                    wrongShape: Bool = false, resetMidBody: Bool = false, oversizedBody: Int? = nil,
                    declaresOversizedLength: Bool = false, setCookie: String? = nil, echoRequestInErrors: Bool = false,
                    extraFields: HTTPFields = [:], writeFault: WriteFault? = nil, remainingWriteFaults: Int? = nil) {
            self.writeFault = writeFault
            self.remainingWriteFaults = remainingWriteFaults
            self.extraFields = extraFields
            self.status = status
            self.errorRate = errorRate
            self.remainingFaults = remainingFaults
            self.retryAfterSeconds = retryAfterSeconds
            self.latency = latency
            self.holdRequests = holdRequests
            self.truncateBodies = truncateBodies
            self.cacheControl = cacheControl
            self.wrongShape = wrongShape
            self.resetMidBody = resetMidBody
            self.oversizedBody = oversizedBody
            self.declaresOversizedLength = declaresOversizedLength
            self.setCookie = setCookie
            self.echoRequestInErrors = echoRequestInErrors
        }

        /// No faults.
        public static let none = Faults()
    }

    /// A request the server received.
    public struct RecordedRequest: Sendable, Equatable {
        public var method: String
        public var path: String
        public var headers: [String: String]
    }

    struct State: Sendable {
        var faults = Faults.none
        var feed: [FeedItem]
        /// The feed's `Last-Modified`, in whole seconds.
        var feedModifiedAt: Date
        var posts: [Int: Post] = [:]
        var nextPostID = 1
        var requests: [RecordedRequest] = []
        var notModified: [String: Int] = [:]
        /// The requests held by ``Faults/holdRequests``, by the id each took in ``waitAsFaultsAsk(_:)``.
        var held: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var lastHoldID: UInt64 = 0
        /// Counts ``releaseHeldRequests()`` calls, so a request recorded before a release but not yet
        /// parked when it happened is released too, instead of waiting forever.
        var releases = 0
        var requestWaiters = CountWaiters()
        var streamedBodyBytes = 0
        var streamedBodies: [StreamedBody] = []
        var streamedBodyWaiters = CountWaiters()
        var running: Task<Void, any Error>?
        /// The running server's service group: stopping is its graceful shutdown.
        var group: ServiceGroup?
        var port: Int
        var idempotency = IdempotencyLedger()
        var honoursIdempotencyKeys = true
        var appliedWrites: [AppliedWrite] = []
        var writeObservers: [@Sendable (WriteEvent) -> Void] = []
        /// The connections that carried a request and are not closed yet (see ``goOffline()``).
        var connections: [ObjectIdentifier: any Channel] = [:]
        /// The listening socket while online (see ``goOffline()``).
        var listener: (any Channel)?
    }

    /// The host the server listens on.
    public let host: String
    /// Draws the number that decides whether a request is hit by ``Faults/errorRate``.
    private let random: @Sendable () -> Double
    let state: Locked<State>
    let logger: Logger
    /// Where a server started on port 0 takes its port.
    private let ports: DemoServerPorts

    private init(
        host: String, port: Int, feed: [FeedItem], logger: Logger, random: @escaping @Sendable () -> Double,
        ports: DemoServerPorts
    ) {
        self.host = host
        self.random = random
        self.logger = logger
        self.ports = ports
        self.state = Locked(State(feed: feed, feedModifiedAt: Self.wholeSeconds(Date()), port: port))
    }

    /// Starts a server on `host:port` and returns once it accepts connections. Port 0: a port of
    /// ``DemoServerPorts``, which no other server of this process gets while this one lives.
    public static func start(
        host: String = "127.0.0.1", port: Int = 0, feed: [FeedItem] = DemoData.feed,
        logger: Logger = Logger(label: "strata.demo-server", factory: { _ in SwiftLogNoOpLogHandler() }),
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) }
    ) async throws -> DemoServer {
        try await start(host: host, port: port, feed: feed, logger: logger, random: random, ports: .shared)
    }

    /// ``start(host:port:feed:logger:random:)`` with the pool a port-0 server takes its port from.
    static func start(
        host: String = "127.0.0.1", port: Int = 0, feed: [FeedItem] = DemoData.feed,
        logger: Logger = Logger(label: "strata.demo-server", factory: { _ in SwiftLogNoOpLogHandler() }),
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) }, ports: DemoServerPorts
    ) async throws -> DemoServer {
        let server = DemoServer(host: host, port: port, feed: feed, logger: logger, random: random, ports: ports)
        try await server.goOnline()
        return server
    }

    /// The port the server listens on (kept while offline, so it comes back on the same one).
    public var port: Int { state.withLock { $0.port } }
    /// `http://host:port`.
    public var baseURL: URL { URL(string: "http://\(host):\(port)")! }
    /// `http://host:port/feed`.
    public var feedURL: URL { baseURL.appendingPathComponent("feed") }
    /// Whether the server accepts connections now.
    public var isOnline: Bool { state.withLock { $0.running != nil } }

    /// The faults applied to requests.
    public var faults: Faults {
        get { state.withLock { $0.faults } }
        set { state.withLock { $0.faults = newValue } }
    }

    /// The feed served by `GET /feed`. Setting it moves the feed's `Last-Modified` forward (by at
    /// least a second, so `If-Modified-Since` sees every change).
    public var feed: [FeedItem] {
        get { state.withLock { $0.feed } }
        set {
            let now = Self.wholeSeconds(Date())
            state.withLock { state in
                state.feed = newValue
                state.feedModifiedAt = max(now, state.feedModifiedAt.addingTimeInterval(1))
            }
        }
    }

    /// The validators `GET /feed` answers with now: its strong `ETag` and its `Last-Modified`.
    public var feedValidators: CacheValidators {
        let (items, modifiedAt) = state.withLock { ($0.feed, $0.feedModifiedAt) }
        let body = (try? Self.encodeJSON(items)) ?? Data()
        return CacheValidators(etag: Self.strongETag(of: body), lastModified: HTTPDate.string(from: modifiedAt))
    }

    /// How many body bytes the server has handed to its connections for ``Faults/oversizedBody`` and
    /// ``Faults/resetMidBody`` answers (bytes the client stopped reading are never produced).
    public var streamedBodyBytes: Int { state.withLock { $0.streamedBodyBytes } }

    /// How one ``Faults/oversizedBody`` answer ended, as the server saw it.
    public struct StreamedBody: Sendable, Equatable, CustomStringConvertible {
        /// The body bytes handed to the connection before it ended.
        public var bytes: Int
        /// The size the body would have had.
        public var size: Int
        /// Whether the connection went away before the whole body was written: the client closed it
        /// (or reset it). `false`: the server wrote the whole body.
        public var closedByClient: Bool

        public var description: String {
            closedByClient ? "closed by the client after \(bytes) of \(size) bytes" : "all \(size) bytes written"
        }
    }

    /// Suspends until `count` ``Faults/oversizedBody`` answers have ended (written in full, or cut
    /// short because the connection went away), then returns how each ended, in order. The server's
    /// own account: a client that stopped reading without closing its connection is never counted.
    public func waitForStreamedBodies(count: Int) async -> [StreamedBody] {
        await withCheckedContinuation { continuation in
            state.withLock { $0.streamedBodyWaiters.wait(for: count, current: $0.streamedBodies.count, continuation: continuation) }
        }
        return state.withLock { $0.streamedBodies }
    }

    /// Every request received so far.
    public var requests: [RecordedRequest] { state.withLock { $0.requests } }

    /// How many requests for `path` the server has received.
    public func requestCount(path: String = "/feed") -> Int {
        state.withLock { $0.requests.filter { $0.path == path }.count }
    }

    /// How many requests for `path` the server answered with `304 Not Modified`.
    public func notModifiedCount(path: String = "/feed") -> Int {
        state.withLock { $0.notModified[path, default: 0] }
    }

    /// Suspends until the server has received at least `count` requests in all.
    public func waitForRequests(count: Int) async {
        await withCheckedContinuation { continuation in
            state.withLock { $0.requestWaiters.wait(for: count, current: $0.requests.count, continuation: continuation) }
        }
    }

    /// Lets every held request answer.
    public func releaseHeldRequests() {
        let held = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            defer { state.held = [:] }
            state.releases += 1
            return Array(state.held.values)
        }
        held.forEach { $0.resume() }
    }

    /// Stops listening: new connections are refused until ``goOnline()``.
    ///
    /// Hummingbird's server ends only once every connection's handler has returned, so no request may
    /// stay held: the held ones are released and the server marked offline in one step (a request that
    /// reaches the hold after it is not held, see ``waitAsFaultsAsk(_:)``), and a handler the server's
    /// cancellation reaches while it is held is let go.
    public func goOffline() async {
        let (held, running, listener, group) = state.withLock { state in
            defer {
                state.held = [:]
                state.running = nil
                state.listener = nil
                state.group = nil
            }
            state.releases += 1
            return (Array(state.held.values), state.running, state.listener, state.group)
        }
        held.forEach { $0.resume() }
        // A graceful shutdown, never a cancellation first: cancelled while the kernel had handed it
        // connections it had not yet taken, the server dropped them unclosed, and SwiftNIO traps on
        // that ("Deinited NIOAsyncWriter without calling finish()", apple/swift-nio#3481), which ends
        // the whole process. Shut down gracefully, the listener closes and every connection
        // accepted is served; the group cancels what is left (a request waiting out a latency fault)
        // after `stopGrace`.
        // And before it, stop accepting: a connection accepted while the listener closes can reach
        // the server after the server stopped taking connections (the same trap, under load). With
        // accepting off, every connection already accepted has reached the server once each event
        // loop has run what was queued before (a few turns of each loop).
        if let listener {
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
        await group?.triggerGracefulShutdown()
        _ = await running?.result
        // The server's end does not wait for its listening socket to close: until it has, the kernel
        // still accepts connections on the port (and resets them when it closes), so a client sees
        // "connection lost" instead of "connection refused". Offline means refused: wait for it.
        if let listener {
            listener.close(promise: nil)
            try? await listener.closeFuture.get()
        }
        // The listener is closed; a keep-alive connection may not be yet (the server's end does not
        // wait for every connection to close). A client would then send its next request on it and
        // see "connection lost" instead of "connection refused". Close them, and return only once
        // each is closed.
        let open = state.withLock { state in
            defer { state.connections = [:] }
            return Array(state.connections.values)
        }
        for connection in open {
            connection.close(promise: nil)
            try? await connection.closeFuture.get()
        }
    }

    /// Remembers `connection` until it closes, so ``goOffline()`` can close it.
    func track(_ connection: any Channel) {
        let id = ObjectIdentifier(connection)
        let isNew = state.withLock { $0.connections.updateValue(connection, forKey: id) == nil }
        if isNew {
            connection.closeFuture.whenComplete { [state] _ in state.withLock { _ = $0.connections.removeValue(forKey: id) } }
        }
    }

    /// Starts listening (again), on the same port as before. A server started on port 0 takes its
    /// first port from ``DemoServerPorts`` (a port this process hands out once, below the kernel's
    /// ephemeral range), so no other server takes it while this one is offline.
    public func goOnline() async throws {
        if isOnline { return }
        let requestedPort = port
        guard requestedPort == 0 else { return try await listen(on: requestedPort) }
        for attempt in 1...ports.attempts {
            do {
                return try await listen(on: ports.take())
            } catch let error where DemoServerPorts.isAddressInUse(error) && attempt < ports.attempts {
                continue  // another process holds it
            }
        }
    }

    private func listen(on requestedPort: Int) async throws {
        let (announced, portContinuation) = AsyncStream<Int>.makeStream()
        let app = Application(
            router: makeRouter(),
            configuration: .init(address: .hostname(host, port: requestedPort), serverName: "strata-demo"),
            onServerRunning: { [state] channel in
                state.withLock { $0.listener = channel }
                portContinuation.yield(channel.localAddress?.port ?? requestedPort)
                portContinuation.finish()
            },
            logger: logger
        )
        var configuration = ServiceGroupConfiguration(services: [app], logger: logger)
        configuration.maximumGracefulShutdownDuration = Self.stopGrace
        let group = ServiceGroup(configuration: configuration)
        let running = Task {
            defer { portContinuation.finish() }
            try await group.run()
        }
        var boundPort: Int?
        for await port in announced { boundPort = port }
        guard let boundPort else {
            // The server ended before it listened: report why.
            try await running.value
            throw DemoServerError.didNotStart(host: host, port: requestedPort)
        }
        state.withLock { state in
            state.running = running
            state.group = group
            state.port = boundPort
        }
    }

    /// How long a stop waits for the requests being answered before it cancels them: a request
    /// waiting out a latency fault, or a body a fault stalls, is cut short then.
    static let stopGrace: Duration = .milliseconds(500)

    /// Stops the server for good.
    public func stop() async {
        await goOffline()
    }

    private func makeRouter() -> Router<DemoRequestContext> {
        let router = Router(context: DemoRequestContext.self)
        router.add(middleware: ConnectionTracking(server: self))
        router.get("feed") { [self] request, _ -> Response in
            try await respond(to: request, validated: true) {
                let (items, modifiedAt) = state.withLock { ($0.feed, $0.feedModifiedAt) }
                return (try Self.encodeJSON(items), modifiedAt)
            }
        }
        router.get("posts") { [self] request, _ -> Response in
            try await respond(to: request, validated: true) {
                let posts = state.withLock { $0.posts.values.sorted { $0.id < $1.id } }
                return (try Self.encodeJSON(posts), nil)
            }
        }
        router.get("posts/pages/:number") { [self] request, context -> Response in
            let number = try context.parameters.require("number", as: Int.self)
            let size = request.uri.queryParameters.get("size", as: Int.self) ?? PostsPage.defaultSize
            guard number >= 1, (1...100).contains(size) else { throw HTTPError(.badRequest, message: "page from 1, size from 1 to 100") }
            return try await respond(to: request, validated: true) {
                let posts = state.withLock { $0.posts.values.sorted { $0.id > $1.id } }
                return (try Self.encodeJSON(PostsPage(posts, number: number, size: size)), nil)
            }
        }
        router.get("posts/:id") { [self] request, context -> Response in
            let id = try context.parameters.require("id", as: Int.self)
            return try await respond(to: request, validated: true) {
                guard let post = state.withLock({ $0.posts[id] }) else { throw HTTPError(.notFound) }
                return (try Self.encodeJSON(post), nil)
            }
        }
        addWriteRoutes(to: router)
        return router
    }

    /// The posts created so far, by id.
    public var posts: [Int: Post] { state.withLock { $0.posts } }

    /// Creates a post as `POST /posts` would, without a request (a demo's sample posts, a post
    /// "someone else" wrote).
    @discardableResult
    public func addPost(title: String, body: String) -> Post {
        state.withLock { state in
            let post = Post(id: state.nextPostID, title: title, body: body)
            state.posts[post.id] = post
            state.nextPostID += 1
            return post
        }
    }

    /// `http://host:port/posts/pages/{number}`: the posts newest first, a page at a time.
    public func postsPageURL(_ number: Int, size: Int = PostsPage.defaultSize) -> URL {
        URL(string: "\(baseURL.absoluteString)/posts/pages/\(number)?size=\(size)")!
    }

    /// What ``admit(_:isWrite:)`` decided for one request.
    struct Admitted {
        var faults: Faults
        /// Whether the status fault (``Faults/status``) answers this request.
        var failThisRequest: Bool
        /// The write fault that hits this request, if any (writes only).
        var writeFault: WriteFault?
        var releasesSeen: Int
    }

    /// Records the request and decides which faults hit it (counting down the limited ones).
    func admit(_ request: Request, isWrite: Bool) -> Admitted {
        admit(request, isWrite: isWrite) { _, _ in () }.admitted
    }

    /// ``admit(_:isWrite:)``, then `then` in the same step (under the lock): whoever sees the request
    /// recorded (``waitForRequests(count:)``) sees what `then` did too.
    func admit<Decided>(
        _ request: Request, isWrite: Bool, then: (inout State, Admitted) -> Decided
    ) -> (admitted: Admitted, decided: Decided) {
        var headers: [String: String] = [:]
        for field in request.headers { headers[field.name.rawName] = field.value }
        let draw = random()
        return state.withLock { state -> (admitted: Admitted, decided: Decided) in
            state.requests.append(RecordedRequest(method: request.method.rawValue, path: request.uri.path, headers: headers))
            var fail = state.faults.status != nil && draw < state.faults.errorRate
            if fail, let remaining = state.faults.remainingFaults {
                fail = remaining > 0
                state.faults.remainingFaults = max(0, remaining - 1)
            }
            var writeFault: WriteFault?
            if isWrite, !fail, let fault = state.faults.writeFault {
                writeFault = fault
                if let remaining = state.faults.remainingWriteFaults {
                    if remaining <= 0 { writeFault = nil }
                    state.faults.remainingWriteFaults = max(0, remaining - 1)
                }
            }
            let admitted = Admitted(faults: state.faults, failThisRequest: fail, writeFault: writeFault, releasesSeen: state.releases)
            let decided = then(&state, admitted)
            state.requestWaiters.resumeReached(state.requests.count)
            return (admitted, decided)
        }
    }

    /// Holds the request while ``Faults/holdRequests`` asks, then waits out ``Faults/latency``.
    ///
    /// Held until ``releaseHeldRequests()``, ``goOffline()`` or the cancellation of the handler's task
    /// (the server stopping), whichever comes first. Not held at all when one of them came between the
    /// admission and now: a handler runs on the shared cooperative pool and may get here well after
    /// its request was read, after the server began to stop (held then, it would keep `stop()` from
    /// returning, for good).
    func waitAsFaultsAsk(_ admitted: Admitted) async throws {
        if admitted.faults.holdRequests {
            let id = state.withLock { state -> UInt64 in
                state.lastHoldID += 1
                return state.lastHoldID
            }
            await withTaskCancellationHandler {
                await withCheckedContinuation { continuation in
                    let releasedMeanwhile = state.withLock { state -> Bool in
                        // Cancellation is read under the lock: a cancel after this check finds the
                        // request held and releases it in the handler below.
                        guard state.releases == admitted.releasesSeen, state.running != nil, !Task.isCancelled else {
                            return true
                        }
                        state.held[id] = continuation
                        return false
                    }
                    if releasedMeanwhile { continuation.resume() }
                }
            } onCancel: {
                state.withLock { $0.held.removeValue(forKey: id) }?.resume()
            }
        }
        if let latency = admitted.faults.latency { try await Task.sleep(for: latency) }
    }

    /// The answer of the status fault (``Faults/status``): `status` and a short text.
    static func faultResponse(status: Int, faults: Faults, request: Request) -> Response {
        var responseHeaders = HTTPFields()
        responseHeaders[.contentType] = "text/plain; charset=utf-8"
        if let retryAfter = faults.retryAfterSeconds { responseHeaders[.retryAfter] = "\(retryAfter)" }
        if let cookie = faults.setCookie { responseHeaders[.setCookie] = cookie }
        responseHeaders.append(contentsOf: faults.extraFields)
        var text = "injected fault: \(status)\n"
        if faults.echoRequestInErrors {
            text += "you asked for \(request.uri.description)\n"
            text += "with authorization \(request.headers[.authorization] ?? "none") and cookie \(request.headers[.cookie] ?? "none")\n"
        }
        return Response(status: .init(code: status), headers: responseHeaders, body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    /// Records the request, applies the faults, then answers with `body()` as JSON. With `validated`,
    /// the answer carries an `ETag` (and the `Last-Modified` date `body()` returns) and conditional
    /// requests that match are answered with 304.
    private func respond(
        to request: Request, status: HTTPResponse.Status = .ok, validated: Bool = false,
        body: () throws -> (data: Data, lastModified: Date?)
    ) async throws -> Response {
        let admitted = admit(request, isWrite: false)
        try await waitAsFaultsAsk(admitted)
        if admitted.failThisRequest, let status = admitted.faults.status {
            return oversizingBody(of: Self.faultResponse(status: status, faults: admitted.faults, request: request), admitted.faults)
        }
        if Self.hasBodyFault(admitted.faults) {
            return answer(request, status: status, headers: [:], data: Data(), faults: admitted.faults)
        }
        let (data, lastModified) = try body()
        var responseHeaders: HTTPFields = [.contentType: "application/json"]
        if validated {
            let etag = Self.strongETag(of: data)
            responseHeaders[.eTag] = etag
            if let lastModified { responseHeaders[.lastModified] = HTTPDate.string(from: lastModified) }
            if Self.isNotModified(request.headers, etag: etag, lastModified: lastModified) {
                state.withLock { $0.notModified[request.uri.path, default: 0] += 1 }
                responseHeaders[.contentType] = nil
                if let cookie = admitted.faults.setCookie { responseHeaders[.setCookie] = cookie }
                if let cacheControl = admitted.faults.cacheControl { responseHeaders[.cacheControl] = cacheControl }
                responseHeaders.append(contentsOf: admitted.faults.extraFields)
                return Response(status: .notModified, headers: responseHeaders)
            }
        }
        return answer(request, status: status, headers: responseHeaders, data: data, faults: admitted.faults)
    }

    /// Whether a fault replaces the body of a successful answer (so no 304 is sent in its place).
    static func hasBodyFault(_ faults: Faults) -> Bool {
        faults.oversizedBody != nil || faults.wrongShape
    }

    /// A successful answer, `data` with `headers`, as the faults that change bodies make it: an
    /// oversized or wrong-shaped body instead, a truncated body, or a reset mid-body; plus the
    /// cookie, `Cache-Control` (for `GET`) and extra fields the faults add.
    func answer(_ request: Request, status: HTTPResponse.Status, headers: HTTPFields, data: Data, faults: Faults) -> Response {
        if let size = faults.oversizedBody {
            var headers: HTTPFields = [.contentType: "application/json"]
            if let cookie = faults.setCookie { headers[.setCookie] = cookie }
            return oversizedResponse(status: status, headers: headers, size: size, declaresLength: faults.declaresOversizedLength)
        }
        if faults.wrongShape {
            var responseHeaders: HTTPFields = [.contentType: "application/json"]
            if let cookie = faults.setCookie { responseHeaders[.setCookie] = cookie }
            let wrong = #"{"id":"not-a-uuid","title":42,"items":"this is not a list"}"#
            return Response(status: status, headers: responseHeaders, body: .init(byteBuffer: ByteBuffer(string: wrong)))
        }
        var responseHeaders = headers
        if let cookie = faults.setCookie { responseHeaders[.setCookie] = cookie }
        if request.method == .get, let cacheControl = faults.cacheControl { responseHeaders[.cacheControl] = cacheControl }
        responseHeaders.append(contentsOf: faults.extraFields)
        var data = data
        if faults.truncateBodies { data = data.prefix(data.count / 2) }
        if faults.resetMidBody {
            let firstHalf = ByteBuffer(bytes: data.prefix(data.count / 2))
            let body = ResponseBody(contentLength: data.count) { [state] writer in
                try await writer.write(firstHalf)
                state.withLock { $0.streamedBodyBytes += firstHalf.readableBytes }
                // Throwing from the body writer makes Hummingbird close the connection mid-body.
                throw ConnectionResetFault()
            }
            return Response(status: status, headers: responseHeaders, body: body)
        }
        return Response(status: status, headers: responseHeaders, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    /// `response` with the ``Faults/oversizedBody`` in place of its body when the faults ask for one
    /// (its status and header fields kept): how fault answers get a large body.
    func oversizingBody(of response: Response, _ faults: Faults) -> Response {
        guard let size = faults.oversizedBody else { return response }
        var headers = response.headers
        headers[.contentLength] = nil
        return oversizedResponse(status: response.status, headers: headers, size: size, declaresLength: faults.declaresOversizedLength)
    }

    /// `status` with `headers` and a body of `size` bytes of JSON-looking filler, produced 64 KiB at a
    /// time as the connection accepts it: an answer far larger than memory costs the server nothing.
    /// How it ended is recorded (``waitForStreamedBodies(count:)``).
    private func oversizedResponse(status: HTTPResponse.Status, headers: HTTPFields, size: Int, declaresLength: Bool) -> Response {
        let chunkSize = 64 * 1024
        let chunk = ByteBuffer(repeating: UInt8(ascii: " "), count: chunkSize)
        let body = ResponseBody(contentLength: declaresLength ? size : nil) { [state] writer in
            var sent = 0
            do {
                while sent < size {
                    let count = min(chunkSize, size - sent)
                    try await writer.write(chunk.getSlice(at: 0, length: count)!)
                    sent += count
                    state.withLock { $0.streamedBodyBytes += count }
                    // A write into a connection with room returns without suspending: yield, so an
                    // endless body sent to a fast reader does not keep a thread of the shared pool
                    // from every other task of the process.
                    await Task.yield()
                }
                try await writer.finish(nil)
            } catch {
                // A write fails once the connection is gone: the client closed it before the end.
                Self.recordStreamedBody(StreamedBody(bytes: sent, size: size, closedByClient: true), in: state)
                throw error
            }
            Self.recordStreamedBody(StreamedBody(bytes: sent, size: size, closedByClient: false), in: state)
        }
        return Response(status: status, headers: headers, body: body)
    }

    private static func recordStreamedBody(_ body: StreamedBody, in state: Locked<State>) {
        state.withLock { state in
            state.streamedBodies.append(body)
            state.streamedBodyWaiters.resumeReached(state.streamedBodies.count)
        }
    }

    /// JSON with sorted keys: the same value always gives the same bytes, so the same `ETag`.
    static func encodeJSON(_ value: some Encodable) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return try encoder.encode(value)
    }

    /// `"<sha-256 of body in hex>"`: a strong validator, equal exactly when the bytes are.
    static func strongETag(of body: Data) -> String {
        "\"" + SHA256.digest(body).map { String(format: "%02x", $0) }.joined() + "\""
    }

    /// RFC 9110 §13.2.2: `If-None-Match` decides when present (weak comparison, `*` matches any);
    /// otherwise `If-Modified-Since` does (not modified when the resource is no newer).
    static func isNotModified(_ headers: HTTPFields, etag: String, lastModified: Date?) -> Bool {
        let ifNoneMatch = headers[values: .ifNoneMatch]
        if !ifNoneMatch.isEmpty {
            func opaque(_ tag: some StringProtocol) -> String {
                let trimmed = tag.trimmingCharacters(in: .whitespaces)
                return trimmed.hasPrefix("W/") ? String(trimmed.dropFirst(2)) : trimmed
            }
            let candidates = ifNoneMatch.flatMap { $0.split(separator: ",") }.map(opaque)
            return candidates.contains("*") || candidates.contains(opaque(etag))
        }
        guard let lastModified, let since = headers[.ifModifiedSince].flatMap(HTTPDate.date(from:)) else { return false }
        return lastModified <= since
    }

    private static func wholeSeconds(_ date: Date) -> Date {
        Date(timeIntervalSince1970: date.timeIntervalSince1970.rounded(.down))
    }
}

/// Runs `body` with a fresh demo server on 127.0.0.1 (on a port of its own) and stops the server
/// afterwards, even when `body` throws: the way tests use a real server.
@discardableResult
public func withDemoServer<Result>(
    feed: [FeedItem] = DemoData.feed,
    isolation: isolated (any Actor)? = #isolation,
    _ body: (DemoServer) async throws -> Result
) async throws -> Result {
    let server = try await DemoServer.start(feed: feed)
    do {
        let result = try await body(server)
        await server.stop()
        return result
    } catch {
        await server.stop()
        throw error
    }
}

/// Thrown by a ``DemoServer/Faults/resetMidBody`` body after its first half, to drop the connection.
struct ConnectionResetFault: Error {}

/// The demo server could not start.
public enum DemoServerError: Error, CustomStringConvertible {
    case didNotStart(host: String, port: Int)

    public var description: String {
        switch self {
        case .didNotStart(let host, let port): "the demo server did not start on \(host):\(port)"
        }
    }
}

/// Hands every request's connection to ``DemoServer/track(_:)``.
struct ConnectionTracking: RouterMiddleware {
    typealias Context = DemoRequestContext
    let server: DemoServer

    func handle(
        _ request: Request, context: DemoRequestContext, next: (Request, DemoRequestContext) async throws -> Response
    ) async throws -> Response {
        server.track(context.channel)
        return try await next(request, context)
    }
}
