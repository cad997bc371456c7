import Foundation
import HTTPTypes
@testable @_spi(StrataInternals) import Strata
@testable import StrataOutbox
import StrataTesting
import Testing

/// An outbox storage over memory that records what it was asked, and can be told to fail.
final class RecordingOutboxStorage: OutboxStorage {
    enum Operation: Equatable {
        case save(UUID, payload: Data)
        case remove(UUID)
        /// `saveAttempt`, with the delivered writes removed in the same step.
        case attempt(UUID, removing: [UUID])
        case removeDelivered(UUID)
    }

    private let base = MemoryOutboxStorage()
    private let state = Locked<(operations: [Operation], failSavesAfter: Int?, saves: Int)>(([], nil, 0))

    var operations: [Operation] { state.withLock { $0.operations } }

    /// Every save after the first `count` (from now) fails.
    func failSaves(after count: Int) { state.withLock { $0.failSavesAfter = $0.saves + count } }

    func loadAll() async throws -> [OutboxEntry] { try await base.loadAll() }

    /// Counts a save (an attempt too), and throws past the limit `failSaves(after:)` set.
    private func countSave() throws {
        let fails = state.withLock { state -> Bool in
            state.saves += 1
            return state.failSavesAfter.map { state.saves > $0 } ?? false
        }
        if fails { throw TestError("disk full") }
    }

    func save(_ entry: OutboxEntry) async throws {
        try countSave()
        state.withLock { $0.operations.append(.save(entry.id, payload: entry.payload)) }
        try await base.save(entry)
    }

    func saveAttempt(_ entry: OutboxEntry) async throws {
        try await saveAttempt(entry, removingDelivered: [])
    }

    func saveAttempt(_ entry: OutboxEntry, removingDelivered delivered: [UUID]) async throws {
        try countSave()
        state.withLock { $0.operations.append(.attempt(entry.id, removing: delivered)) }
        for id in delivered { try await base.remove(id) }
        try await base.save(entry)
    }

    /// Fails in a cancelled task, as GRDB's and PostgresNIO's calls do.
    func removeDelivered(_ id: UUID) async throws {
        try Task.checkCancellation()
        state.withLock { $0.operations.append(.removeDelivered(id)) }
        try await base.remove(id)
    }

    func remove(_ id: UUID) async throws {
        state.withLock { $0.operations.append(.remove(id)) }
        try await base.remove(id)
    }
}

/// The outbox at its edges: a handler's own cancellation and a failing storage back off instead of
/// spinning the drain or `run()`; `run()` schedules a retry another drain caused; rewritten later
/// writes are saved before the delivered one is removed; a relaunch revives writes parked for want
/// of a handler; an app's Idempotency-Key is kept; unreadable copies are set aside, never over each
/// other. Each failed on an earlier version (two by exceeding the time limit: the drain spun, or
/// `run()` never woke).
@Suite("Outbox: backoff without spinning, save order, relaunch, kept keys, unreadable copies", .timeLimit(.minutes(1)))
struct OutboxEdgeCaseTests {
    static let clockStart = Date(timeIntervalSince1970: 1_767_225_600)

    @Test("the outbox's log lines show a scope and an error with their secrets redacted")
    func logMetadata_redactsTheScopeAndTheError() async throws {
        let outbox = Outbox(storage: MemoryOutboxStorage(), environment: ManualClock().environment())
        outbox.connectivityChanged(isOnline: false)
        let scope = "/v1/reset/sk_live_4eC39HqLyjWDarjtT1zdp7dc"
        let entry = try await outbox.enqueue(kind: "note", scope: scope, payload: Data("n".utf8))
        let error = HTTPError.transport(url: URL(string: "https://api.example.com/a?token=abc123")!, reason: "refused", underlying: nil)
        let metadata = outbox.metadata(for: entry, error: error)
        #expect(metadata["outbox.scope"] == "/v1/reset/***")
        #expect(!"\(metadata)".contains("sk_live_4eC39") && !"\(metadata)".contains("abc123"))
    }

    @Test("a handler that throws CancellationError by itself backs off: one attempt per drain, not a tight loop")
    func aHandlersOwnCancellationIsAFailureThatBacksOff() async throws {
        let clock = ManualClock()
        let outbox = Outbox(storage: MemoryOutboxStorage(), environment: clock.environment())
        let calls = Locked(0)
        outbox.register("note") { _ in
            if calls.withLock({ $0 += 1; return $0 }) <= 1_000 { throw CancellationError() }
            return .delivered
        }
        let entry = try await outbox.enqueue(kind: "note", scope: "notes", payload: Data("n".utf8))
        #expect(try await outbox.drain().deferred == 1)
        #expect(calls.withLock { $0 } == 1)
        let waiting = try #require(try await outbox.entry(entry.id))
        #expect(waiting.lastFailure?.class == .timedOut, "no answer, and the request may have reached the server")
        #expect(waiting.nextAttemptAt > clock.date)
    }

    @Test("a storage that keeps failing ends the drain, and run() waits instead of spinning")
    func aFailingStorageNeitherSpinsTheDrainNorRun() async throws {
        let clock = ManualClock()
        let storage = RecordingOutboxStorage()
        let outbox = Outbox(
            storage: storage, environment: clock.environment(),
            retry: OutboxRetryPolicy(initialDelay: .seconds(10), jitter: 0, random: { 0 }))
        let calls = Locked(0)
        outbox.register("note") { _ in
            calls.withLock { $0 += 1 }
            return .delivered
        }
        try await outbox.enqueue(kind: "note", scope: "notes", payload: Data("n".utf8))
        storage.failSaves(after: 0)
        #expect(try await outbox.drain() == OutboxDrainReport())
        #expect(calls.withLock { $0 } == 0, "not sent: its attempt could not be saved first")
        // run() sleeps until the write is due again, on the clock, rather than draining in a loop.
        let runner = Task { try await outbox.run() }
        defer { runner.cancel() }
        try await clock.waitForSleepers(count: 1)
        #expect(calls.withLock { $0 } == 0)
    }

    @Test("a drain beside run(): when its write backs off, run() schedules the retry")
    func runSchedulesTheRetryOfAScopeAnotherDrainHeld() async throws {
        let clock = ManualClock()
        let gate = Gate()
        let calls = Locked(0)
        // No handler deadline: its timer would be a sleeper too, and this test counts run()'s.
        let outbox = Outbox(
            storage: MemoryOutboxStorage(), environment: clock.environment(),
            retry: OutboxRetryPolicy(initialDelay: .seconds(5), jitter: 0, random: { 0 }), handlerDeadline: nil)
        outbox.register("note") { _ in
            if calls.withLock({ $0 += 1; return $0 }) == 1 {
                await gate.wait()
                throw HTTPError.status(code: 503, url: URL(string: "https://api.example.com/notes")!, headerFields: HTTPFields(), body: Data())
            }
            return .delivered
        }
        try await outbox.enqueue(kind: "note", scope: "notes", payload: Data("n".utf8))
        let appDrain = Task { try await outbox.drain() }
        await gate.waitForWaiters()
        let runner = Task { try await outbox.run() }
        defer { runner.cancel() }
        // run() found the scope busy and waits for a wake-up, with no timer; the app's drain then backs off.
        while !outbox.isWaitingForWork { await Task.yield() }
        #expect(clock.sleeperCount == 0)
        gate.open()
        #expect(try await appDrain.value.deferred == 1)
        try await clock.waitForSleepers(count: 1)   // run()'s timer for the retry
        clock.advance(by: .seconds(5))
        try await outbox.waitUntilDrained(timeout: .seconds(60))
        #expect(calls.withLock { $0 } == 2)
    }

    @Test("writes queued behind a delivered one are rewritten and saved before the delivered one is removed")
    func laterWritesAreRewrittenBeforeTheDeliveredOneIsRemoved() async throws {
        let storage = RecordingOutboxStorage()
        let outbox = Outbox(storage: storage, environment: ManualClock().environment())
        outbox.register("post") { delivery in
            guard delivery.entry.payload == Data("create tmp-1".utf8) else { return .delivered }
            return .delivered(rewritingLaterWrites: { later in
                Data(String(decoding: later.payload, as: UTF8.self).replacingOccurrences(of: "tmp-1", with: "42").utf8)
            })
        }
        outbox.connectivityChanged(isOnline: false)
        let create = try await outbox.enqueue(kind: "post", scope: "posts", payload: Data("create tmp-1".utf8))
        let rename = try await outbox.enqueue(kind: "post", scope: "posts", payload: Data("rename tmp-1".utf8))
        outbox.connectivityChanged(isOnline: true)
        #expect(try await outbox.drain().delivered == 2)
        let operations = storage.operations
        let rewritten = try #require(operations.firstIndex(of: .save(rename.id, payload: Data("rename 42".utf8))))
        let removed = try #require(operations.firstIndex(of: .attempt(rename.id, removing: [create.id])))
        #expect(rewritten < removed, "\(operations)")
    }

    @Test("a drain commits once per delivery: each delivered write is removed with the next write's attempt, the last on its own")
    func aDrainRemovesEachDeliveredWriteWithTheNextAttempt() async throws {
        let storage = RecordingOutboxStorage()
        let outbox = Outbox(storage: storage, environment: ManualClock().environment())
        outbox.register("note") { _ in .delivered }
        outbox.connectivityChanged(isOnline: false)
        var ids: [UUID] = []
        for n in 1...3 { ids.append(try await outbox.enqueue(kind: "note", scope: "notes", payload: Data("\(n)".utf8)).id) }
        let queued = storage.operations.count
        outbox.connectivityChanged(isOnline: true)
        #expect(try await outbox.drain().delivered == 3)
        #expect(Array(storage.operations.dropFirst(queued)) == [
            .attempt(ids[0], removing: []), .attempt(ids[1], removing: [ids[0]]), .attempt(ids[2], removing: [ids[1]]),
            .removeDelivered(ids[2]),
        ])
        #expect(try await storage.loadAll().isEmpty)
    }

    @Test("a drain cancelled (a shutdown) right after a delivery still removes the delivered write, not left to be sent again")
    func aCancelledDrainStillRemovesWhatItDelivered() async throws {
        let storage = RecordingOutboxStorage()
        let outbox = Outbox(storage: storage, environment: ManualClock().environment())
        let drain = Locked<Task<OutboxDrainReport, any Error>?>(nil)
        outbox.register("note") { _ in .delivered }
        // The app shuts down as soon as it hears the first write was delivered.
        let observation = outbox.observeWrites { event in
            if case .delivered = event { drain.withLock { $0?.cancel() } }
        }
        defer { observation.cancel() }
        outbox.connectivityChanged(isOnline: false)
        let first = try await outbox.enqueue(kind: "note", scope: "notes", payload: Data("1".utf8))
        let second = try await outbox.enqueue(kind: "note", scope: "notes", payload: Data("2".utf8))
        outbox.connectivityChanged(isOnline: true)
        // Made under the lock the observer takes: it cannot look before the task is there.
        let started = drain.withLock { state -> Task<OutboxDrainReport, any Error> in
            let task = Task { try await outbox.drain() }
            state = task
            return task
        }
        _ = await started.result
        #expect(storage.operations.contains(.removeDelivered(first.id)), "\(storage.operations)")
        #expect(try await storage.loadAll().map(\.id) == [second.id], "the delivered write is gone, the other kept")
    }

    @Test("a delivered write whose removal rode on an attempt that failed is removed when the drain leaves the scope")
    func aFailedAttemptSaveLeavesTheRemovalToTheEnd() async throws {
        let storage = RecordingOutboxStorage()
        let outbox = Outbox(storage: storage, environment: ManualClock().environment())
        let sent = Locked<[String]>([])
        outbox.register("note") { delivery in
            sent.withLock { $0.append(String(decoding: delivery.entry.payload, as: UTF8.self)) }
            return .delivered
        }
        outbox.connectivityChanged(isOnline: false)
        let first = try await outbox.enqueue(kind: "note", scope: "notes", payload: Data("1".utf8))
        let second = try await outbox.enqueue(kind: "note", scope: "notes", payload: Data("2".utf8))
        storage.failSaves(after: 1)  // the first attempt is saved; the second (with the removal) fails
        outbox.connectivityChanged(isOnline: true)
        let report = try await outbox.drain()
        #expect(report.delivered == 1 && sent.withLock { $0 } == ["1"], "the second is not sent without its attempt saved")
        #expect(storage.operations.suffix(2) == [.attempt(first.id, removing: []), .removeDelivered(first.id)])
        #expect(try await storage.loadAll().map(\.id) == [second.id], "the delivered write is gone, the other kept")
    }

    @Test("a write an earlier process parked for want of a handler is sent once a relaunched process registers its kind")
    func parkedUnknownKindIsRevivedAfterARelaunch() async throws {
        let directory = try TemporaryDirectory(prefix: "strata-outbox-revive")
        let clock = ManualClock()
        do {
            let earlier = Outbox(storage: FileOutboxStorage(directory: directory.url), environment: clock.environment())
            try await earlier.enqueue(kind: "like", scope: "likes", payload: Data("like 7".utf8))
            #expect(try await earlier.drain().parked == 1)
        }
        let relaunched = Outbox(storage: FileOutboxStorage(directory: directory.url), environment: clock.environment())
        let sent = Locked<[Data]>([])
        relaunched.register("like") { delivery in
            sent.withLock { $0.append(delivery.entry.payload) }
            return .delivered
        }
        #expect(try await relaunched.drain().delivered == 1)
        #expect(sent.withLock { $0 } == [Data("like 7".utf8)])
        #expect(try await relaunched.deadLetters().isEmpty)
    }

    @Test("an HTTP write queued with an Idempotency-Key keeps it on every attempt")
    func aCarriedIdempotencyKeyIsKept() async throws {
        let server = ScriptedServer { request, index in
            index == 0 ? HTTPReply(url: request.url, statusCode: 503) : HTTPReply(url: request.url, statusCode: 201)
        }
        let fixture = try OutboxFixture(server: server)
        let outbox = fixture.outbox()
        var (request, body) = OutboxFixture.post()
        request.headerFields[HTTPField.Name("Idempotency-Key")!] = "key-sent-by-the-app"
        try await outbox.enqueue(request, body: body)
        #expect(try await outbox.drain().deferred == 1)
        fixture.clock.advance(by: .seconds(10))
        #expect(try await outbox.drain().delivered == 1)
        #expect(server.requests.map { $0.request.headerFields[HTTPField.Name("Idempotency-Key")!] } == ["key-sent-by-the-app", "key-sent-by-the-app"])
    }

    @Test("a second unreadable copy of one entry is set aside beside the first, which is kept")
    func unreadableCopiesAreNeverRenamedOverEachOther() async throws {
        let directory = try TemporaryDirectory(prefix: "strata-outbox-aside")
        let storage = FileOutboxStorage(directory: directory.url, logger: LogCapture().logger)
        let id = UUID()
        let file = directory.url.appendingPathComponent("\(id.uuidString.lowercased()).outbox")
        for damage in ["first damaged copy", "second damaged copy"] {
            try Data(damage.utf8).write(to: file)
            #expect(try await storage.loadAll().isEmpty)
        }
        let aside = try FileManager.default.contentsOfDirectory(atPath: directory.url.path).sorted()
        #expect(aside == ["\(id.uuidString.lowercased()).outbox.unreadable", "\(id.uuidString.lowercased()).outbox.unreadable.1"])
        let kept = try aside.map { try String(contentsOf: directory.url.appendingPathComponent($0), encoding: .utf8) }
        #expect(kept == ["first damaged copy", "second damaged copy"])
    }
}
