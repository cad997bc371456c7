import Foundation
import HTTPTypes
@testable @_spi(StrataInternals) import Strata
@testable import StrataOutbox
import StrataTesting
import Testing

/// A ``FileOutboxStorage`` (real files) whose operations can be held at a gate or made to fail in
/// the ways a networked storage fails: a save that commits and then throws (the caller stopped
/// waiting), a save that throws without storing, a read-back that fails.
final class FaultyOutboxStorage: OutboxStorage {
    enum SaveFault: Sendable {
        /// Stores the entry, then throws: the commit landed after the caller stopped waiting.
        case storeThenThrow
        /// Throws without storing.
        case throwWithoutStoring
    }

    struct Faults: Sendable {
        /// Saves of entries this matches wait at `saveGate` first.
        var holdSave: (@Sendable (OutboxEntry) -> Bool)?
        /// Saves of entries this matches fail so.
        var saveFault: (matches: @Sendable (OutboxEntry) -> Bool, fault: SaveFault)?
        var failReadBack = false
        var holdRemoves = false
    }

    let base: FileOutboxStorage
    let saveGate = Gate()
    let removeGate = Gate()
    private let faults = Locked(Faults())

    init(directory: URL) { base = FileOutboxStorage(directory: directory) }

    func set(_ change: (inout Faults) -> Void) { faults.withLock { change(&$0) } }

    func loadAll() async throws -> [OutboxEntry] { try await base.loadAll() }

    func save(_ entry: OutboxEntry) async throws {
        let current = faults.withLock { $0 }
        if current.holdSave?(entry) == true { await saveGate.wait() }
        if let (matches, fault) = current.saveFault, matches(entry) {
            switch fault {
            case .storeThenThrow:
                try await base.save(entry)
                throw TimeoutError(tier: "postgres", timeout: .seconds(5))
            case .throwWithoutStoring:
                throw TestError("connection reset before the commit")
            }
        }
        try await base.save(entry)
    }

    func remove(_ id: UUID) async throws {
        if faults.withLock({ $0.holdRemoves }) { await removeGate.wait() }
        try await base.remove(id)
    }

    /// The body of the HTTP write `entry` holds, as text.
    static func body(_ entry: OutboxEntry) -> String? {
        entry.request.flatMap { $0.body }.map { String(decoding: $0, as: UTF8.self) }
    }

    func entry(_ id: UUID) async throws -> OutboxEntry? {
        if faults.withLock({ $0.failReadBack }) { throw TestError("the database is unreachable") }
        return try await base.entry(id)
    }
}

/// Suspends until the task is cancelled: a handler that never answers on its own.
func hangUntilCancelled() async {
    let gate = Gate()
    await withTaskCancellationHandler { await gate.wait() } onCancel: { gate.open() }
}

/// The outbox's promises under concurrency and ordinary server behaviour, with real files. Each test
/// failed on the outbox before its state machine (the first by delivering B before A; the deadline
/// and cancellation tests by running into their time limit or the wrong error).
@Suite("Outbox: guarantees under concurrency", .timeLimit(.minutes(1)))
struct OutboxConcurrencyTests {
    static func fixture() throws -> (OutboxFixture, FaultyOutboxStorage, Outbox) {
        let fixture = try OutboxFixture()
        let storage = FaultyOutboxStorage(directory: fixture.directory.url)
        let outbox = Outbox(
            storage: storage, environment: fixture.clock.environment(logger: fixture.logs.logger),
            retry: OutboxRetryPolicy(initialDelay: .seconds(10), jitter: 0, random: { 0 }))
        outbox.registerHTTP(transport: fixture.server)
        return (fixture, storage, outbox)
    }

    static func titles(_ server: ScriptedServer) -> [String] {
        server.requests.map { String(decoding: $0.body ?? Data(), as: UTF8.self) }
    }

    @Test("two concurrent enqueues of one scope: the second, queued while the first's save is open, waits for it and delivers after it, now and after a relaunch")
    func concurrentEnqueuesKeepTheirOrder() async throws {
        let (fixture, storage, outbox) = try Self.fixture()
        let (request, _) = OutboxFixture.post("/posts/1")
        storage.set { $0.holdSave = { FaultyOutboxStorage.body($0) == "A" } }
        let first = Task { try await outbox.enqueue(request, body: Data("A".utf8)) }
        await storage.saveGate.waitForWaiters()
        // B is queued (it has its place and sequence) and waits for the next commit (group commit).
        let secondCall = Task { try await outbox.enqueue(request, body: Data("B".utf8)) }
        try await outbox.groupCommit.waitUntilPending(1)
        #expect(try await outbox.drain() == OutboxDrainReport(), "B waits behind A, whose save is still open")
        #expect(fixture.server.requests.isEmpty)

        // A relaunch reads them in sequence order too.
        storage.saveGate.open()
        let second = try await secondCall.value
        let firstEntry = try await first.value
        #expect(firstEntry.sequence < second.sequence)
        let relaunched = try await FileOutboxStorage(directory: fixture.directory.url).loadAll().sorted(by: Outbox.deliveryOrder)
        #expect(relaunched.map(\.id) == [firstEntry.id, second.id])

        #expect(try await outbox.drain().delivered == 2)
        #expect(Self.titles(fixture.server) == ["A", "B"])
    }

    @Test("a save that committed after the caller stopped waiting is read back: enqueue answers queued, and it is delivered once")
    func aSaveThatCommittedIsQueued() async throws {
        let (fixture, storage, outbox) = try Self.fixture()
        let (request, _) = OutboxFixture.post()
        storage.set { $0.saveFault = ({ FaultyOutboxStorage.body($0) == "A" }, .storeThenThrow) }
        let entry = try await outbox.enqueue(request, body: Data("A".utf8))
        #expect(try await outbox.entry(entry.id) == entry)
        storage.set { $0.saveFault = nil }
        #expect(try await outbox.drain().delivered == 1)
        #expect(fixture.server.requests.count == 1)
        #expect(fixture.logs.entries.contains { $0.message.contains("was stored; it is queued") })
    }

    @Test("a save that stored nothing throws, and the write is not queued: the scope goes on without it")
    func aSaveThatStoredNothingIsNotQueued() async throws {
        let (fixture, storage, outbox) = try Self.fixture()
        let (request, _) = OutboxFixture.post()
        storage.set { $0.saveFault = ({ FaultyOutboxStorage.body($0) == "A" }, .throwWithoutStoring) }
        await #expect(throws: OutboxError.self) { try await outbox.enqueue(request, body: Data("A".utf8)) }
        try await outbox.enqueue(request, body: Data("B".utf8))
        #expect(try await outbox.drain().delivered == 1)
        #expect(Self.titles(fixture.server) == ["B"])
        #expect(try await storage.loadAll().isEmpty)
    }

    @Test("when even the read-back fails the write holds its scope; enqueueing it again with its id settles it, never a second copy")
    func anUnknownOutcomeHoldsTheScopeUntilSettled() async throws {
        let (fixture, storage, outbox) = try Self.fixture()
        let (request, _) = OutboxFixture.post()
        let payload = try JSONEncoder().encode(OutboxRequest(request, body: Data("A".utf8)))
        let id = UUID()
        storage.set {
            $0.saveFault = ({ FaultyOutboxStorage.body($0) == "A" }, .storeThenThrow)
            $0.failReadBack = true
        }
        let error = try await #require(throws: OutboxError.self, "enqueue answered queued without knowing") {
            try await outbox.enqueue(kind: Outbox.httpKind, scope: "posts", payload: payload, id: id)
        }
        guard case .outcomeUnknown(let unknown, _) = error else {
            Issue.record("expected outcomeUnknown, got \(error)")
            return
        }
        #expect(unknown == id)
        storage.set { $0.saveFault = nil }
        let behind = try await outbox.enqueue(
            kind: Outbox.httpKind, scope: "posts", payload: try JSONEncoder().encode(OutboxRequest(request, body: Data("B".utf8))))
        #expect(try await outbox.drain() == OutboxDrainReport(), "B waits: A may be stored ahead of it")

        storage.set { $0.failReadBack = false }
        let settled = try await outbox.enqueue(kind: Outbox.httpKind, scope: "posts", payload: payload, id: id)
        #expect(settled.id == id)
        #expect(settled.sequence < behind.sequence)
        #expect(try await storage.loadAll().count == 2, "one copy of A, one of B")
        #expect(try await outbox.drain().delivered == 2)
        #expect(Self.titles(fixture.server) == ["A", "B"])
    }

    @Test("enqueue with an id already queued returns the same entry and stores no second copy")
    func enqueueIsIdempotentByID() async throws {
        let (_, storage, outbox) = try Self.fixture()
        let id = UUID()
        let first = try await outbox.enqueue(kind: "note", scope: "notes", payload: Data("n".utf8), id: id)
        let again = try await outbox.enqueue(kind: "note", scope: "notes", payload: Data("other".utf8), id: id)
        #expect(again == first)
        #expect(try await storage.loadAll().map(\.id) == [id])
        #expect(first.idempotencyKey == id.uuidString.lowercased())
    }

    @Test("a second enqueue of an id whose save is in flight waits for that save and returns its entry; cancelled, it throws")
    func aSecondEnqueueOfTheSameIDWaitsForTheFirstSave() async throws {
        let (_, storage, outbox) = try Self.fixture()
        let id = UUID()
        storage.set { $0.holdSave = { $0.id == id } }
        let first = Task { try await outbox.enqueue(kind: "note", scope: "notes", payload: Data("n".utf8), id: id) }
        await storage.saveGate.waitForWaiters()
        let second = Task { try await outbox.enqueue(kind: "note", scope: "notes", payload: Data("n".utf8), id: id) }
        let cancelled = Task { try await outbox.enqueue(kind: "note", scope: "notes", payload: Data("n".utf8), id: id) }
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        storage.saveGate.open()
        let entry = try await first.value
        #expect(try await second.value == entry)
        #expect(try await storage.loadAll().map(\.id) == [id], "saved once")
    }

    @Test("a bare 409 after an attempt that got no answer is retried as still in flight, not given to server-wins")
    func aBare409AfterATimeoutIsNotAConflict() async throws {
        let server = ScriptedServer { request, index in
            switch index {
            case 0: throw ScriptedServer.timedOut(request)
            case 1: return HTTPReply(url: request.url, statusCode: 409, body: Data("in progress".utf8))
            default: return HTTPReply(url: request.url, statusCode: 201)
            }
        }
        let fixture = try OutboxFixture(server: server)
        let refetched = Locked(0)
        let outbox = fixture.outbox(conflicts: .serverWins(refetch: { _ in refetched.withLock { $0 += 1 } }))
        let (request, body) = OutboxFixture.post()
        let entry = try await outbox.enqueue(request, body: body)
        #expect(try await outbox.drain().deferred == 1)
        fixture.clock.advance(by: .seconds(10))
        let second = try await outbox.drain()
        #expect(second.discarded == 0 && second.deferred == 1, "still being applied: \(second)")
        #expect(try await outbox.entry(entry.id)?.inFlightConflicts == 1)
        fixture.clock.advance(by: .seconds(20))
        #expect(try await outbox.drain().delivered == 1)
        #expect(refetched.withLock { $0 } == 0)
        #expect(server.requests.map { $0.headers["Idempotency-Key"] } == Array(repeating: entry.idempotencyKey, count: 3))
    }

    @Test("another answer from the host does not cut short the backoff of a write that timed out there")
    func aHostAnswerKeepsATimedOutWritesBackoff() async throws {
        let server = ScriptedServer { request, index in
            if index == 0 { throw ScriptedServer.timedOut(request) }
            return HTTPReply(url: request.url, statusCode: 200)
        }
        let fixture = try OutboxFixture(server: server)
        let outbox = fixture.outbox()
        let (request, body) = OutboxFixture.post()
        let entry = try await outbox.enqueue(request, body: body)
        #expect(try await outbox.drain().deferred == 1)
        #expect(try await outbox.entry(entry.id)?.lastFailure?.class == .timedOut)
        let reads = server.reportingReachability(to: outbox)
        _ = try await reads.send(HTTPRequest(method: .get, url: URL(string: "https://api.example.com/feed")!), body: nil, options: .init())
        #expect(try await outbox.drain() == OutboxDrainReport(), "the backoff the slow endpoint earned stays")
        fixture.clock.advance(by: .seconds(10))
        #expect(try await outbox.drain().delivered == 1)
    }

    /// Parks a write of an unknown kind and returns its id.
    static func parkedWrite(_ outbox: Outbox, kind: String = "unregistered") async throws -> UUID {
        let entry = try await outbox.enqueue(kind: kind, scope: "notes", payload: Data("n".utf8))
        #expect(try await outbox.drain().parked == 1)
        return entry.id
    }

    @Test("discard racing a retry of the same dead letter: once discard returns, the write is gone for good")
    func discardRacingRetry() async throws {
        let (fixture, storage, outbox) = try Self.fixture()
        let id = try await Self.parkedWrite(outbox)
        storage.set { $0.holdSave = { $0.isPending } }
        let retrying = Task { try await outbox.retry(id) }
        await storage.saveGate.waitForWaiters()
        let discarded: Bool
        do {
            try await outbox.discard(id)
            discarded = true
        } catch {
            discarded = false
        }
        storage.saveGate.open()
        let retried = (try? await retrying.value) != nil
        #expect(discarded != retried, "exactly one of them wins")
        let afterRelaunch = try await FileOutboxStorage(directory: fixture.directory.url).loadAll()
        if discarded {
            #expect(afterRelaunch.isEmpty, "discarded, yet stored: a relaunch would send it")
        } else {
            #expect(afterRelaunch.map(\.isPending) == [true])
        }
    }

    @Test("a retry racing a discard's remove is refused, and the write stays discarded")
    func retryRacingDiscard() async throws {
        let (fixture, storage, outbox) = try Self.fixture()
        let id = try await Self.parkedWrite(outbox)
        storage.set { $0.holdRemoves = true }
        let discarding = Task { try await outbox.discard(id) }
        await storage.removeGate.waitForWaiters()
        await #expect(throws: OutboxError.self) { try await outbox.retry(id) }
        outbox.register("unregistered") { _ in .delivered }
        storage.removeGate.open()
        try await discarding.value
        #expect(try await outbox.entry(id) == nil)
        #expect(try await FileOutboxStorage(directory: fixture.directory.url).loadAll().isEmpty)
        #expect(try await outbox.drain() == OutboxDrainReport())
    }

    @Test("a kind registered while its write is being parked for want of a handler revives the write")
    func registeringWhileParking() async throws {
        let (_, storage, outbox) = try Self.fixture()
        storage.set { $0.holdSave = { !$0.isPending } }
        let entry = try await outbox.enqueue(kind: "late", scope: "notes", payload: Data("n".utf8))
        let draining = Task { try await outbox.drain() }
        await storage.saveGate.waitForWaiters()
        let delivered = Locked(0)
        outbox.register("late") { _ in
            delivered.withLock { $0 += 1 }
            return .delivered
        }
        storage.set { $0.holdSave = nil }
        storage.saveGate.open()
        #expect(try await draining.value.parked == 1)
        // The revival runs in a task of its own: wait for the write to be pending again.
        for await status in outbox.statusUpdates() where status.parked == 0 && status.pending == 1 { break }
        #expect(try await outbox.entry(entry.id)?.isPending == true)
        #expect(try await outbox.drain().delivered == 1)
        #expect(delivered.withLock { $0 } == 1)
    }

    @Test("a handler that never answers is cancelled at the deadline: the attempt times out and the scope is free again")
    func aStuckHandlerMeetsItsDeadline() async throws {
        let clock = ManualClock()
        let outbox = Outbox(
            storage: MemoryOutboxStorage(), environment: clock.environment(),
            retry: OutboxRetryPolicy(initialDelay: .seconds(1), jitter: 0), handlerDeadline: .seconds(30))
        let calls = Locked(0)
        outbox.register("note") { _ in
            if calls.withLock({ $0 += 1; return $0 }) == 1 { await hangUntilCancelled() }
            return .delivered
        }
        let entry = try await outbox.enqueue(kind: "note", scope: "notes", payload: Data("n".utf8))
        let draining = Task { try await outbox.drain() }
        try await clock.waitForSleepers(count: 1)  // the deadline's timer
        clock.advance(by: .seconds(30))
        #expect(try await draining.value.deferred == 1)
        let waiting = try #require(try await outbox.entry(entry.id))
        #expect(waiting.lastFailure?.class == .timedOut)
        #expect(waiting.lastFailure?.message.contains("deadline") == true)
        clock.advance(by: .seconds(1))
        #expect(try await outbox.drain().delivered == 1)
    }

    @Test("the default deadline is 60 s on the outbox's clock")
    func theDefaultDeadline() async throws {
        let clock = ManualClock()
        let outbox = Outbox(storage: MemoryOutboxStorage(), environment: clock.environment())
        outbox.register("note") { _ in
            await hangUntilCancelled()
            return .delivered
        }
        try await outbox.enqueue(kind: "note", scope: "notes", payload: Data("n".utf8))
        let draining = Task { try await outbox.drain() }
        try await clock.waitForSleepers(count: 1)
        clock.advance(by: .seconds(59))
        #expect(clock.sleeperCount == 1, "not yet")
        clock.advance(by: .seconds(1))
        #expect(try await draining.value.deferred == 1)
    }

    @Test("a merge resends under a key derived from the first; the first attempt keeps the original")
    func aMergeSendsANewKey() async throws {
        let server = ScriptedServer { request, _ in
            request.headers["If-Match"] == #""v9""# ? HTTPReply(url: request.url, statusCode: 200)
                : HTTPReply(url: request.url, statusCode: 409, headers: ["ETag": #""v9""#], body: Data())
        }
        let fixture = try OutboxFixture(server: server)
        let outbox = fixture.outbox(conflicts: .merge { entry, conflict in
            OutboxMerge(payload: entry.payload, baseVersion: conflict.serverVersion)
        })
        let (request, body) = OutboxFixture.post("/posts/1")
        let entry = try await outbox.enqueue(request, body: body, baseVersion: #""v1""#)
        #expect(try await outbox.drain().delivered == 1)
        #expect(server.requests.map { $0.headers["Idempotency-Key"] } == [entry.idempotencyKey, entry.idempotencyKey + "-r1"])
    }

    @Test("waitUntilDrained throws CancellationError when its caller is cancelled")
    func waitUntilDrainedHonoursCancellation() async throws {
        let clock = ManualClock()
        let outbox = Outbox(storage: MemoryOutboxStorage(), environment: clock.environment())
        try await outbox.enqueue(kind: "note", scope: "notes", payload: Data("n".utf8))
        let waiting = Task { try await outbox.waitUntilDrained(timeout: .seconds(60)) }
        try await clock.waitForSleepers(count: 1)  // its time limit
        waiting.cancel()
        await #expect(throws: CancellationError.self) { try await waiting.value }
    }
}
