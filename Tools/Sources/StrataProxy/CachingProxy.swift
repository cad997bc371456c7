import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
@_spi(StrataInternals) import Strata
import StrataAsyncHTTPClient
import StrataPostgres

/// One node of a caching HTTP reverse proxy: a shared cache in RFC 9111's sense in front of one
/// upstream, with a memory tier, a PostgreSQL tier that other nodes share, a backplane that keeps
/// their memory tiers coherent, and a fleet lock so that a cold key is fetched once per fleet.
///
/// A `GET` (or `HEAD`) goes memory → PostgreSQL → upstream. A fresh stored response answers at once
/// (a hit near the end of its lifetime also starts one background revalidation); a stale one is
/// revalidated with a conditional request, and served stale if the upstream fails or is slower
/// than the soft timeout (the revalidation then goes on in the background up to the hard timeout).
/// A miss takes the key's fleet lock, reads PostgreSQL again once it holds it, fetches and stores;
/// the other nodes' misses wait for the stored response (up to the lock timeout, then fetch anyway).
/// Other methods pass through and invalidate what they touch (RFC 9111 §4.4).
final class CachingProxy: Sendable {
    typealias Cache = TieredStore<MemoryStore<String, StoredResponse>, ProxySharedTier>

    /// How the proxy behaves; the command's options.
    struct Settings: Sendable {
        /// The upstream's base URL: a request's path is appended to it.
        var upstream: URL
        /// This node's name (the backplane's sender, the lock's application name, `X-Strata-Node`).
        var node: String
        /// How long a miss waits for another node holding the key's lock before fetching anyway.
        var lockTimeout: Duration = .seconds(5)
        /// How often a waiting miss reads the shared tier again.
        var pollInterval: Duration = .milliseconds(20)
        /// With a stale copy at hand, how long to wait for the upstream before serving it.
        var softTimeout: Duration? = .seconds(1)
        /// How long an upstream request may take at most.
        var hardTimeout: Duration = .seconds(30)
        /// How long past its lifetime a response may still be served when the upstream fails,
        /// counted from when it was stored (never extended by a revalidation that failed).
        var maxStale: Duration = .seconds(24 * 3600)
        /// The share of its lifetime after which a hit starts a background revalidation.
        var refreshAheadFraction: Double? = 0.8
        /// The largest body fetched from the upstream.
        var maxBodyBytes = 16 * 1024 * 1024
        /// The most variants (`Vary`) kept per target; storing one more lets go of the least
        /// recently stored.
        var maxVariants = 8
        /// The targeted fields (RFC 9213) this proxy obeys, in order, ahead of `Cache-Control`.
        var targetedFields: [HTTPField.Name] = SharedCachePolicy.defaultTargetedFields
        /// Whether the clients' `Forwarded` and `X-Forwarded-*` fields are passed on (the proxy is
        /// behind a load balancer that sets them); otherwise they are dropped, so a client cannot
        /// pose as another address to the upstream.
        var trustForwardedFields = false
        /// Whether the control listener is on loopback (reads then need no token).
        var adminIsLoopback = true
        /// The control listener's token: `Authorization: Bearer <token>`. Every action that
        /// changes something needs it; without one configured, none is allowed.
        var adminToken: String?
    }

    /// A request as the server hands it over.
    struct Request: Sendable {
        var head: HTTPRequest
        var body: Data?
        /// The body as it arrives from the client, for a request that passes through.
        var stream: HTTPClientRequest.Body?

        init(head: HTTPRequest, body: Data?, stream: HTTPClientRequest.Body? = nil) {
            self.head = head
            self.body = body
            self.stream = stream
        }
    }

    /// An answer to send back.
    struct Answer: Sendable {
        var status: HTTPResponse.Status
        var fields: HTTPFields
        var body: Data
        /// A body too large to cache, streamed from the upstream as it arrives (then `body` is
        /// empty).
        var streamed: HTTPClientResponse.Body?

        init(status: HTTPResponse.Status, fields: HTTPFields, body: Data, streamed: HTTPClientResponse.Body? = nil) {
            self.status = status
            self.fields = fields
            self.body = body
            self.streamed = streamed
        }
    }

    let settings: Settings
    let cache: Cache
    /// The fleet lock; `nil` for a node alone (no PostgreSQL).
    let lock: PostgresFleetLock?
    let transport: AsyncHTTPTransport
    let metrics = ProxyMetrics()
    let logger: Logger
    private let flights = Locked(Flights())

    /// The flights of this node: one upstream request per key at a time (a miss, a revalidation
    /// or a refresh ahead), decided by the library's `ServingStaleAfterFlights`, as
    /// `servingStaleAfter` decides its loads.
    private struct Flights: Sendable {
        var machine = ServingStaleAfterFlights<String>()
        var waiters: [UInt64: CheckedContinuation<FlightOutcome, Never>] = [:]
        /// The waiter that started each flight (a refresh ahead has none).
        var leaders: [UInt64: UInt64] = [:]
    }

    /// What a request waiting for a flight is answered with.
    private enum FlightOutcome: Sendable {
        /// This request started the flight: the upstream's answer to it.
        case answer(Answer)
        /// The soft timeout passed and this request has a usable stale copy: it is served.
        case copy
        /// The flight ended: the cache is read again. The answer was the leader's; only the
        /// cache's rules (privacy, `Vary`) say whether another request may have it.
        case readAgain
        /// The flight ended with the upstream failing (a 5xx, or no answer): no waiter asks again
        /// at once; each gets its stale copy when it may, else this failure.
        case failed(Answer)
        /// The request was cancelled (its client left).
        case cancelled
    }

    init(settings: Settings, cache: Cache, lock: PostgresFleetLock?, transport: AsyncHTTPTransport, logger: Logger) {
        self.settings = settings
        self.hitFields = Self.hitFields(node: settings.node)
        self.cache = cache
        self.lock = lock
        self.transport = transport
        self.logger = logger
    }

    /// Answers one request.
    func handle(_ request: Request) async -> Answer {
        switch request.head.method {
        case .get, .head:
            metrics.count { $0.requests["read", default: 0] += 1 }
            let answer = await read(request.head)
            guard request.head.method == .head else { return answer }
            var fields = answer.fields
            if answer.status != .notModified, answer.streamed == nil { fields[.contentLength] = "\(answer.body.count)" }
            return Answer(status: answer.status, fields: fields, body: Data())
        default:
            metrics.count { $0.requests["write", default: 0] += 1 }
            return await passThrough(request)
        }
    }

    // MARK: Reads

    /// The cache key of a read: the method a stored response answers and the path with its query.
    static func key(path: String) -> String { "GET " + path }

    /// The answer to a plain GET that a fresh entry of the memory tier gives without suspending,
    /// or `nil`: what `ProxyFastPath` answers on the connection's event loop. Plain: no request
    /// directive (`Cache-Control`, `Pragma`), no conditional or range field, no `Connection` field,
    /// and not near the end of its lifetime (a refresh ahead starts on the full path). Anything
    /// else, and every decision but this one, is the full path's (``handle(_:)``).
    func immediateHit(_ head: HTTPRequest) -> Answer? {
        guard head.method == .get, let path = head.path else { return nil }
        let fields = head.headerFields
        for name in Self.fieldsThatNeedTheFullPath where fields[name] != nil { return nil }
        let key = Self.key(path: path)
        guard var entry = cache.memory.immediateEntry(for: key) else { return nil }
        if let names = entry.value.variantNames {
            guard let variant = cache.memory.immediateEntry(for: Self.variantKey(key, names: names, request: selecting(head))) else { return nil }
            entry = variant
        }
        guard matchesVary(entry, head), let age = immediateHitAge(entry) else { return nil }
        return answer(entry, age: age, cache: "HIT", tier: "memory", to: head)
    }

    /// The age of `entry` when it is fresh and not near the end of its lifetime (a refresh ahead
    /// starts on the full path): then it is a hit of the memory tier, counted here.
    private func immediateHitAge(_ entry: CacheEntry<StoredResponse>) -> Duration? {
        let age = SharedCachePolicy.currentAge(initialAge: entry.value.initialAge, responseTime: entry.storedAt, now: Date())
        let lifetime = entry.validators.maxAge ?? .zero
        guard lifetime > age else { return nil }
        if let fraction = settings.refreshAheadFraction, age >= lifetime * fraction { return nil }
        metrics.countFastMemoryHit()
        return age
    }

    /// ``immediateHit(_:)-(HTTPRequest)`` for a request head as NIO's HTTP/1 decoder gives it, without
    /// converting it into swift-http-types' `HTTPRequest` (which only a stored response that varies
    /// needs), answered with the whole HTTP/1.1 response as bytes, `ProxyFastPath` writes them below
    /// NIO's response encoder: the stored entry's ``StoredResponse/encodedHead``, the hit's own fields,
    /// `Content-Length`, the body. Only an HTTP/1.1 request with an origin-form target (`/path?query`)
    /// qualifies.
    func immediateHit(_ head: HTTPRequestHead, allocator: ByteBufferAllocator) -> ByteBuffer? {
        // HTTP/1.0 (whose connection closes after the answer unless it asks otherwise) goes the full way.
        guard head.method == .GET, head.version == .http1_1, head.uri.utf8.first == UInt8(ascii: "/") else { return nil }
        for name in Self.fieldNamesThatNeedTheFullPath where head.headers.contains(name: name) { return nil }
        guard let entry = cache.memory.immediateEntry(for: Self.key(path: head.uri)) else { return nil }
        if entry.value.variantNames != nil || !entry.value.varyValues.isEmpty {
            // Choosing by the request's fields: swift-http-types' view of them, as the full path's.
            guard let request = try? HTTPRequest(head, secure: false, splitCookie: false), let answer = immediateHit(request) else { return nil }
            // The answer carries the hit's own fields already: only its length is set again.
            let encoded = StoredResponse.encodedHead(status: answer.status.code, fields: answer.fields, leavingOut: ["content-length"])
            return Self.response(head: encoded, ownFields: nil, age: nil, body: answer.body, allocator: allocator)
        }
        guard let age = immediateHitAge(entry) else { return nil }
        return Self.response(head: entry.value.encodedHead, ownFields: hitFields, age: age, body: entry.value.body, allocator: allocator)
    }

    /// `X-Cache`, `X-Cache-Tier` and `X-Strata-Node` of a memory hit, encoded once. The node's name
    /// keeps only the bytes a field value may hold (it comes from the command line).
    private let hitFields: ByteBuffer

    private static func hitFields(node: String) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeStaticString("X-Cache: HIT\r\nX-Cache-Tier: memory\r\nX-Strata-Node: ")
        buffer.writeBytes(node.utf8.filter { $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) })
        buffer.writeStaticString("\r\n")
        return buffer
    }

    /// One HTTP/1.1 response: `head` (the status line and fields), `ownFields`, `Age`,
    /// `Content-Length`, the blank line, the body. One buffer: one write, one `writev` part.
    static func response(head: ByteBuffer, ownFields: ByteBuffer?, age: Duration?, body: Data, allocator: ByteBufferAllocator) -> ByteBuffer {
        var bytes = allocator.buffer(capacity: head.readableBytes + (ownFields?.readableBytes ?? 0) + 48 + body.count)
        bytes.writeImmutableBuffer(head)
        if let ownFields { bytes.writeImmutableBuffer(ownFields) }
        if let age {
            bytes.writeStaticString("Age: ")
            bytes.writeString(String(max(0, age.components.seconds)))
            bytes.writeStaticString("\r\n")
        }
        bytes.writeStaticString("Content-Length: ")
        bytes.writeString(String(body.count))
        bytes.writeStaticString("\r\n\r\n")
        bytes.writeBytes(body)
        return bytes
    }

    static let fieldNamesThatNeedTheFullPath: [String] = fieldsThatNeedTheFullPath.map(\.rawName)

    static let fieldsThatNeedTheFullPath: [HTTPField.Name] = [
        .cacheControl, HTTPField.Name("Pragma")!, .ifNoneMatch, .ifModifiedSince, .ifMatch, .ifUnmodifiedSince, .ifRange, .range,
        .connection, HTTPField.Name("CDN-Cache-Control")!,
    ]

    private func read(_ head: HTTPRequest) async -> Answer {
        let path = head.path ?? "/"
        let key = Self.key(path: path)
        let directives = SharedCacheDirectives(head.headerFields)
        if directives.noStore {
            // RFC 9111 §5.2.1.5: nothing of this exchange is stored.
            return await fetch(head, key: key, stale: nil, store: false)
        }
        if head.headerFields[.range] != nil {
            // A range goes to the upstream with its If-Range (a resumed download must not get a
            // newer version's bytes), and its answer (206 or 200) is neither stored nor allowed to
            // remove what is stored.
            metrics.count { $0.notStored += 1 }
            return await forward(Request(head: head, body: nil), invalidating: false, cache: "BYPASS")
        }
        let memoryEntry = cache.memory.immediateEntry(for: key)
        let inMemory = memoryEntry != nil
        if let entry = await lookup(key, for: head, known: memoryEntry) {
            let now = Date()
            let age = SharedCachePolicy.currentAge(initialAge: entry.value.initialAge, responseTime: entry.storedAt, now: now)
            let lifetime = entry.validators.maxAge ?? .zero
            if SharedCachePolicy.isFresh(lifetime: lifetime, age: age, request: directives) {
                metrics.count { $0.hits[inMemory ? "memory" : "shared", default: 0] += 1 }
                if let fraction = settings.refreshAheadFraction, lifetime > .zero, age >= lifetime * fraction {
                    refreshAhead(key, entry: entry, head: head)
                }
                return answer(entry, age: age, cache: "HIT", tier: inMemory ? "memory" : "shared", to: head)
            }
            if SharedCachePolicy.mayServeStale(
                lifetime: lifetime, age: age, responseAllowsStale: entry.value.mayServeStale, request: directives) {
                metrics.count { $0.staleServed[.clientMaxStale, default: 0] += 1 }
                return answer(entry, age: age, cache: "STALE", tier: inMemory ? "memory" : "shared", to: head)
            }
            if let window = entry.value.staleWhileRevalidateSeconds, entry.value.mayServeStale, Self.requestAllowsStale(head),
               age - lifetime <= .milliseconds(Int64(window * 1000)) {
                // RFC 5861 §3: served stale at once while one revalidation runs in the background.
                metrics.count { $0.staleServed[.staleWhileRevalidate, default: 0] += 1 }
                refreshAhead(key, entry: entry, head: head)
                return answer(entry, age: age, cache: "STALE", tier: inMemory ? "memory" : "shared", to: head)
            }
            if directives.onlyIfCached { return gatewayTimeout("only-if-cached, and the stored response is stale") }
            return await fly(key, head: head, stale: entry, tier: inMemory ? "memory" : "shared")
        }
        if directives.onlyIfCached { return gatewayTimeout("only-if-cached, and nothing is stored") }
        metrics.count { $0.misses += 1 }
        return await fly(key, head: head, stale: nil, tier: "upstream")
    }

    /// The stored response for `key` that may answer `head` (its `Vary` fields match), or `nil`.
    /// A shared tier that is down is a miss here: the upstream answers.
    /// A target whose responses vary has an index under its key: the request's variant is read
    /// from the key the index names for its values.
    private func lookup(_ key: String, for head: HTTPRequest, known: CacheEntry<StoredResponse>? = nil) async -> CacheEntry<StoredResponse>? {
        var found = known
        if found == nil { found = try? await cache.retrieve(key) }
        if let names = found?.value.variantNames {
            found = try? await cache.retrieve(Self.variantKey(key, names: names, request: selecting(head)))
        }
        guard let entry = found, entry.value.variantNames == nil else { return nil }
        guard matchesVary(entry, head) else { return nil }
        return entry
    }

    /// Whether `entry` may answer `head` by its `Vary` values; free for a response that does not
    /// vary (most of them: the hit path builds no fields for it).
    func matchesVary(_ entry: CacheEntry<StoredResponse>, _ head: HTTPRequest) -> Bool {
        entry.value.varyValues.isEmpty
            || SharedCachePolicy.matchesVary(storedRequestValues: entry.value.varyValues, request: selecting(head))
    }

    /// `head` as the upstream sees it, for `Vary`: without hop-by-hop fields (those its `Connection`
    /// names included) and, unless trusted, the forwarding fields. A stored response is selected by
    /// what the upstream saw, never by a field the client named to be dropped.
    func selecting(_ head: HTTPRequest) -> HTTPRequest {
        var selecting = head
        selecting.headerFields = HopByHop.removing(
            from: head.headerFields, also: settings.trustForwardedFields ? [] : Self.forwardingFieldNames)
        return selecting
    }

    /// The key of the variant of `key` that `request` selects, given the fields the target varies on.
    static func variantKey(_ key: String, names: [String], request: HTTPRequest) -> String {
        variantKey(key, digest: variantDigest(SharedCachePolicy.varyValues(names: names, request: request)))
    }

    static func variantKey(_ key: String, digest: String) -> String { key + "\u{1F}vary:" + digest }

    /// A digest of a request's values for the fields a response varies on (credentials already digested).
    static func variantDigest(_ values: [String: String?]) -> String {
        let text = values.keys.sorted().map { name in "\(name)=" + (values[name].flatMap { $0 }.map { "v:" + $0 } ?? "absent") }
        return String(SHA256.hexDigest(text.joined(separator: "\n")).prefix(32))
    }

    /// A miss (`stale` is `nil`) or a stale stored response: one upstream request per key at a
    /// time on this node, and for a miss one per fleet while the holder of the key's lock lives.
    ///
    /// - The first request starts a flight: the upstream request runs in a task of its own, so it
    ///   goes on when its client leaves or the soft timeout passes, until the upstream answers (or
    ///   the hard timeout).
    /// - Every request for the key that comes while it runs joins it. At the soft timeout, the
    ///   requests holding a usable stale copy are answered with it, all at the same moment; one
    ///   that comes after that moment, with a copy, is answered at once. No request sends another
    ///   upstream request while the flight runs.
    /// - When it ends, the request that started it gets the upstream's answer; the others read the
    ///   cache again: a response stored since they came answers them (it was validated after
    ///   their request, which satisfies `no-cache` and `max-age=0`); an unchanged stale copy
    ///   answers those that may have it (the upstream failed); the rest fetch for themselves (the
    ///   answer was not shareable: private, or varying on fields they send otherwise).
    private func fly(_ key: String, head: HTTPRequest, stale: CacheEntry<StoredResponse>?, tier: String) async -> Answer {
        let arrived = Date()
        let usable = stale.map { mayServeStale($0) && Self.requestAllowsStale(head) } ?? false
        switch await joinFlight(key, hasCopy: usable, start: { id, leader in
            self.startFlight(id, key: key, head: head, stale: stale, tier: tier, leader: leader)
        }) {
        case .answer(let answer):
            return answer
        case .copy:
            guard let stale else { return gatewayTimeout("no stale copy") }
            metrics.count { $0.staleServed[.softTimeout, default: 0] += 1 }
            let age = SharedCachePolicy.currentAge(initialAge: stale.value.initialAge, responseTime: stale.storedAt, now: Date())
            return answer(stale, age: age, cache: "STALE", tier: tier, to: head)
        case .readAgain:
            metrics.count { $0.coalesced += 1 }
            let entry = await lookup(key, for: head)
            if let entry, let answer = freshAnswer(entry, to: head, cache: "HIT", orStoredSince: arrived) { return answer }
            if let entry, let stale, usable, entry.storedAt == stale.storedAt {
                // The flight did not replace it: the upstream failed.
                return serveStale(stale, tier: tier, to: head)
            }
            return await fetch(head, key: key, stale: stale, staleTier: tier, store: true)
        case .failed(let failure):
            if let stale, usable { return serveStale(stale, tier: tier, to: head) }
            metrics.count { $0.coalesced += 1 }
            return failure
        case .cancelled:
            return Answer(status: .serviceUnavailable, fields: [:], body: Data("cancelled\n".utf8))
        }
    }

    /// Whether the request lets a stale response answer it when the upstream is slow or failing:
    /// not with `no-cache`, `max-age` or `min-fresh` (the client asked for a fresh one).
    static func requestAllowsStale(_ head: HTTPRequest) -> Bool {
        let directives = SharedCacheDirectives(head.headerFields)
        return !directives.noCache && directives.maxAge == nil && directives.minFresh == nil
    }

    /// The failure `answer` as the flight's other waiters get it. A body streamed from the upstream
    /// can be read once, by the leader's response: another response iterating it too would trap the
    /// process (NIO allows one iterator; a 503 from a failing upstream reaches every waiter of the
    /// flight). They get the status and fields, with a short body.
    static func shareable(_ answer: Answer) -> Answer {
        guard answer.streamed != nil else { return answer }
        var fields = answer.fields
        fields[.contentLength] = nil
        fields[.contentEncoding] = nil
        fields[.contentType] = "text/plain; charset=utf-8"
        return Answer(
            status: answer.status, fields: fields,
            body: Data("strata proxy: the upstream answered \(answer.status.code) to the request this one waited for\n".utf8))
    }

    /// Runs flight `id` of `key`: the upstream request (for a miss, in the key's fleet-lock turn),
    /// and the soft timeout; then answers its waiters.
    private func startFlight(
        _ id: UInt64, key: String, head: HTTPRequest, stale: CacheEntry<StoredResponse>?, tier: String, leader: UInt64?
    ) {
        let timer: Task<Void, Never>? = settings.softTimeout.map { softTimeout in
            Task {
                do { try await Task.sleep(for: softTimeout) } catch { return }
                let early = self.flights.withLock { $0.machine.softTimeoutPassed(key, flight: id) }
                self.answer(early, with: { _ in .copy })
            }
        }
        /// Ends the flight with `answer` (once: a second call finds it ended).
        let finish: @Sendable (Answer) -> Void = { answer in
            timer?.cancel()
            let waiters = self.flights.withLock { state in
                state.leaders[id] = nil
                return state.machine.ended(key, flight: id)
            }
            let failed = answer.status.code >= 500 && answer.fields[.xCache] != "STALE"
            let shared = failed ? Self.shareable(answer) : answer
            self.answer(waiters, with: { $0 == leader ? .answer(answer) : (failed ? .failed(shared) : .readAgain) })
        }
        Task {
            if stale != nil {
                finish(await self.fetch(head, key: key, stale: stale, staleTier: tier, store: true))
            } else {
                // The flight ends as soon as the upstream answered (the memory tier has what was
                // stored); the fleet lock is let go once the shared tier has it too.
                finish(await self.fetchInLockTurn(key, head: head, deliver: finish))
            }
        }
    }

    /// A miss's upstream request, in the key's turn of the fleet lock (the library's
    /// `FleetLockTurn`, as `coalescedAcrossProcesses` takes it): the node that holds the lock
    /// fetches; the others read the shared tier for what it stores, up to the lock timeout. A node
    /// alone, or one whose shared tier is down, fetches at once.
    ///
    /// The holder lets go of the lock only once its write reached the shared tier (up to the lock
    /// timeout): the writes go there in the background, and the next holder must read what this
    /// one stored, not fetch it again. Its own client is answered (`deliver`) before that.
    private func fetchInLockTurn(_ key: String, head: HTTPRequest, deliver: @escaping @Sendable (Answer) -> Void) async -> Answer {
        guard let lock, !cache.sharedTierIsDown else { return await fetch(head, key: key, stale: nil, store: true) }
        let turn = FleetLockTurn(lock: lock, clock: ContinuousClock(), timeout: settings.lockTimeout, pollInterval: settings.pollInterval)
        let cache = cache
        do {
            return try await turn.run(
                key, readBack: { await self.sharedFreshAnswer(key, to: head) },
                work: {
                    let answer = await self.fetch(head, key: key, stale: nil, store: true)
                    deliver(answer)
                    _ = await raceAgainstDeadline(clock: ContinuousClock(), duration: self.settings.lockTimeout) {
                        try await cache.waitUntilSent(key)
                    }
                    return answer
                },
                event: { event in
                    switch event {
                    case .lockUnavailable: self.metrics.count { $0.lockUnavailable += 1 }
                    case .waiting: self.metrics.count { $0.lockWaits += 1 }
                    case .acquiredAtOnce, .waited(_, .acquired): self.metrics.count { $0.lockAcquired += 1 }
                    case .waited(_, .timedOut): self.metrics.count { $0.lockWaitTimeouts += 1 }
                    case .waited(_, .filledByHolder): self.metrics.count { $0.hits["shared", default: 0] += 1 }
                    }
                })
        } catch {
            // Only cancellation: the flight's task is never cancelled, so this is a shutdown.
            return Answer(status: .serviceUnavailable, fields: [:], body: Data("cancelled\n".utf8))
        }
    }

    /// One background revalidation per key, started by a hit near the end of its lifetime: a
    /// flight no request waits for. A stale request for the key that comes while it runs joins it.
    private func refreshAhead(_ key: String, entry: CacheEntry<StoredResponse>, head: HTTPRequest) {
        let started = flights.withLock { state -> UInt64? in
            let waiter = state.machine.nextWaiter()
            switch state.machine.arrived(key, waiter: waiter, hasCopy: true) {
            case .start(let id):
                _ = state.machine.withdrawn(key, flight: id, waiter: waiter)
                return id
            case .join(let id):
                _ = state.machine.withdrawn(key, flight: id, waiter: waiter)
                return nil
            case .answerCopy:
                return nil
            }
        }
        guard let started else { return }
        metrics.count { $0.refreshAhead += 1 }
        startFlight(started, key: key, head: head, stale: entry, tier: "memory", leader: nil)
    }

    /// Whether `entry` may be served stale now (the upstream failed, or is slower than the soft
    /// timeout): it allows it, and it is within ``Settings/maxStale`` past its lifetime (or its own
    /// RFC 5861 `stale-if-error` window, when longer), counted from its store time.
    private func mayServeStale(_ entry: CacheEntry<StoredResponse>) -> Bool {
        guard entry.value.mayServeStale else { return false }
        let lifetime = entry.validators.maxAge ?? .zero
        let age = SharedCachePolicy.currentAge(initialAge: entry.value.initialAge, responseTime: entry.storedAt, now: Date())
        let window = max(settings.maxStale, .milliseconds(Int64((entry.value.staleIfErrorSeconds ?? 0) * 1000)))
        return age - lifetime <= window
    }

    /// The shared tier's stored response for `key`, when it may answer `head` fresh: what a node
    /// waiting for another's fetch (or holding the lock after it) reads.
    private func sharedFreshAnswer(_ key: String, to head: HTTPRequest) async -> Answer? {
        // Through the tiered store: what another node stored is kept in this node's memory too.
        guard let entry = await lookup(key, for: head) else { return nil }
        return freshAnswer(entry, to: head, cache: "HIT")
    }

    /// The answer from `entry` when it is fresh for `head` (or, given `since`, was stored or
    /// validated at or after it: after the request came, which is what `no-cache` and `max-age=0`
    /// ask for), else `nil`.
    private func freshAnswer(
        _ entry: CacheEntry<StoredResponse>, to head: HTTPRequest, cache status: String, orStoredSince since: Date? = nil
    ) -> Answer? {
        let age = SharedCachePolicy.currentAge(initialAge: entry.value.initialAge, responseTime: entry.storedAt, now: Date())
        let lifetime = entry.validators.maxAge ?? .zero
        let validatedSince = since.map { entry.storedAt >= $0 && lifetime > .zero } ?? false
        guard validatedSince || SharedCachePolicy.isFresh(lifetime: lifetime, age: age, request: SharedCacheDirectives(head.headerFields)) else {
            return nil
        }
        return answer(entry, age: age, cache: status, tier: "shared", to: head)
    }

    // MARK: The upstream

    /// Fetches `head` from the upstream (conditionally when `stale` has validators), stores what
    /// RFC 9111 allows when `store`, and answers; a failure is answered from `stale` when it may be
    /// served stale.
    private func fetch(
        _ head: HTTPRequest, key: String, stale: CacheEntry<StoredResponse>?, staleTier: String = "shared", store: Bool
    ) async -> Answer {
        var outgoing = upstreamRequest(head, method: .get, dropConditionals: true)
        if let stale {
            let fields = stale.value.headerFields
            if let etag = fields[.eTag] { outgoing.headerFields[.ifNoneMatch] = etag }
            if let modified = fields[.lastModified] { outgoing.headerFields[.ifModifiedSince] = modified }
        }
        let requestTime = Date()
        metrics.count { $0.upstreamRequests += 1 }
        let reply: HTTPReply
        do {
            reply = try await transport.send(
                outgoing, body: nil, options: HTTPRequestOptions(timeout: settings.hardTimeout, maxBodyBytes: settings.maxBodyBytes))
        } catch HTTPError.bodyTooLarge {
            // Too large to cache: passed through as it streams, never a 502; the stored response it
            // replaces no longer describes the resource.
            if store, (try? await cache.retrieve(key)) != nil { try? await cache.delete(key) }
            return await streamTooLarge(outgoing)
        } catch {
            metrics.count { $0.upstreamFailures += 1 }
            logger.warning("the upstream did not answer", metadata: ["key": "\(Redaction.redactingSecrets(inPath: key))", "error": "\(error)"])
            if let stale, mayServeStale(stale) { return serveStale(stale, tier: staleTier, to: head) }
            return Answer(status: .badGateway, fields: [.contentType: "text/plain; charset=utf-8"],
                          body: Data("strata proxy: the upstream did not answer (\(error))\n".utf8))
        }
        let responseTime = Date()
        if reply.status.code >= 500 {
            metrics.count { $0.upstreamFailures += 1 }
            if let stale, mayServeStale(stale) { return serveStale(stale, tier: staleTier, to: head) }
        }
        if let stale, reply.status == .notModified {
            let merged = HTTPResponse(
                status: HTTPResponse.Status(code: stale.value.status),
                headerFields: SharedCachePolicy.freshened(stale.value.headerFields, by: reply.headerFields))
            metrics.count { $0.revalidations["not_modified", default: 0] += 1 }
            return await keep(merged, body: stale.value.body, head: head, key: key, requestTime: requestTime,
                              responseTime: responseTime, store: store, cache: "REVALIDATED")
        }
        if stale != nil { metrics.count { $0.revalidations["changed", default: 0] += 1 } }
        let response = HTTPResponse(status: reply.status, headerFields: HopByHop.removing(from: reply.headerFields))
        return await keep(response, body: reply.body, head: head, key: key, requestTime: requestTime,
                          responseTime: responseTime, store: store, cache: stale == nil ? "MISS" : "EXPIRED")
    }

    /// Stores `response` when RFC 9111 allows it (or removes the stored one it replaces), and answers.
    private func keep(
        _ response: HTTPResponse, body: Data, head: HTTPRequest, key: String, requestTime: Date, responseTime: Date,
        store: Bool, cache status: String
    ) async -> Answer {
        var asGet = head
        asGet.method = .get
        let age = SharedCachePolicy.initialAge(response: response, requestTime: requestTime, responseTime: responseTime)
        // Judged by the targeted field (RFC 9213) when it has one; the client gets the origin's fields.
        let judged = SharedCachePolicy.targeted(response, targets: settings.targetedFields)
        switch store ? SharedCachePolicy.storability(request: asGet, response: judged, responseTime: responseTime)
                     : .doNotStore(reason: "the request has no-store") {
        case .store(let plan):
            // A cookie is one client's: the stored copy never hands it to the next.
            var kept = response.headerFields
            kept[.setCookie] = nil
            let stored = StoredResponse(
                status: response.status.code, headerFields: kept, body: body,
                varyValues: SharedCachePolicy.varyValues(names: plan.varyFieldNames, request: selecting(head)), tags: plan.tags,
                initialAgeSeconds: Double(age.components.seconds) + Double(age.components.attoseconds) / 1e18,
                mayServeStale: plan.mayServeStale, staleWhileRevalidate: plan.staleWhileRevalidate, staleIfError: plan.staleIfError)
            let validators = CacheValidators(
                etag: response.headerFields[.eTag], lastModified: response.headerFields[.lastModified], maxAge: plan.lifetime)
            do {
                if plan.varyFieldNames.isEmpty {
                    try await cache.insert(CacheEntry(value: stored, storedAt: responseTime, validators: validators), for: key)
                } else {
                    try await storeVariant(stored, names: plan.varyFieldNames, storedAt: responseTime, validators: validators, key: key)
                }
                metrics.count {
                    $0.stored += 1
                    $0.notificationsSent += 1
                }
            } catch {
                logger.warning("the response could not be stored", metadata: ["key": "\(Redaction.redactingSecrets(inPath: key))", "error": "\(error)"])
            }
            var live = stored
            live.headerFields = response.headerFields   // this client's answer keeps its cookie
            return answer(CacheEntry(value: live, storedAt: responseTime, validators: validators), age: age, cache: status, tier: "upstream", to: head)
        case .doNotStore(let reason):
            metrics.count { $0.notStored += 1 }
            if store, (200..<300).contains(response.status.code) || response.status.code == 404,
               !Self.carriesCredentials(head), Self.refusesEveryRequest(judged, responseTime: responseTime, path: head.path) {
                // What was stored for the key no longer describes the resource. A refusal that is
                // this request's alone (its Authorization, its no-store) says nothing of it.
                if (try? await cache.retrieve(key)) != nil {
                    try? await cache.delete(key)
                    metrics.count { $0.notificationsSent += 1 }
                }
            }
            logger.debug("not stored", metadata: ["key": "\(Redaction.redactingSecrets(inPath: key))", "reason": "\(reason)"])
            var fields = response.headerFields
            fields[.xCache] = status == "EXPIRED" ? "EXPIRED" : (store ? "MISS" : "BYPASS")
            fields[.xStrataNode] = settings.node
            fields[.xCacheTier] = "upstream"
            return conditional(Answer(status: response.status, fields: fields, body: body), to: head)
        }
    }

    /// Stores a response that varies as one variant of `key`, and the target's index of variants
    /// with it first; past ``Settings/maxVariants`` the least recently stored variant goes.
    private func storeVariant(
        _ stored: StoredResponse, names: [String], storedAt: Date, validators: CacheValidators, key: String
    ) async throws {
        let digest = Self.variantDigest(stored.varyValues)
        try await cache.insert(CacheEntry(value: stored, storedAt: storedAt, validators: validators), for: Self.variantKey(key, digest: digest))
        var digests = [digest]
        if let index = try? await cache.retrieve(key), index.value.variantNames == names {
            digests += index.value.variantDigests.filter { $0 != digest }
        }
        let evicted = digests.count > settings.maxVariants ? Array(digests[settings.maxVariants...]) : []
        digests = Array(digests.prefix(settings.maxVariants))
        try await cache.insert(
            CacheEntry(value: .variantIndex(names: names, digests: digests), storedAt: storedAt, validators: CacheValidators(maxAge: validators.maxAge)),
            for: key)
        for old in evicted { try? await cache.delete(Self.variantKey(key, digest: old)) }
    }

    /// Whether the cache would refuse `response` to any request: judged for a plain GET of `path`,
    /// with no credentials and no directives of its own.
    /// `private` is not among them: an origin may answer one client `private` (its session) and
    /// the others a shared response.
    static func refusesEveryRequest(_ response: HTTPResponse, responseTime: Date, path: String?) -> Bool {
        if SharedCacheDirectives(response.headerFields).isPrivate { return false }
        let plain = HTTPRequest(method: .get, scheme: "http", authority: "upstream", path: path ?? "/")
        if case .doNotStore = SharedCachePolicy.storability(request: plain, response: response, responseTime: responseTime) {
            return true
        }
        return false
    }

    /// Whether `head` carries a client's credentials: what the upstream answers it may be that
    /// client's alone, and says nothing of what others get.
    static func carriesCredentials(_ head: HTTPRequest) -> Bool {
        head.headerFields[.cookie] != nil || head.headerFields[.authorization] != nil
    }

    /// Sends `request` to the upstream again and streams its answer to the client as it arrives:
    /// a response larger than the cacheable maximum (``Settings/maxBodyBytes``) is never held
    /// whole in memory, and never stored.
    private func streamTooLarge(_ request: HTTPRequest) async -> Answer {
        metrics.count { $0.notStored += 1 }
        var outgoing = Self.clientRequest(request)
        outgoing.method = .GET
        do {
            let response = try await transport.client.execute(outgoing, timeout: Self.timeAmount(settings.hardTimeout))
            var fields = Self.fields(response.headers)
            let length = fields[.contentLength]
            fields = HopByHop.removing(from: fields)
            if let length { fields[.contentLength] = length }
            fields[.xCache] = "BYPASS"
            fields[.xCacheTier] = "upstream"
            fields[.xStrataNode] = settings.node
            return Answer(status: HTTPResponse.Status(code: Int(response.status.code)), fields: fields, body: Data(), streamed: response.body)
        } catch {
            metrics.count { $0.upstreamFailures += 1 }
            return Answer(status: .badGateway, fields: [.contentType: "text/plain; charset=utf-8"],
                          body: Data("strata proxy: the upstream did not answer (\(error))\n".utf8))
        }
    }

    private func serveStale(_ stale: CacheEntry<StoredResponse>, tier: String, to head: HTTPRequest) -> Answer {
        metrics.count { $0.staleServed[.upstreamError, default: 0] += 1 }
        let age = SharedCachePolicy.currentAge(initialAge: stale.value.initialAge, responseTime: stale.storedAt, now: Date())
        return answer(stale, age: age, cache: "STALE", tier: tier, to: head)
    }

    /// The request sent upstream for `head`: the upstream's scheme and authority, its base path
    /// before `head`'s path, hop-by-hop fields removed, `Via` added.
    private func upstreamRequest(_ head: HTTPRequest, method: HTTPRequest.Method, dropConditionals: Bool) -> HTTPRequest {
        let base = settings.upstream
        var authority = base.host ?? "127.0.0.1"
        if let port = base.port { authority += ":\(port)" }
        let prefix = base.path.hasSuffix("/") ? String(base.path.dropLast()) : base.path
        var dropped: Set<String> = dropConditionals ? ["if-none-match", "if-modified-since", "if-match", "if-unmodified-since", "if-range"] : []
        // A client's word on where a request came from is dropped unless the proxy is told to trust
        // it (behind a load balancer that sets it): a client cannot pose as another address.
        if !settings.trustForwardedFields { dropped.formUnion(Self.forwardingFieldNames) }
        var fields = HopByHop.removing(from: head.headerFields, also: dropped)
        fields.append(HTTPField(name: .via, value: "1.1 strata-\(settings.node)"))
        return HTTPRequest(method: method, scheme: base.scheme ?? "http", authority: authority, path: prefix + (head.path ?? "/"),
                           headerFields: fields)
    }

    /// The fields a client could use to say where a request came from.
    static let forwardingFieldNames: Set<String> = [
        "forwarded", "x-forwarded-for", "x-forwarded-host", "x-forwarded-proto", "x-forwarded-port", "x-real-ip",
        "true-client-ip", "x-client-ip", "x-cluster-client-ip", "cf-connecting-ip", "x-original-url", "x-rewrite-url",
    ]

    // MARK: Other methods

    /// Sends a request that is not a read to the upstream as it is; a success invalidates the
    /// stored responses of the paths it touched, across the fleet.
    private func passThrough(_ request: Request) async -> Answer {
        await forward(request, invalidating: true, cache: "PASS")
    }

    /// Sends `request` to the upstream as it is (its conditionals and `If-Range` included) and
    /// streams the answer back, marked `X-Cache: cache`; a success invalidates what the request
    /// touched when `invalidating` (RFC 9111 §4.4).
    private func forward(_ request: Request, invalidating: Bool, cache status: String) async -> Answer {
        let outgoing = upstreamRequest(request.head, method: request.head.method, dropConditionals: false)
        metrics.count { $0.upstreamRequests += 1 }
        var clientRequest = Self.clientRequest(outgoing)
        // The request body streams to the upstream as it arrives, the answer back the same way:
        // neither is held whole.
        if let stream = request.stream {
            clientRequest.body = stream
        } else if let body = request.body {
            clientRequest.body = .bytes(ByteBuffer(bytes: body))
        }
        let response: HTTPClientResponse
        do {
            response = try await transport.client.execute(clientRequest, timeout: Self.timeAmount(settings.hardTimeout))
        } catch {
            metrics.count { $0.upstreamFailures += 1 }
            return Answer(status: .badGateway, fields: [.contentType: "text/plain; charset=utf-8"],
                          body: Data("strata proxy: the upstream did not answer (\(error))\n".utf8))
        }
        let received = Self.fields(response.headers)
        let head = HTTPResponse(status: HTTPResponse.Status(code: Int(response.status.code)), headerFields: received)
        for target in invalidating ? SharedCachePolicy.invalidatedTargets(request: request.head, response: head) : [] {
            do {
                try await cache.delete(Self.key(path: target))
                metrics.count {
                    $0.invalidations["unsafe_method", default: 0] += 1
                    $0.notificationsSent += 1
                }
            } catch {
                logger.warning("a stored response the request changed could not be removed",
                               metadata: ["path": "\(Redaction.redactingSecrets(inPath: target))", "error": "\(error)"])
            }
        }
        var fields = HopByHop.removing(from: received)
        if let length = received[.contentLength] { fields[.contentLength] = length }
        fields[.xCache] = status
        fields[.xStrataNode] = settings.node
        return Answer(status: head.status, fields: fields, body: Data(), streamed: response.body)
    }

    /// `head` as AsyncHTTPClient sends it (any method, extension methods included).
    static func clientRequest(_ head: HTTPRequest) -> HTTPClientRequest {
        var request = HTTPClientRequest(url: "\(head.scheme ?? "http")://\(head.authority ?? "127.0.0.1")\(head.path ?? "/")")
        request.method = HTTPMethod(rawValue: head.method.rawValue)
        for field in head.headerFields { request.headers.add(name: field.name.rawName, value: field.value) }
        return request
    }

    /// AsyncHTTPClient's header fields as swift-http-types'; a name that is not a valid token is dropped.
    static func fields(_ headers: HTTPHeaders) -> HTTPFields {
        var fields = HTTPFields()
        for header in headers {
            if let name = HTTPField.Name(header.name) { fields.append(HTTPField(name: name, value: header.value)) }
        }
        return fields
    }

    static func timeAmount(_ duration: Duration) -> TimeAmount {
        .nanoseconds(duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000)
    }

    // MARK: Answers

    /// The answer from a stored response aged `age`: `Age`, `X-Cache`, the node, and a `304` when
    /// the client's conditional request matches.
    private func answer(_ entry: CacheEntry<StoredResponse>, age: Duration, cache status: String, tier: String, to head: HTTPRequest) -> Answer {
        var fields = entry.value.headerFields
        fields[.age] = "\(max(0, age.components.seconds))"
        fields[.xCache] = status
        fields[.xCacheTier] = tier
        fields[.xStrataNode] = settings.node
        return conditional(
            Answer(status: HTTPResponse.Status(code: entry.value.status), fields: fields, body: entry.value.body), to: head)
    }

    /// `answer`, or a `304 Not Modified` when it is a `200` and the client's conditional request
    /// matches its validators (RFC 9110 §13.1).
    private func conditional(_ answer: Answer, to head: HTTPRequest) -> Answer {
        guard answer.status == .ok,
              SharedCachePolicy.notModified(request: head, etag: answer.fields[.eTag], lastModified: answer.fields[.lastModified])
        else { return answer }
        var fields = answer.fields
        fields[.contentType] = nil
        fields[.contentEncoding] = nil
        return Answer(status: .notModified, fields: fields, body: Data())
    }

    private func gatewayTimeout(_ reason: String) -> Answer {
        Answer(status: .gatewayTimeout, fields: [.contentType: "text/plain; charset=utf-8", .xStrataNode: settings.node],
               body: Data("strata proxy: \(reason)\n".utf8))
    }

    // MARK: Flights

    /// Joins `key`'s flight, or starts one with `start` (given the flight and this request's
    /// waiter), and waits for its outcome for this request; a cancelled request stops waiting at
    /// once, never the flight. Joining and registering the wait are one step under the lock, so
    /// no answer is lost.
    private func joinFlight(
        _ key: String, hasCopy: Bool, start: @escaping @Sendable (_ flight: UInt64, _ leader: UInt64) -> Void
    ) async -> FlightOutcome {
        let waiter = flights.withLock { $0.machine.nextWaiter() }
        struct Registration: Sendable {
            var flight: UInt64?
            var cancelled = false
        }
        let registration = Locked(Registration())
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<FlightOutcome, Never>) in
                let arrival = flights.withLock { state -> ServingStaleAfterFlights<String>.Arrival in
                    let arrival = state.machine.arrived(key, waiter: waiter, hasCopy: hasCopy)
                    if arrival != .answerCopy { state.waiters[waiter] = continuation }
                    if case .start(let id) = arrival { state.leaders[id] = waiter }
                    return arrival
                }
                let flight: UInt64
                switch arrival {
                case .answerCopy:
                    continuation.resume(returning: .copy)
                    return
                case .join(let id):
                    flight = id
                case .start(let id):
                    flight = id
                    start(id, waiter)
                }
                let cancelled = registration.withLock { registration in
                    registration.flight = flight
                    return registration.cancelled
                }
                if cancelled { withdraw(key, flight: flight, waiter: waiter) }
            }
        } onCancel: {
            let flight = registration.withLock { registration in
                registration.cancelled = true
                return registration.flight
            }
            if let flight { withdraw(key, flight: flight, waiter: waiter) }
        }
    }

    private func withdraw(_ key: String, flight: UInt64, waiter: UInt64) {
        let continuation = flights.withLock { state -> CheckedContinuation<FlightOutcome, Never>? in
            guard state.machine.withdrawn(key, flight: flight, waiter: waiter) else { return nil }
            return state.waiters.removeValue(forKey: waiter)
        }
        continuation?.resume(returning: .cancelled)
    }

    /// Answers `waiters` (whose continuations are still registered) with what `outcome` gives each.
    private func answer(_ waiters: [UInt64], with outcome: (UInt64) -> FlightOutcome) {
        let continuations = flights.withLock { state in
            waiters.compactMap { waiter in state.waiters.removeValue(forKey: waiter).map { (waiter, $0) } }
        }
        for (waiter, continuation) in continuations { continuation.resume(returning: outcome(waiter)) }
    }

}

extension HTTPField.Name {
    static let xCache = HTTPField.Name("X-Cache")!
    static let xCacheTier = HTTPField.Name("X-Cache-Tier")!
    static let xStrataNode = HTTPField.Name("X-Strata-Node")!
}
