import Foundation
import Logging
import MetricsTestKit
@testable @_spi(StrataInternals) import Strata
@testable import StrataOutbox
import StrataTesting
import Testing

/// An HTTP server in a closure: answers each request with what `respond` returns (or throws), and
/// records every request.
final class ScriptedServer: HTTPTransport, Sendable {
    typealias Respond = @Sendable (SentRequest, Int) throws -> HTTPReply
    private let state: Locked<(requests: [SentRequest], respond: Respond)>

    init(_ respond: @escaping Respond = { request, _ in HTTPReply(url: request.url, statusCode: 201) }) {
        state = Locked((requests: [], respond: respond))
    }

    var requests: [SentRequest] { state.withLock { $0.requests } }

    /// Replaces how it answers from now on.
    func answer(_ respond: @escaping Respond) { state.withLock { $0.respond = respond } }

    func send(_ request: HTTPRequest, body: Data?, options: HTTPRequestOptions) async throws -> HTTPReply {
        let sent = SentRequest(request: request, body: body, options: options)
        let (respond, index) = state.withLock { state in
            state.requests.append(sent)
            return (state.respond, state.requests.count - 1)
        }
        return try respond(sent, index)
    }

    static func unreachable(_ request: SentRequest) -> HTTPError {
        .transport(url: request.url, reason: "connection refused", underlying: POSIXError(.ECONNREFUSED))
    }

    /// No answer in time: the request may have reached the server.
    static func timedOut(_ request: SentRequest) -> HTTPError {
        .transport(url: request.url, reason: "timed out", underlying: POSIXError(.ETIMEDOUT))
    }
}

/// An outbox over real files, on a manual clock, with backoffs that take exactly their computed value.
struct OutboxFixture {
    let directory: TemporaryDirectory
    let clock = ManualClock()
    let server: ScriptedServer
    let logs = LogCapture()

    init(server: ScriptedServer = ScriptedServer()) throws {
        directory = try TemporaryDirectory(prefix: "strata-outbox")
        self.server = server
    }

    var storage: FileOutboxStorage { FileOutboxStorage(directory: directory.url) }

    func outbox(
        retention: OutboxRetention = OutboxRetention(), conflicts: OutboxConflictPolicy = .manual,
        refreshAuthorization: (@Sendable () async throws -> Void)? = nil,
        authorize: (@Sendable (inout HTTPRequest) async throws -> Void)? = nil
    ) -> Outbox {
        let outbox = Outbox(
            storage: storage, environment: clock.environment(logger: logs.logger),
            retry: OutboxRetryPolicy(initialDelay: .seconds(10), jitter: 0.5, random: { 0 }), retention: retention)
        outbox.registerHTTP(
            transport: server, conflicts: conflicts, authorize: authorize, refreshAuthorization: refreshAuthorization)
        return outbox
    }

    static let base = URL(string: "https://api.example.com")!

    static func post(_ path: String = "/posts", json: String = #"{"title":"t"}"#) -> (HTTPRequest, Data) {
        var request = HTTPRequest(method: .post, url: base.appendingPathComponent(path))
        request.headerFields[.contentType] = "application/json"
        return (request, Data(json.utf8))
    }
}

@Suite("Outbox: durable, once, in order", .timeLimit(.minutes(1)))
struct OutboxTests {
    @Test("a queued write is on disk when enqueue returns; a new process sends it with the same key")
    func relaunchSendsWhatAnEarlierProcessQueued() async throws {
        let fixture = try OutboxFixture()
        let (request, body) = OutboxFixture.post()
        let entry = try await {
            let first = fixture.outbox()
            first.connectivityChanged(isOnline: false)
            return try await first.enqueue(request, body: body)
        }()
        // Another instance over the same directory: what a relaunched app makes.
        let relaunched = fixture.outbox()
        #expect(try await relaunched.entries().map(\.id) == [entry.id])
        let report = try await relaunched.drain()
        #expect(report.delivered == 1)
        #expect(fixture.server.requests.count == 1)
        #expect(fixture.server.requests.first?.headers["Idempotency-Key"] == entry.idempotencyKey)
        #expect(fixture.server.requests.first?.body == body)
        #expect(try await fixture.storage.loadAll().isEmpty)
    }

    @Test("every attempt of one write carries the same Idempotency-Key; writes get different ones")
    func idempotencyKeyIsStablePerWrite() async throws {
        let server = ScriptedServer { request, index in
            // The first attempt's answer is lost; the server has applied it.
            if index == 0 { throw ScriptedServer.unreachable(request) }
            return HTTPReply(url: request.url, statusCode: 201)
        }
        let fixture = try OutboxFixture(server: server)
        let outbox = fixture.outbox()
        let (request, body) = OutboxFixture.post()
        let first = try await outbox.enqueue(request, body: body)
        let second = try await outbox.enqueue(request, body: body)
        #expect(try await outbox.drain().deferred == 1)
        fixture.clock.advance(by: .seconds(10))
        #expect(try await outbox.drain().delivered == 2)
        let keys = server.requests.map { $0.headers["Idempotency-Key"] }
        #expect(keys == [first.idempotencyKey, first.idempotencyKey, second.idempotencyKey])
        #expect(first.idempotencyKey != second.idempotencyKey)
    }

    @Test("ids are UUIDv7: version 7, variant 10, ordered by creation time")
    func idsAreVersion7() async throws {
        let fixture = try OutboxFixture()
        let outbox = fixture.outbox()
        outbox.connectivityChanged(isOnline: false)
        var ids: [UUID] = []
        for _ in 0..<3 {
            ids.append(try await outbox.enqueue(kind: "note", scope: "s", payload: Data()).id)
            fixture.clock.advance(by: .milliseconds(2))
        }
        for id in ids {
            #expect(id.uuid.6 >> 4 == 7)
            #expect(id.uuid.8 >> 6 == 0b10)
        }
        let millis = ids.map { id in
            withUnsafeBytes(of: id.uuid) { bytes in bytes.prefix(6).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } }
        }
        #expect(millis == millis.sorted())
        #expect(millis.first == UInt64(fixture.clock.startDate.timeIntervalSince1970 * 1000))
    }

    @Test("credentials are never written to the outbox; authorize adds them to each attempt")
    func credentialsAreNotStored() async throws {
        let fixture = try OutboxFixture()
        let outbox = fixture.outbox(authorize: { request in request.headerFields[.authorization] = "Bearer fresh" })
        var (request, body) = OutboxFixture.post()
        request.headerFields[.authorization] = "Bearer secret-token"
        request.headerFields[.cookie] = "session=secret-cookie"
        outbox.connectivityChanged(isOnline: false)
        try await outbox.enqueue(request, body: body)
        for name in try FileManager.default.contentsOfDirectory(atPath: fixture.directory.url.path) {
            let text = try String(contentsOf: fixture.directory.appending(name), encoding: .utf8)
            #expect(!text.contains("secret"))
        }
        outbox.connectivityChanged(isOnline: true)
        try await outbox.drain()
        #expect(fixture.server.requests.first?.headers["Authorization"] == "Bearer fresh")
        #expect(fixture.server.requests.first?.headers["Cookie"] == nil)
    }
}

@Suite("Outbox: failure classes", .timeLimit(.minutes(1)))
struct OutboxFailureTests {
    @Test("a 503 with Retry-After waits as long as asked, keeps the attempt count, then delivers")
    func serverErrorBacksOffHonouringRetryAfter() async throws {
        let server = ScriptedServer { request, index in
            index == 0 ? HTTPReply(url: request.url, statusCode: 503, headers: ["Retry-After": "120"]) : HTTPReply(url: request.url, statusCode: 201)
        }
        let fixture = try OutboxFixture(server: server)
        let outbox = fixture.outbox()
        let (request, body) = OutboxFixture.post()
        let entry = try await outbox.enqueue(request, body: body)
        #expect(try await outbox.drain().deferred == 1)
        let waiting = try #require(try await outbox.entry(entry.id))
        #expect(waiting.attempts == 1)
        #expect(waiting.lastFailure?.class == .transient)
        #expect(waiting.lastFailure?.status == 503)
        #expect(waiting.nextAttemptAt == fixture.clock.date.addingTimeInterval(120))
        // Persisted: a relaunch keeps the count and the wait.
        #expect(try await fixture.outbox().entry(entry.id) == waiting)

        fixture.clock.advance(by: .seconds(119))
        #expect(try await outbox.drain() == OutboxDrainReport())
        fixture.clock.advance(by: .seconds(1))
        #expect(try await outbox.drain().delivered == 1)
        #expect(server.requests.count == 2)
    }

    @Test("a 409 with Retry-After (the key's first request still in progress) waits and sends again; it is no conflict")
    func conflictWithRetryAfterIsRetried() async throws {
        let server = ScriptedServer { request, index in
            index == 0 ? HTTPReply(url: request.url, statusCode: 409, headers: ["Retry-After": "5"]) : HTTPReply(url: request.url, statusCode: 201)
        }
        let fixture = try OutboxFixture(server: server)
        let outbox = fixture.outbox()   // the manual conflict policy: a conflict would park it
        let (request, body) = OutboxFixture.post()
        let entry = try await outbox.enqueue(request, body: body)
        #expect(try await outbox.drain().deferred == 1)
        let waiting = try #require(try await outbox.entry(entry.id))
        #expect(waiting.lastFailure?.class == .transient)
        #expect(waiting.nextAttemptAt == fixture.clock.date.addingTimeInterval(10), "the backoff, as it is longer than Retry-After")
        fixture.clock.advance(by: .seconds(10))
        #expect(try await outbox.drain().delivered == 1)
        #expect(server.requests.map { $0.request.headerFields[HTTPField.Name("Idempotency-Key")!] } == [entry.idempotencyKey, entry.idempotencyKey])
    }

    @Test(
        "backoff grows exponentially, is capped, and jitter only shortens it",
        arguments: [(1, 0.0, 10.0), (2, 0.0, 20.0), (3, 0.0, 40.0), (20, 0.0, 300.0), (1, 0.999_999, 5.0), (3, 0.5, 30.0)])
    func backoff(attempt: Int, random: Double, seconds: Double) {
        let policy = OutboxRetryPolicy(initialDelay: .seconds(10), maxDelay: .seconds(300), jitter: 0.5, random: { random })
        let delay = policy.delay(afterAttempt: attempt, requested: nil)
        #expect(abs(Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18 - seconds) < 0.001)
    }

    @Test("offline, nothing is attempted; back online, a write that found no server goes at once")
    func offlinePausesAndOnlineResumes() async throws {
        let server = ScriptedServer { request, _ in throw ScriptedServer.unreachable(request) }
        let fixture = try OutboxFixture(server: server)
        let outbox = fixture.outbox()
        let (request, body) = OutboxFixture.post()
        let entry = try await outbox.enqueue(request, body: body)
        #expect(try await outbox.drain().deferred == 1)
        #expect(try await outbox.entry(entry.id)?.lastFailure?.class == .unreachable)

        outbox.connectivityChanged(isOnline: false)
        fixture.clock.advance(by: .seconds(3600))
        #expect(try await outbox.drain() == OutboxDrainReport())
        #expect(server.requests.count == 1)
        #expect(outbox.status.isOnline == false)

        server.answer { request, _ in HTTPReply(url: request.url, statusCode: 201) }
        outbox.connectivityChanged(isOnline: true)
        #expect(try await outbox.drain().delivered == 1)
        #expect(server.requests.count == 2)
    }

    @Test("a connectivity signal pauses and resumes delivery")
    func followsAConnectivitySignal() async throws {
        let fixture = try OutboxFixture()
        let outbox = fixture.outbox()
        let (signal, continuation) = AsyncStream.makeStream(of: Bool.self)
        let follower = Task { await outbox.follow(connectivity: signal) }
        var updates = outbox.statusUpdates().makeAsyncIterator()
        continuation.yield(false)
        while let status = await updates.next(), status.isOnline {}
        let (request, body) = OutboxFixture.post()
        try await outbox.enqueue(request, body: body)
        #expect(try await outbox.drain() == OutboxDrainReport())
        continuation.yield(true)
        while let status = await updates.next(), !status.isOnline {}
        #expect(try await outbox.drain().delivered == 1)
        continuation.finish()
        await follower.value
    }

    @Test("metrics: queued, delivered, failed attempts by class, parked by reason, and the gauges")
    func metricsCountWhatHappened() async throws {
        let server = ScriptedServer { request, index in
            switch index {
            case 0: throw ScriptedServer.unreachable(request)
            case 1: return HTTPReply(url: request.url, statusCode: 201)
            default: return HTTPReply(url: request.url, statusCode: 422)
            }
        }
        let fixture = try OutboxFixture(server: server)
        let metrics = TestMetrics()
        let outbox = Outbox(
            storage: fixture.storage, name: "posts", environment: fixture.clock.environment(),
            retry: OutboxRetryPolicy(initialDelay: .seconds(1), jitter: 0), metricsFactory: metrics)
        outbox.registerHTTP(transport: server)
        let (request, body) = OutboxFixture.post()
        try await outbox.enqueue(request, body: body, scope: "a")
        try await outbox.drain()
        fixture.clock.advance(by: .seconds(1))
        try await outbox.drain()
        try await outbox.enqueue(request, body: body, scope: "b")
        try await outbox.drain()
        let posts = ("outbox", "posts")
        #expect(try metrics.expectCounter("strata_outbox_enqueued_total", [posts]).totalValue == 2)
        #expect(try metrics.expectCounter("strata_outbox_delivered_total", [posts]).totalValue == 1)
        #expect(try metrics.expectCounter("strata_outbox_attempt_failures_total", [posts, ("class", "unreachable")]).totalValue == 1)
        #expect(try metrics.expectCounter("strata_outbox_attempt_failures_total", [posts, ("class", "permanent")]).totalValue == 1)
        #expect(try metrics.expectCounter("strata_outbox_parked_total", [posts, ("reason", "rejected")]).totalValue == 1)
        #expect(try metrics.expectGauge("strata_outbox_parked", [posts]).lastValue == 1)
        #expect(try metrics.expectGauge("strata_outbox_pending", [posts]).lastValue == 0)
    }

    @Test("coming back online makes an unreachable write due before its backoff ends")
    func onlineSkipsTheBackoffOfUnreachableWrites() async throws {
        let server = ScriptedServer { request, index in
            if index == 0 { throw ScriptedServer.unreachable(request) }
            return HTTPReply(url: request.url, statusCode: 201)
        }
        let fixture = try OutboxFixture(server: server)
        let outbox = fixture.outbox()
        let (request, body) = OutboxFixture.post()
        try await outbox.enqueue(request, body: body)
        try await outbox.drain()
        outbox.connectivityChanged(isOnline: false)
        outbox.connectivityChanged(isOnline: true)
        #expect(try await outbox.drain().delivered == 1)
    }

    @Test("a successful answer from the write's host makes it due; another host's does not")
    func reachabilityOfTheHostTriggersTheWrite() async throws {
        let server = ScriptedServer { request, index in
            if index == 0 { throw ScriptedServer.unreachable(request) }
            return HTTPReply(url: request.url, statusCode: 200)
        }
        let fixture = try OutboxFixture(server: server)
        let outbox = fixture.outbox()
        let (request, body) = OutboxFixture.post()
        try await outbox.enqueue(request, body: body)
        try await outbox.drain()

        let reads = server.reportingReachability(to: outbox)
        _ = try await reads.send(HTTPRequest(method: .get, url: URL(string: "https://elsewhere.example.org/feed")!), body: nil, options: .init())
        #expect(try await outbox.drain() == OutboxDrainReport())
        _ = try await reads.send(HTTPRequest(method: .get, url: URL(string: "https://API.example.com:443/feed")!), body: nil, options: .init())
        #expect(try await outbox.drain().delivered == 1)
    }

    @Test("an outbox whose handler sends through its own reachability transport is freed when dropped")
    func reachabilityTransportDoesNotKeepItsOutboxAlive() async throws {
        let fixture = try OutboxFixture()
        weak var released: Outbox?
        do {
            let outbox = Outbox(storage: fixture.storage, environment: fixture.clock.environment(logger: fixture.logs.logger))
            outbox.registerHTTP(transport: fixture.server.reportingReachability(to: outbox))
            let (request, body) = OutboxFixture.post()
            try await outbox.enqueue(request, body: body)
            #expect(try await outbox.drain().delivered == 1)
            released = outbox
        }
        #expect(released == nil, "the transport holds the outbox weakly")
    }

    @Test("a 422 parks the write with its status and body; it is never dropped", arguments: [400, 403, 404, 410, 422, 501, 505])
    func permanentFailureParks(status: Int) async throws {
        let server = ScriptedServer { request, _ in
            HTTPReply(url: request.url, statusCode: status, body: Data(#"{"error":"title is required"}"#.utf8))
        }
        let fixture = try OutboxFixture(server: server)
        let outbox = fixture.outbox()
        let (request, body) = OutboxFixture.post()
        let entry = try await outbox.enqueue(request, body: body)
        #expect(try await outbox.drain().parked == 1)
        let letter = try #require(try await outbox.deadLetters().first?.deadLetter)
        #expect(letter.reason == .rejected)
        #expect(letter.status == status)
        #expect(letter.body.map { String(decoding: $0, as: UTF8.self) } == #"{"error":"title is required"}"#)
        #expect(outbox.status.parked == 1)
        #expect(outbox.status.pending == 0)
        // On disk as a dead letter, for the next process too.
        #expect(try await fixture.storage.loadAll().first?.deadLetter?.status == status)
        // Not attempted again by later drains.
        #expect(try await outbox.drain() == OutboxDrainReport())
        #expect(server.requests.count == 1)
        // Logged, with what it was.
        let line = try #require(fixture.logs.entries.first { $0.message.contains("parked") })
        #expect(line.level == .warning)
        #expect(line.metadata["outbox.id"] == "\(entry.idempotencyKey)")
        #expect(line.metadata["http.status"] == "\(status)")
    }

    @Test("dead letters: retry puts one back in the queue, discard removes it, a pending write cannot be discarded")
    func deadLettersCanBeActedOn() async throws {
        let server = ScriptedServer { request, _ in HTTPReply(url: request.url, statusCode: 422) }
        let fixture = try OutboxFixture(server: server)
        let outbox = fixture.outbox()
        let (request, body) = OutboxFixture.post()
        let kept = try await outbox.enqueue(request, body: body, scope: "a")
        let dropped = try await outbox.enqueue(request, body: body, scope: "b")
        try await outbox.drain()
        #expect(try await outbox.deadLetters().map(\.id) == [kept.id, dropped.id])

        server.answer { request, _ in HTTPReply(url: request.url, statusCode: 201) }
        try await outbox.retry(kept.id)
        #expect(try await outbox.entry(kept.id)?.isPending == true)
        #expect(try await outbox.entry(kept.id)?.attempts == 0)
        try await outbox.drain()
        #expect(try await outbox.entry(kept.id) == nil)

        try await outbox.discard(dropped.id)
        #expect(try await outbox.entries().isEmpty)
        #expect(try await fixture.storage.loadAll().isEmpty)
        #expect(fixture.logs.entries.contains { $0.message.contains("discarded") && $0.metadata["outbox.id"] == "\(dropped.idempotencyKey)" })

        outbox.connectivityChanged(isOnline: false)
        let pending = try await outbox.enqueue(request, body: body)
        await #expect(throws: OutboxError.self) { try await outbox.discard(pending.id) }
        await #expect(throws: OutboxError.self) { try await outbox.retry(pending.id) }
        await #expect(throws: OutboxError.self) { try await outbox.retry(UUID()) }
        #expect(try await outbox.entry(pending.id) != nil)
    }

    @Test("a 401 runs the auth refresh, then sends once more; still 401 parks it")
    func unauthorizedRefreshesOnce() async throws {
        let refreshes = Locked(0)
        let server = ScriptedServer { request, _ in
            HTTPReply(url: request.url, statusCode: request.headers["Authorization"] == "Bearer 1" ? 201 : 401)
        }
        let fixture = try OutboxFixture(server: server)
        let outbox = fixture.outbox(
            refreshAuthorization: { refreshes.withLock { $0 += 1 } },
            authorize: { request in request.headerFields[.authorization] = "Bearer \(refreshes.withLock { $0 })" })
        let (request, body) = OutboxFixture.post()
        try await outbox.enqueue(request, body: body)
        #expect(try await outbox.drain().delivered == 1)
        #expect(server.requests.map { $0.headers["Authorization"] } == ["Bearer 0", "Bearer 1"])

        server.answer { request, _ in HTTPReply(url: request.url, statusCode: 401) }
        let refused = try await outbox.enqueue(request, body: body)
        #expect(try await outbox.drain().parked == 1)
        #expect(try await outbox.entry(refused.id)?.deadLetter?.reason == .unauthorized)
        #expect(refreshes.withLock { $0 } == 2)
        #expect(try await outbox.entry(refused.id)?.attempts == 2)
    }

    @Test("the status decides before the body's size: a 2xx over the limit is delivered, a 409 over it is a conflict")
    func statusDecidesBeforeTheBodyLimit() async throws {
        // A transport that hands back whole bodies, whatever the limit (the real ones cut them:
        // Tools' OutboxLargeAnswerTests); the outbox asks every transport to cut rather than refuse.
        let large = Data(repeating: UInt8(ascii: "x"), count: 100_000)
        let server = ScriptedServer { request, index in
            HTTPReply(url: request.url, statusCode: index == 0 ? 201 : 409, body: large)
        }
        let fixture = try OutboxFixture(server: server)
        let outbox = Outbox(storage: fixture.storage, environment: fixture.clock.environment(logger: fixture.logs.logger))
        outbox.registerHTTP(transport: server, options: HTTPRequestOptions(maxBodyBytes: 1024))
        let (request, body) = OutboxFixture.post()
        try await outbox.enqueue(request, body: body)
        #expect(try await outbox.drain().delivered == 1)

        let conflicting = try await outbox.enqueue(request, body: body)
        #expect(try await outbox.drain().parked == 1)
        let letter = try #require(try await outbox.entry(conflicting.id)?.deadLetter)
        #expect(letter.reason == .conflict)
        #expect(letter.status == 409)
        #expect(letter.body?.count == 65_536)
        #expect(server.requests.map(\.options.oversizedBody) == [.truncate, .truncate])
        #expect(server.requests.map(\.maxBodyBytes) == [1024, 1024])
    }

    @Test("an entry of a kind no handler knows is parked, and comes back when its kind is registered")
    func unknownKindIsParkedNotDropped() async throws {
        let fixture = try OutboxFixture()
        let outbox = fixture.outbox()
        let entry = try await outbox.enqueue(kind: "like", scope: "post/1", payload: Data("{}".utf8))
        #expect(try await outbox.drain().parked == 1)
        #expect(try await outbox.entry(entry.id)?.deadLetter?.reason == .unknownKind)

        let delivered = Locked<[UUID]>([])
        outbox.register("like") { delivery in
            delivered.withLock { $0.append(delivery.entry.id) }
            return .delivered
        }
        let status = outbox.statusUpdates()
        for await update in status where update.pending == 1 { break }
        #expect(try await outbox.drain().delivered == 1)
        #expect(delivered.withLock { $0 } == [entry.id])
    }

    @Test("retention: a write failing past the attempt limit is parked with the reason, not deleted")
    func retentionByAttemptsParks() async throws {
        let server = ScriptedServer { request, _ in HTTPReply(url: request.url, statusCode: 500) }
        let fixture = try OutboxFixture(server: server)
        let outbox = fixture.outbox(retention: OutboxRetention(maxAttempts: 3, maxAge: nil))
        let (request, body) = OutboxFixture.post()
        let entry = try await outbox.enqueue(request, body: body)
        for _ in 0..<2 {
            #expect(try await outbox.drain().deferred == 1)
            fixture.clock.advance(by: .seconds(3600))
        }
        #expect(try await outbox.drain().parked == 1)
        let parked = try #require(try await outbox.entry(entry.id))
        #expect(parked.deadLetter?.reason == .retentionExceeded)
        #expect(parked.deadLetter?.status == 500)
        #expect(parked.attempts == 3)
        #expect(server.requests.count == 3)
    }

    @Test("retention: a write queued longer than the age limit is parked, even offline")
    func retentionByAgeParksOffline() async throws {
        let fixture = try OutboxFixture()
        let outbox = fixture.outbox(retention: OutboxRetention(maxAttempts: nil, maxAge: .seconds(86_400)))
        outbox.connectivityChanged(isOnline: false)
        let (request, body) = OutboxFixture.post()
        let entry = try await outbox.enqueue(request, body: body)
        fixture.clock.advance(by: .seconds(86_401))
        #expect(try await outbox.drain().parked == 1)
        #expect(try await outbox.entry(entry.id)?.deadLetter?.reason == .retentionExceeded)
        #expect(fixture.server.requests.isEmpty)
    }

    @Test("a storage that cannot save fails enqueue with a typed error: the write is not reported queued")
    func enqueueFailsWhenTheStorageFails() async throws {
        let fixture = try OutboxFixture()
        let outbox = Outbox(storage: RefusingOutboxStorage(), environment: fixture.clock.environment(logger: fixture.logs.logger))
        let (request, body) = OutboxFixture.post()
        await #expect {
            try await outbox.enqueue(request, body: body)
        } throws: { error in
            guard case OutboxError.storage(let underlying) = error else { return false }
            return (underlying as? StoreError)?.operation == .insert
        }
        #expect(outbox.status.pending == 0)
        #expect(try await outbox.entries().isEmpty)
    }
}

/// Reads as empty; refuses every write.
struct RefusingOutboxStorage: OutboxStorage {
    func loadAll() async throws -> [OutboxEntry] { [] }
    func save(_ entry: OutboxEntry) async throws {
        throw StoreError(store: "RefusingOutboxStorage", operation: .insert, key: entry.idempotencyKey, reason: "disk full")
    }
    func remove(_ id: UUID) async throws {
        throw StoreError(store: "RefusingOutboxStorage", operation: .delete, key: nil, reason: "disk full")
    }
}

@Suite("Outbox: conflicts", .timeLimit(.minutes(1)))
struct OutboxConflictTests {
    static func conflictThenCreated(_ status: Int) -> ScriptedServer {
        ScriptedServer { request, _ in
            if request.headers["If-Match"] != nil {
                return HTTPReply(url: request.url, statusCode: status, headers: ["ETag": #""v9""#], body: Data(#"{"title":"server"}"#.utf8))
            }
            return HTTPReply(url: request.url, statusCode: 200)
        }
    }

    @Test("manual: a 409 or 412 parks the write with the server's answer", arguments: [409, 412])
    func manualParks(status: Int) async throws {
        let fixture = try OutboxFixture(server: Self.conflictThenCreated(status))
        let outbox = fixture.outbox(conflicts: .manual)
        let (request, body) = OutboxFixture.post("/posts/1")
        let entry = try await outbox.enqueue(request, body: body, baseVersion: #""v1""#)
        #expect(try await outbox.drain().parked == 1)
        #expect(fixture.server.requests.first?.headers["If-Match"] == #""v1""#)
        let letter = try #require(try await outbox.entry(entry.id)?.deadLetter)
        #expect(letter.reason == .conflict)
        #expect(letter.status == status)
        #expect(letter.detail.contains(#""v9""#))
    }

    @Test("an If-Match the request carries is the write's base version")
    func ifMatchHeaderBecomesTheBaseVersion() async throws {
        let fixture = try OutboxFixture(server: Self.conflictThenCreated(412))
        let outbox = fixture.outbox(conflicts: .clientWins)
        var (request, body) = OutboxFixture.post("/posts/1")
        request.headerFields[.ifMatch] = #""v3""#
        let entry = try await outbox.enqueue(request, body: body)
        #expect(entry.baseVersion == #""v3""#)
        #expect(try await outbox.drain().delivered == 1)
        #expect(fixture.server.requests.map { $0.headers["If-Match"] } == [#""v3""#, nil])
    }

    @Test("client wins: the write is sent again without its precondition, under a key derived from the first")
    func clientWinsResendsUnconditionally() async throws {
        let fixture = try OutboxFixture(server: Self.conflictThenCreated(412))
        let outbox = fixture.outbox(conflicts: .clientWins)
        let (request, body) = OutboxFixture.post("/posts/1")
        let entry = try await outbox.enqueue(request, body: body, baseVersion: #""v1""#)
        #expect(try await outbox.drain().delivered == 1)
        #expect(fixture.server.requests.map { $0.headers["If-Match"] } == [#""v1""#, nil])
        // The server keeps its refusal under the first key: the changed request needs a new one.
        #expect(fixture.server.requests.map { $0.headers["Idempotency-Key"] } == [entry.idempotencyKey, entry.idempotencyKey + "-r1"])
    }

    @Test("merge: the merged payload is sent against the server's version")
    func mergeSendsTheMergedWrite() async throws {
        let server = ScriptedServer { request, _ in
            request.headers["If-Match"] == #""v9""# ? HTTPReply(url: request.url, statusCode: 200)
                : HTTPReply(url: request.url, statusCode: 409, headers: ["ETag": #""v9""#], body: Data(#"{"title":"server"}"#.utf8))
        }
        let fixture = try OutboxFixture(server: server)
        let outbox = fixture.outbox(conflicts: .merge { entry, conflict in
            var stored = try #require(entry.request)
            stored.body = Data(#"{"title":"merged"}"#.utf8)
            return OutboxMerge(payload: try JSONEncoder().encode(stored), baseVersion: conflict.serverVersion)
        })
        let (request, body) = OutboxFixture.post("/posts/1")
        try await outbox.enqueue(request, body: body, baseVersion: #""v1""#)
        #expect(try await outbox.drain().delivered == 1)
        #expect(server.requests.map { $0.headers["If-Match"] } == [#""v1""#, #""v9""#])
        #expect(server.requests.last?.body == Data(#"{"title":"merged"}"#.utf8))
    }

    @Test("server wins: the write is removed, logged with what it was, and the app is told to refetch")
    func serverWinsDropsAndRefetches() async throws {
        let refetched = Locked<[UUID]>([])
        let fixture = try OutboxFixture(server: Self.conflictThenCreated(409))
        let outbox = fixture.outbox(conflicts: .serverWins(refetch: { entry in refetched.withLock { $0.append(entry.id) } }))
        let (request, body) = OutboxFixture.post("/posts/1")
        let entry = try await outbox.enqueue(request, body: body, baseVersion: #""v1""#)
        #expect(try await outbox.drain().discarded == 1)
        #expect(refetched.withLock { $0 } == [entry.id])
        #expect(try await outbox.entries().isEmpty)
        #expect(fixture.logs.entries.contains { $0.level == .warning && $0.metadata["outbox.id"] == "\(entry.idempotencyKey)" })
    }
}

@Suite("Outbox: order, parallelism, visibility", .timeLimit(.minutes(1)))
struct OutboxOrderTests {
    @Test("one scope is delivered in order, one at a time; a failing head holds its scope only")
    func serialWithinAScopeParallelAcross() async throws {
        let server = ScriptedServer { request, _ in
            request.url.path.hasPrefix("/broken") ? HTTPReply(url: request.url, statusCode: 503) : HTTPReply(url: request.url, statusCode: 201)
        }
        let fixture = try OutboxFixture(server: server)
        let outbox = fixture.outbox()
        for index in 1...3 {
            let (request, body) = OutboxFixture.post("/broken", json: "{\"n\":\(index)}")
            try await outbox.enqueue(request, body: body)
        }
        for index in 1...3 {
            let (request, body) = OutboxFixture.post("/posts", json: "{\"n\":\(index)}")
            try await outbox.enqueue(request, body: body)
        }
        let report = try await outbox.drain()
        #expect(report.delivered == 3)
        #expect(report.deferred == 1)
        let posts = server.requests.filter { $0.url.path == "/posts" }.compactMap { $0.body.map { String(decoding: $0, as: UTF8.self) } }
        #expect(posts == [#"{"n":1}"#, #"{"n":2}"#, #"{"n":3}"#])
        // The broken scope was tried once (its head), not three times.
        #expect(server.requests.filter { $0.url.path == "/broken" }.count == 1)
        #expect(outbox.status.pendingByScope == ["/broken": 3])

        // Once the failure clears, it drains in its original order.
        server.answer { request, _ in HTTPReply(url: request.url, statusCode: 201) }
        fixture.clock.advance(by: .seconds(3600))
        #expect(try await outbox.drain().delivered == 3)
        let broken = server.requests.filter { $0.url.path == "/broken" }.compactMap { $0.body.map { String(decoding: $0, as: UTF8.self) } }
        #expect(broken == [#"{"n":1}"#, #"{"n":1}"#, #"{"n":2}"#, #"{"n":3}"#])
    }

    @Test("a handler may rewrite the writes queued behind it (a server-assigned id)")
    func receiptRewritesLaterWrites() async throws {
        struct Create: Codable { var temporaryID: String }
        struct Rename: Codable { var id: String; var title: String }
        let fixture = try OutboxFixture()
        let outbox = fixture.outbox()
        let sent = Locked<[String]>([])
        outbox.register("create", as: Create.self) { create, _ in
            sent.withLock { $0.append("create \(create.temporaryID)") }
            return .delivered(rewritingLaterWrites: { entry in
                guard entry.kind == "rename", var rename = try? entry.decoded(Rename.self), rename.id == create.temporaryID else { return nil }
                rename.id = "42"
                return try? JSONEncoder().encode(rename)
            })
        }
        outbox.register("rename", as: Rename.self) { rename, _ in
            sent.withLock { $0.append("rename \(rename.id) \(rename.title)") }
            return .delivered
        }
        outbox.connectivityChanged(isOnline: false)
        try await outbox.enqueue(Create(temporaryID: "tmp-1"), kind: "create", scope: "posts")
        try await outbox.enqueue(Rename(id: "tmp-1", title: "hello"), kind: "rename", scope: "posts")
        outbox.connectivityChanged(isOnline: true)
        #expect(try await outbox.drain().delivered == 2)
        #expect(sent.withLock { $0 } == ["create tmp-1", "rename 42 hello"])
    }

    @Test("waitUntilDrained returns once the writes queued before it are delivered")
    func waitUntilDrainedReturnsAfterDelivery() async throws {
        let fixture = try OutboxFixture()
        let outbox = fixture.outbox()
        outbox.connectivityChanged(isOnline: false)
        let (request, body) = OutboxFixture.post()
        try await outbox.enqueue(request, body: body)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await outbox.waitUntilDrained(timeout: .seconds(60)) }
            try await fixture.clock.waitForSleepers(count: 1)
            outbox.connectivityChanged(isOnline: true)
            try await outbox.drain()
            try await group.waitForAll()
        }
        #expect(outbox.status.pending == 0)
    }

    @Test("waitUntilDrained times out on the outbox's clock, saying how many are left")
    func waitUntilDrainedTimesOut() async throws {
        let fixture = try OutboxFixture()
        let outbox = fixture.outbox()
        outbox.connectivityChanged(isOnline: false)
        let (request, body) = OutboxFixture.post()
        try await outbox.enqueue(request, body: body)
        try await outbox.enqueue(request, body: body)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                await #expect {
                    try await outbox.waitUntilDrained(timeout: .seconds(30))
                } throws: { error in
                    guard case OutboxError.drainTimedOut(let remaining, _) = error else { return false }
                    return remaining == 2
                }
            }
            try await fixture.clock.waitForSleepers(count: 1)
            fixture.clock.advance(by: .seconds(30))
            try await group.waitForAll()
        }
    }

    @Test("the status stream reports queued, draining and delivered")
    func statusStreamFollowsTheQueue() async throws {
        let fixture = try OutboxFixture()
        let outbox = fixture.outbox()
        outbox.connectivityChanged(isOnline: false)
        var updates = outbox.statusUpdates().makeAsyncIterator()
        #expect(await updates.next()?.pending == 0)
        let (request, body) = OutboxFixture.post()
        try await outbox.enqueue(request, body: body)
        var seen: OutboxStatus? = await updates.next()
        while let status = seen, status.pending != 1 { seen = await updates.next() }
        #expect(seen?.pendingByScope == ["/posts": 1])
        outbox.connectivityChanged(isOnline: true)
        try await outbox.drain()
        seen = await updates.next()
        while let status = seen, status.pending != 0 || status.isDraining { seen = await updates.next() }
        #expect(seen?.pending == 0)
        #expect(seen?.isDraining == false)
    }

    @Test("run() drains at start, after each enqueue, and when a backoff ends")
    func runDrainsOnEveryTrigger() async throws {
        let server = ScriptedServer { request, index in
            index == 1 ? HTTPReply(url: request.url, statusCode: 503) : HTTPReply(url: request.url, statusCode: 201)
        }
        let fixture = try OutboxFixture(server: server)
        let (request, body) = OutboxFixture.post()
        do {
            let earlier = fixture.outbox()
            earlier.connectivityChanged(isOnline: false)
            try await earlier.enqueue(request, body: body)
        }
        let outbox = fixture.outbox()
        let runner = Task { try await outbox.run() }
        defer { runner.cancel() }
        // At start: the write an earlier process queued.
        try await outbox.waitUntilDrained(timeout: .seconds(60))
        #expect(server.requests.count == 1)
        // After an enqueue (this one fails with a 503 and waits 10 s).
        try await outbox.enqueue(request, body: body)
        var updates = outbox.statusUpdates().makeAsyncIterator()
        while let status = await updates.next(), status.lastFailure == nil || status.isDraining {}
        #expect(server.requests.count == 2)
        // When the backoff ends.
        try await fixture.clock.waitForSleepers(count: 1)
        fixture.clock.advance(by: .seconds(10))
        try await outbox.waitUntilDrained(timeout: .seconds(60))
        #expect(server.requests.count == 3)
    }
}

