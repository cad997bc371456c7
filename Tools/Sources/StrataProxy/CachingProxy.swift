import AsyncHTTPClient
import Foundation
import Logging
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
    typealias Cache = TieredStore<MemoryStore<String, StoredResponse>, PostgresStore<StoredResponse>>

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
        /// When set, `/_strata/` actions other than `health` need `Authorization: Bearer <token>`.
        var adminToken: String?
    }

    /// A request as the server hands it over.
    struct Request: Sendable {
        var head: HTTPRequest
        var body: Data?
    }

    /// An answer to send back.
    struct Answer: Sendable {
        var status: HTTPResponse.Status
        var fields: HTTPFields
        var body: Data
    }

    let settings: Settings
    let cache: Cache
    let lock: PostgresFleetLock
    let transport: AsyncHTTPTransport
    let metrics = ProxyMetrics()
    let logger: Logger
    private let flights = Locked(Flights())

    private struct Flights: Sendable {
        var machine = MissFlights()
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
        /// Keys with a background revalidation running (refresh ahead, or past a soft timeout).
        var background: Set<String> = []
    }

    init(settings: Settings, cache: Cache, lock: PostgresFleetLock, transport: AsyncHTTPTransport, logger: Logger) {
        self.settings = settings
        self.cache = cache
        self.lock = lock
        self.transport = transport
        self.logger = logger
    }

    /// Answers one request.
    func handle(_ request: Request) async -> Answer {
        let path = request.head.path ?? "/"
        if path == "/_strata" || path.hasPrefix("/_strata/") {
            metrics.count { $0.requests["admin", default: 0] += 1 }
            return await admin(request, path: path)
        }
        switch request.head.method {
        case .get, .head:
            metrics.count { $0.requests["read", default: 0] += 1 }
            let answer = await read(request.head)
            guard request.head.method == .head else { return answer }
            var fields = answer.fields
            if answer.status != .notModified { fields[.contentLength] = "\(answer.body.count)" }
            return Answer(status: answer.status, fields: fields, body: Data())
        default:
            metrics.count { $0.requests["write", default: 0] += 1 }
            return await passThrough(request)
        }
    }

    // MARK: Reads

    /// The cache key of a read: the method a stored response answers and the path with its query.
    static func key(path: String) -> String { "GET " + path }

    private func read(_ head: HTTPRequest) async -> Answer {
        let path = head.path ?? "/"
        let key = Self.key(path: path)
        let directives = SharedCacheDirectives(head.headerFields)
        if directives.noStore {
            // RFC 9111 §5.2.1.5: nothing of this exchange is stored.
            return await fetch(head, key: key, stale: nil, store: false)
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
            if directives.onlyIfCached { return gatewayTimeout("only-if-cached, and the stored response is stale") }
            return await revalidate(key, entry: entry, tier: inMemory ? "memory" : "shared", head: head)
        }
        if directives.onlyIfCached { return gatewayTimeout("only-if-cached, and nothing is stored") }
        metrics.count { $0.misses += 1 }
        return await fill(key, head: head)
    }

    /// The stored response for `key` that may answer `head` (its `Vary` fields match), or `nil`.
    /// A shared tier that is down is a miss here: the upstream answers.
    private func lookup(_ key: String, for head: HTTPRequest, known: Cached<StoredResponse>? = nil) async -> Cached<StoredResponse>? {
        var found = known
        if found == nil { found = try? await cache.retrieve(key) }
        guard let entry = found else { return nil }
        guard SharedCachePolicy.matchesVary(storedRequestValues: entry.value.varyValues, request: head) else { return nil }
        return entry
    }

    /// A miss: one request of this node fetches; within the fleet, the node that holds the key's
    /// lock fetches and the others wait for what it stores.
    private func fill(_ key: String, head: HTTPRequest) async -> Answer {
        switch await joinFlight(key) {
        case .followed:
            metrics.count { $0.coalesced += 1 }
            if let entry = await lookup(key, for: head), let answer = freshAnswer(entry, to: head, cache: "HIT") { return answer }
            return await fetch(head, key: key, stale: nil, store: true)
        case .leading:
            defer { leaveFlight(key) }
            var hold: PostgresFleetLock.Hold?
            do {
                hold = try await lock.tryLock(key)
            } catch {
                metrics.count { $0.lockUnavailable += 1 }
                return await fetch(head, key: key, stale: nil, store: true)
            }
            if hold == nil {
                metrics.count { $0.lockWaits += 1 }
                let deadline = ContinuousClock.now.advanced(by: settings.lockTimeout)
                while hold == nil {
                    if ContinuousClock.now >= deadline {
                        metrics.count { $0.lockWaitTimeouts += 1 }
                        break
                    }
                    do {
                        try await Task.sleep(for: settings.pollInterval)
                    } catch {
                        return Answer(status: .serviceUnavailable, fields: [:], body: Data("cancelled\n".utf8))
                    }
                    if let answer = await sharedFreshAnswer(key, to: head) {
                        metrics.count { $0.hits["shared", default: 0] += 1 }
                        return answer
                    }
                    hold = try? await lock.tryLock(key)
                }
            }
            if let hold {
                metrics.count { $0.lockAcquired += 1 }
                // Another node may have stored it while this one asked.
                let answer: Answer
                if let stored = await sharedFreshAnswer(key, to: head) {
                    answer = stored
                } else {
                    answer = await fetch(head, key: key, stale: nil, store: true)
                }
                await lock.unlock(hold)
                return answer
            }
            return await fetch(head, key: key, stale: nil, store: true)
        }
    }

    /// A stale stored response: a conditional request to the upstream, answered stale when the
    /// upstream fails or takes longer than the soft timeout.
    private func revalidate(_ key: String, entry: Cached<StoredResponse>, tier: String, head: HTTPRequest) async -> Answer {
        switch await joinFlight(key) {
        case .followed:
            metrics.count { $0.coalesced += 1 }
            if let fresh = await lookup(key, for: head), let answer = freshAnswer(fresh, to: head, cache: "HIT") { return answer }
            return await fetch(head, key: key, stale: entry, staleTier: tier, store: true)
        case .leading:
            defer { leaveFlight(key) }
            guard let softTimeout = settings.softTimeout, mayServeStale(entry) else {
                return await fetch(head, key: key, stale: entry, staleTier: tier, store: true)
            }
            // The fetch runs in a task of its own: past the soft timeout it goes on and stores.
            let work = Task { await self.fetch(head, key: key, stale: entry, staleTier: tier, store: true) }
            // The first of the fetch and the soft timeout answers; the fetch is not cancelled by
            // losing (racing its task's value leaves the task running).
            if case .value(.success(let answer)) = await raceAgainstDeadline(
                clock: ContinuousClock(), duration: softTimeout, { await work.value }) {
                return answer
            }
            metrics.count { $0.staleServed[.softTimeout, default: 0] += 1 }
            let age = SharedCachePolicy.currentAge(initialAge: entry.value.initialAge, responseTime: entry.storedAt, now: Date())
            return answer(entry, age: age, cache: "STALE", tier: tier, to: head)
        }
    }

    /// One background revalidation per key, started by a hit near the end of its lifetime.
    private func refreshAhead(_ key: String, entry: Cached<StoredResponse>, head: HTTPRequest) {
        let starts = flights.withLock { $0.background.insert(key).inserted }
        guard starts else { return }
        metrics.count { $0.refreshAhead += 1 }
        Task {
            _ = await self.fetch(head, key: key, stale: entry, store: true)
            self.flights.withLock { _ = $0.background.remove(key) }
        }
    }

    /// Whether `entry` may be served stale now: it allows it, and it is within ``Settings/maxStale``
    /// past its lifetime, counted from its store time.
    private func mayServeStale(_ entry: Cached<StoredResponse>) -> Bool {
        guard entry.value.mayServeStale else { return false }
        let lifetime = entry.validators.maxAge ?? .zero
        let age = SharedCachePolicy.currentAge(initialAge: entry.value.initialAge, responseTime: entry.storedAt, now: Date())
        return age - lifetime <= settings.maxStale
    }

    /// The shared tier's stored response for `key`, when it may answer `head` fresh: what a node
    /// waiting for another's fetch (or holding the lock after it) reads.
    private func sharedFreshAnswer(_ key: String, to head: HTTPRequest) async -> Answer? {
        guard let entry = try? await cache.shared.retrieve(key),
              SharedCachePolicy.matchesVary(storedRequestValues: entry.value.varyValues, request: head) else { return nil }
        return freshAnswer(entry, to: head, cache: "HIT")
    }

    /// The answer from `entry` when it is fresh for `head`, else `nil`.
    private func freshAnswer(_ entry: Cached<StoredResponse>, to head: HTTPRequest, cache status: String) -> Answer? {
        let age = SharedCachePolicy.currentAge(initialAge: entry.value.initialAge, responseTime: entry.storedAt, now: Date())
        let lifetime = entry.validators.maxAge ?? .zero
        guard SharedCachePolicy.isFresh(lifetime: lifetime, age: age, request: SharedCacheDirectives(head.headerFields)) else {
            return nil
        }
        return answer(entry, age: age, cache: status, tier: "shared", to: head)
    }

    // MARK: The upstream

    /// Fetches `head` from the upstream (conditionally when `stale` has validators), stores what
    /// RFC 9111 allows when `store`, and answers; a failure is answered from `stale` when it may be
    /// served stale.
    private func fetch(
        _ head: HTTPRequest, key: String, stale: Cached<StoredResponse>?, staleTier: String = "shared", store: Bool
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
        } catch {
            metrics.count { $0.upstreamFailures += 1 }
            logger.warning("the upstream did not answer", metadata: ["key": "\(key)", "error": "\(error)"])
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
            // RFC 9111 §4.3.4: the stored response, its header fields updated from the 304.
            var fields = stale.value.headerFields
            for field in HopByHop.removing(from: reply.headerFields) where field.name != .contentLength {
                fields[field.name] = nil
            }
            for field in HopByHop.removing(from: reply.headerFields) { fields.append(field) }
            let merged = HTTPResponse(status: HTTPResponse.Status(code: stale.value.status), headerFields: fields)
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
        switch store ? SharedCachePolicy.storability(request: asGet, response: response, responseTime: responseTime)
                     : .doNotStore(reason: "the request has no-store") {
        case .store(let plan):
            // A cookie is one client's: the stored copy never hands it to the next.
            var kept = response.headerFields
            kept[.setCookie] = nil
            let stored = StoredResponse(
                status: response.status.code, headerFields: kept, body: body,
                varyValues: SharedCachePolicy.varyValues(names: plan.varyFieldNames, request: head), tags: plan.tags,
                initialAgeSeconds: Double(age.components.seconds) + Double(age.components.attoseconds) / 1e18,
                mayServeStale: plan.mayServeStale)
            let validators = CacheValidators(
                etag: response.headerFields[.eTag], lastModified: response.headerFields[.lastModified], maxAge: plan.lifetime)
            do {
                try await cache.insert(Cached(value: stored, storedAt: responseTime, validators: validators), for: key)
                metrics.count {
                    $0.stored += 1
                    $0.notificationsSent += 1
                }
            } catch {
                logger.warning("the response could not be stored", metadata: ["key": "\(key)", "error": "\(error)"])
            }
            var live = stored
            live.headerFields = response.headerFields   // this client's answer keeps its cookie
            return answer(Cached(value: live, storedAt: responseTime, validators: validators), age: age, cache: status, tier: "upstream", to: head)
        case .doNotStore(let reason):
            metrics.count { $0.notStored += 1 }
            if store, (200..<300).contains(response.status.code) || response.status.code == 404 {
                // What was stored for the key no longer describes the resource.
                if (try? await cache.retrieve(key)) != nil {
                    try? await cache.delete(key)
                    metrics.count { $0.notificationsSent += 1 }
                }
            }
            logger.debug("not stored", metadata: ["key": "\(key)", "reason": "\(reason)"])
            var fields = response.headerFields
            fields[.xCache] = status == "EXPIRED" ? "EXPIRED" : (store ? "MISS" : "BYPASS")
            fields[.xStrataNode] = settings.node
            fields[.xCacheTier] = "upstream"
            return conditional(Answer(status: response.status, fields: fields, body: body), to: head)
        }
    }

    private func serveStale(_ stale: Cached<StoredResponse>, tier: String, to head: HTTPRequest) -> Answer {
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
        var fields = HopByHop.removing(
            from: head.headerFields,
            also: dropConditionals ? ["if-none-match", "if-modified-since", "if-match", "if-unmodified-since", "if-range"] : [])
        fields.append(HTTPField(name: .via, value: "1.1 strata-\(settings.node)"))
        return HTTPRequest(method: method, scheme: base.scheme ?? "http", authority: authority, path: prefix + (head.path ?? "/"),
                           headerFields: fields)
    }

    // MARK: Other methods

    /// Sends a request that is not a read to the upstream as it is; a success invalidates the
    /// stored responses of the paths it touched, across the fleet.
    private func passThrough(_ request: Request) async -> Answer {
        let outgoing = upstreamRequest(request.head, method: request.head.method, dropConditionals: false)
        metrics.count { $0.upstreamRequests += 1 }
        let reply: HTTPReply
        do {
            reply = try await transport.send(
                outgoing, body: request.body,
                options: HTTPRequestOptions(timeout: settings.hardTimeout, maxBodyBytes: settings.maxBodyBytes))
        } catch {
            metrics.count { $0.upstreamFailures += 1 }
            return Answer(status: .badGateway, fields: [.contentType: "text/plain; charset=utf-8"],
                          body: Data("strata proxy: the upstream did not answer (\(error))\n".utf8))
        }
        for target in SharedCachePolicy.invalidatedTargets(request: request.head, response: reply.response) {
            do {
                try await cache.delete(Self.key(path: target))
                metrics.count {
                    $0.invalidations["unsafe_method", default: 0] += 1
                    $0.notificationsSent += 1
                }
            } catch {
                logger.warning("a stored response the request changed could not be removed",
                               metadata: ["path": "\(target)", "error": "\(error)"])
            }
        }
        var fields = HopByHop.removing(from: reply.headerFields)
        fields[.xCache] = "PASS"
        fields[.xStrataNode] = settings.node
        return Answer(status: reply.status, fields: fields, body: reply.body)
    }

    // MARK: Answers

    /// The answer from a stored response aged `age`: `Age`, `X-Cache`, the node, and a `304` when
    /// the client's conditional request matches.
    private func answer(_ entry: Cached<StoredResponse>, age: Duration, cache status: String, tier: String, to head: HTTPRequest) -> Answer {
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

    private enum FlightRole { case leading, followed }

    /// Leads the fetch of `key`, or waits until its leader finished (or this request is cancelled).
    /// Joining and registering the wait are one step under the lock, so no wake-up is lost.
    private func joinFlight(_ key: String) async -> FlightRole {
        struct Ticket: Sendable {
            var id: Int?
            var cancelled = false
            var leads = false
        }
        let ticket = Locked(Ticket())
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = flights.withLock { state -> Bool in
                    switch state.machine.begin(key) {
                    case .lead:
                        ticket.withLock { $0.leads = true }
                        return true
                    case .follow(let id):
                        let cancelled = ticket.withLock { ticket -> Bool in
                            ticket.id = id
                            return ticket.cancelled
                        }
                        if cancelled {
                            _ = state.machine.abandon(id, key: key)
                            return true
                        }
                        state.waiters[id] = continuation
                        return false
                    }
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let continuation = flights.withLock { state -> CheckedContinuation<Void, Never>? in
                let id = ticket.withLock { ticket -> Int? in
                    ticket.cancelled = true
                    return ticket.id
                }
                guard let id else { return nil }
                _ = state.machine.abandon(id, key: key)
                return state.waiters.removeValue(forKey: id)
            }
            continuation?.resume()
        }
        return ticket.withLock { $0.leads } ? .leading : .followed
    }

    private func leaveFlight(_ key: String) {
        let continuations = flights.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.machine.finish(key).compactMap { state.waiters.removeValue(forKey: $0) }
        }
        for continuation in continuations { continuation.resume() }
    }
}

extension HTTPField.Name {
    static let xCache = HTTPField.Name("X-Cache")!
    static let xCacheTier = HTTPField.Name("X-Cache-Tier")!
    static let xStrataNode = HTTPField.Name("X-Strata-Node")!
}
