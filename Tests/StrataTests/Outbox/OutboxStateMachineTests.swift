import Foundation
@testable import Strata
@testable import StrataOutbox
import StrataTesting
import Testing

/// The outbox's decisions, event by event: no tasks, no lock, no storage. The storage is a
/// dictionary the tests update as a real one would, so a crash (a new machine loaded from it) can be
/// taken anywhere.
@Suite("OutboxStateMachine")
struct OutboxStateMachineTests {
    typealias Machine = OutboxStateMachine
    static let start = Date(timeIntervalSince1970: 1_767_225_600)

    static func machine(scopes: Int = 4, retention: OutboxRetention = .unlimited) -> Machine {
        var machine = Machine(configuration: .init(maxConcurrentScopes: scopes, retention: retention))
        _ = machine.loaded([])
        return machine
    }

    static func save(_ decision: Machine.EnqueueDecision) throws -> OutboxEntry {
        guard case .save(let entry) = decision else { throw TestError("expected a save, got \(decision)") }
        return entry
    }

    static func enqueue(_ machine: inout Machine, _ name: String, scope: String = "s", kind: String = "k", at: Date = start) throws -> OutboxEntry {
        try save(machine.enqueue(
            id: UUID(), kind: kind, scope: scope, payload: Data(name.utf8), host: "api.example.com", baseVersion: nil, now: at))
    }

    @Test("a write whose save is in flight holds its scope: the one queued after it waits, even when its save finishes first")
    func aSavingWriteHoldsItsScope() throws {
        var machine = Self.machine()
        _ = machine.register("k")
        let a = try Self.enqueue(&machine, "A")
        let b = try Self.enqueue(&machine, "B")
        #expect(a.sequence < b.sequence)
        machine.saveFinished(b.id, .stored(b))
        #expect(machine.claimDueScopes(now: Self.start, excluding: []) == [], "A's save is open: nothing in the scope is deliverable")
        machine.saveFinished(a.id, .stored(a))
        #expect(machine.claimDueScopes(now: Self.start, excluding: []) == ["s"])
        guard case .deliver(let first) = machine.nextStep(in: "s", now: Self.start) else { Issue.record("no delivery"); return }
        #expect(first.id == a.id)
    }

    @Test("a write whose save was not stored leaves its scope to the next")
    func anAbsentSaveFreesTheScope() throws {
        var machine = Self.machine()
        _ = machine.register("k")
        let a = try Self.enqueue(&machine, "A")
        let b = try Self.enqueue(&machine, "B")
        machine.saveFinished(b.id, .stored(b))
        #expect(machine.saveFinished(a.id, .absent) == nil)
        #expect(machine.records[a.id] == nil)
        #expect(machine.claimDueScopes(now: Self.start, excluding: []) == ["s"])
        guard case .deliver(let first) = machine.nextStep(in: "s", now: Self.start) else { Issue.record("no delivery"); return }
        #expect(first.id == b.id)
    }

    @Test("an unknown outcome holds the scope until a read-back settles it; enqueueing the same id settles it, not a second copy")
    func anUnknownOutcomeIsSettledByReadBack() throws {
        var machine = Self.machine()
        _ = machine.register("k")
        let a = try Self.enqueue(&machine, "A")
        machine.saveFinished(a.id, .unknown)
        #expect(machine.records[a.id]?.phase == .unresolved)
        let again = machine.enqueue(id: a.id, kind: "k", scope: "s", payload: Data("A".utf8), host: nil, baseVersion: nil, now: Self.start)
        #expect(again == .resolve(a))
        #expect(machine.enqueue(id: a.id, kind: "k", scope: "s", payload: Data(), host: nil, baseVersion: nil, now: Self.start) == .wait)
        #expect(machine.saveFinished(a.id, .stored(a)) == a)
        #expect(machine.enqueue(id: a.id, kind: "k", scope: "s", payload: Data(), host: nil, baseVersion: nil, now: Self.start) == .existing(a))
    }

    @Test("a drain settles an unresolved head before anything behind it")
    func aDrainSettlesAnUnresolvedHead() throws {
        var machine = Self.machine()
        _ = machine.register("k")
        let a = try Self.enqueue(&machine, "A")
        let b = try Self.enqueue(&machine, "B")
        machine.saveFinished(a.id, .unknown)
        machine.saveFinished(b.id, .stored(b))
        #expect(machine.claimDueScopes(now: Self.start, excluding: []) == ["s"])
        #expect(machine.nextStep(in: "s", now: Self.start) == .resolve(a))
        machine.saveFinished(a.id, .stored(a))
        guard case .deliver(let first) = machine.nextStep(in: "s", now: Self.start) else { Issue.record("no delivery"); return }
        #expect(first.id == a.id)
    }

    @Test("discard and retry of one dead letter: whichever begins first wins, the other is refused")
    func discardAndRetryCannotBothProceed() throws {
        var machine = Self.machine()
        let a = try Self.enqueue(&machine, "A", kind: "unknown")
        machine.saveFinished(a.id, .stored(a))
        _ = machine.claimDueScopes(now: Self.start, excluding: [])
        guard case .park(let entry, let letter) = machine.nextStep(in: "s", now: Self.start) else { Issue.record("not parked"); return }
        var parked = entry
        parked.state = .parked(letter)
        #expect(machine.parked(parked) == nil)
        _ = machine.releaseScope("s")

        #expect(try machine.beginDiscard(a.id).get().id == a.id)
        #expect(machine.beginRequeue(a.id, now: Self.start) == .failure(.busy))
        #expect(machine.register("unknown") == [], "a revival skips a write being discarded")
        machine.discardFinished(a.id, removed: true)
        #expect(machine.records[a.id] == nil)
        #expect(machine.beginRequeue(a.id, now: Self.start) == .failure(.notFound))
        #expect(machine.enqueue(id: a.id, kind: "k", scope: "s", payload: Data(), host: nil, baseVersion: nil, now: Self.start) == .discarded)
        #expect(machine.loaded([parked]) == [], "loaded only once")
    }

    @Test("a kind registered while its write is being parked for want of a handler revives it")
    func registeringWhileParkingRevives() throws {
        var machine = Self.machine()
        let a = try Self.enqueue(&machine, "A", kind: "late")
        machine.saveFinished(a.id, .stored(a))
        _ = machine.claimDueScopes(now: Self.start, excluding: [])
        guard case .park(let entry, let letter) = machine.nextStep(in: "s", now: Self.start) else { Issue.record("not parked"); return }
        #expect(machine.register("late") == [], "not parked yet: its park is being saved")
        var parked = entry
        parked.state = .parked(letter)
        #expect(machine.parked(parked)?.id == a.id, "parked now, and its kind has a handler: revive it")
    }

    @Test("a host answering wakes writes that could not reach it, not writes that timed out there")
    func aHostAnswerWakesOnlyUnreachableWrites() throws {
        var machine = Self.machine()
        _ = machine.register("k")
        let later = Self.start.addingTimeInterval(300)
        var ids: [OutboxFailure.Class: UUID] = [:]
        for (index, failureClass) in [OutboxFailure.Class.unreachable, .timedOut].enumerated() {
            let entry = try Self.enqueue(&machine, "\(failureClass)", scope: "s\(index)")
            machine.saveFinished(entry.id, .stored(entry))
            _ = machine.claimDueScopes(now: Self.start, excluding: [])
            guard case .deliver(var attempt) = machine.nextStep(in: "s\(index)", now: Self.start) else { Issue.record("no delivery"); return }
            attempt.lastFailure = OutboxFailure(class: failureClass, message: "no answer", at: Self.start)
            attempt.nextAttemptAt = later
            machine.deferred(attempt)
            _ = machine.releaseScope("s\(index)")
            ids[failureClass] = entry.id
        }
        let woke = machine.hostAnswered("API.example.com", now: Self.start)
        #expect(woke)
        #expect(machine.records[ids[.unreachable]!]?.entry.nextAttemptAt == Self.start)
        #expect(machine.records[ids[.timedOut]!]?.entry.nextAttemptAt == later, "the backoff a busy server earned stays")
        #expect(machine.connectivityChanged(isOnline: false, now: Self.start) == false)
        let cameOnline = machine.connectivityChanged(isOnline: true, now: Self.start)
        #expect(cameOnline)
        #expect(machine.records[ids[.timedOut]!]?.entry.nextAttemptAt == Self.start, "coming back online wakes both")
    }

    static func conflict409(at date: Date) -> Outbox.Classified {
        Outbox.classify(
            HTTPError.status(code: 409, url: URL(string: "https://api.example.com/posts")!, headerFields: [:], body: Data("busy".utf8)),
            at: date)
    }

    @Test(
        "a bare 409 after an attempt that got no answer is retried as in flight, a bounded number of times, before the conflict policy",
        arguments: [Machine.ConflictPolicyKind.serverWins, .manual, .merge, .clientWins])
    func aBare409AfterNoAnswerIsInFlight(policy: Machine.ConflictPolicyKind) {
        let retry = OutboxRetryPolicy(initialDelay: .seconds(1), jitter: 0, inFlightConflictRetries: 2)
        var entry = OutboxEntry(id: UUID(), sequence: 1, scope: "s", kind: "k", payload: Data(), baseVersion: "\"v1\"", createdAt: Self.start)
        entry.attempts = 1
        entry.lastFailure = OutboxFailure(class: .timedOut, message: "timed out", at: Self.start)
        var context = Machine.DeliveryContext(precondition: entry.baseVersion)
        for round in 1...2 {
            entry.attempts += 1
            let decision = Machine.decide(
                after: Self.conflict409(at: Self.start), entry: entry, context: &context, conflicts: policy,
                hasAuthRefresh: false, retry: retry, retention: .unlimited)
            guard case .retryLater(let waiting) = decision else { Issue.record("round \(round): \(decision)"); return }
            #expect(waiting.inFlightConflicts == round)
            #expect(waiting.lastFailure?.class == .transient)
            entry = waiting
        }
        entry.attempts += 1
        let decision = Machine.decide(
            after: Self.conflict409(at: Self.start), entry: entry, context: &context, conflicts: policy,
            hasAuthRefresh: false, retry: retry, retention: .unlimited)
        switch (policy, decision) {
        case (.serverWins, .dropServerWins), (.manual, .park), (.merge, .merge), (.clientWins, .resend): break
        default: Issue.record("after the bound, the policy decides: \(decision)")
        }
    }

    @Test("a 409 after an answered attempt is a conflict at once; a changed resend gets a new key")
    func a409AfterAnAnswerIsAConflict() {
        var entry = OutboxEntry(id: UUID(), sequence: 1, scope: "s", kind: "k", payload: Data(), baseVersion: "\"v1\"", createdAt: Self.start)
        entry.attempts = 1
        var context = Machine.DeliveryContext(precondition: entry.baseVersion)
        let decision = Machine.decide(
            after: Self.conflict409(at: Self.start), entry: entry, context: &context, conflicts: .clientWins,
            hasAuthRefresh: false, retry: OutboxRetryPolicy(), retention: .unlimited)
        guard case .resend(let resent) = decision else { Issue.record("\(decision)"); return }
        #expect(resent.keyRevision == 1)
        #expect(resent.idempotencyKey == entry.idempotencyKey + "-r1")
        #expect(context.precondition == nil)
    }

    // MARK: Random interleavings

    /// Seeds per run: 1,000 by default (CI); `STRATA_INTERLEAVING_SEEDS=20000` for a longer search.
    static let seeds = ProcessInfo.processInfo.environment["STRATA_INTERLEAVING_SEEDS"].flatMap { UInt64($0) } ?? 1_000

    @Test("random interleavings of enqueue, saves, deliveries, answers, crashes, discards, retries and registrations keep every invariant",
          arguments: 0..<4)
    func randomInterleavings(batch: UInt64) async throws {
        let perBatch = (Self.seeds + 3) / 4
        for seed in batch * perBatch..<(batch + 1) * perBatch {
            await Task.yield()  // between seeds: a long synchronous search would hold a cooperative thread
            var world = World(seed: seed)
            try world.run(steps: 300)
        }
    }
}

/// A model of one outbox over time: the machine, a durable storage (a dictionary), the operations in
/// flight (saves, removes, handler attempts), crashes and relaunches; the invariants are checked
/// after every step.
struct World {
    typealias Machine = OutboxStateMachine

    enum Operation {
        case enqueueSave(OutboxEntry)
        case attemptSave(OutboxEntry)
        case handler(OutboxEntry)
        case requeueSave(OutboxEntry)
        case discardRemove(UUID)
    }

    var random: SplitMix64
    let seed: UInt64
    var machine: Machine
    var storage: [UUID: OutboxEntry] = [:]
    var operations: [Operation] = []
    var now = OutboxStateMachineTests.start
    var kinds: Set<String> = []
    /// When each write took its place in its scope's queue (enqueue or requeue), across relaunches.
    var placedAt: [UUID: Int] = [:]
    var clock = 0
    var acknowledged: Set<UUID> = []
    var serverWon: Set<UUID> = []
    var discardedForGood: Set<UUID> = []
    /// Removed by a discard whose call never returned (the process died first).
    var removedByUnfinishedDiscard: Set<UUID> = []
    var everStored: Set<UUID> = []
    var step = 0

    mutating func store(_ entry: OutboxEntry) {
        storage[entry.id] = entry
        everStored.insert(entry.id)
    }

    init(seed: UInt64) {
        self.seed = seed
        random = SplitMix64(seed: seed)
        machine = Self.newMachine()
        _ = machine.loaded([])
    }

    static func newMachine() -> Machine {
        Machine(configuration: .init(maxConcurrentScopes: 2, retention: OutboxRetention(maxAttempts: 6, maxAge: nil)))
    }

    mutating func chance(_ percent: UInt64) -> Bool { random.next() % 100 < percent }
    mutating func pick<T>(_ values: [T]) -> T? { values.isEmpty ? nil : values[Int(random.next() % UInt64(values.count))] }

    func fail(_ message: String) throws -> Never {
        throw TestError("seed \(seed), step \(step): \(message)")
    }

    mutating func run(steps: Int) throws {
        for _ in 0..<steps {
            step += 1
            try advance()
            try checkInvariants()
        }
    }

    mutating func place(_ entry: OutboxEntry) {
        clock += 1
        placedAt[entry.id] = clock
    }

    mutating func advance() throws {
        switch random.next() % 12 {
        case 0, 1:
            let scope = pick(["a", "b", "c"])!
            let kind = pick(["k", "k", "late"])!
            if case .save(let entry) = machine.enqueue(
                id: UUID(), kind: kind, scope: scope, payload: Data(), host: "h", baseVersion: nil, now: now) {
                place(entry)
                operations.append(.enqueueSave(entry))
            }
        case 2, 3, 4:
            try finishAnOperation()
        case 5, 6:
            try drainStep()
        case 7:
            if chance(30) { try crashAndRelaunch() }
        case 8:
            let parked = machine.records.values.filter { $0.phase == .parked }.map(\.entry.id).sorted { $0.uuidString < $1.uuidString }
            if let id = pick(parked) {
                if chance(50) {
                    if case .success = machine.beginDiscard(id) { operations.append(.discardRemove(id)) }
                } else if case .success(let entry) = machine.beginRequeue(id, now: now) {
                    place(entry)
                    operations.append(.requeueSave(entry))
                }
            }
        case 9:
            if chance(20) { register(pick(["k", "late"])!) }
        case 10:
            now = now.addingTimeInterval(Double(random.next() % 30))
        default:
            _ = machine.connectivityChanged(isOnline: chance(85), now: now)
        }
    }

    mutating func register(_ kind: String) {
        kinds.insert(kind)
        for entry in machine.register(kind) { revive(entry.id) }
    }

    mutating func revive(_ id: UUID) {
        if case .success(let entry) = machine.beginRequeue(id, now: now, onlyIfUnknownKind: true) {
            place(entry)
            operations.append(.requeueSave(entry))
        }
    }

    /// Claims due scopes and takes one step in each claimed scope whose head is not in flight.
    mutating func drainStep() throws {
        _ = machine.claimDueScopes(now: now, excluding: [])
        for scope in machine.busyScopes.sorted() {
            let inFlight = operations.contains { operation in
                switch operation {
                case .attemptSave(let entry), .handler(let entry): entry.scope == scope
                default: false
                }
            }
            if inFlight { continue }
            switch machine.nextStep(in: scope, now: now) {
            case .release:
                _ = machine.releaseScope(scope)
            case .deliver(let entry):
                try checkDeliveryOrder(entry)
                operations.append(.attemptSave(entry))
            case .park(let entry, let letter):
                var parked = entry
                parked.state = .parked(letter)
                store(parked)
                if let revived = machine.parked(parked) { revive(revived.id) }
            case .resolve(let entry):
                machine.saveFinished(entry.id, storage[entry.id].map { .stored($0) } ?? .absent)
            }
        }
    }

    /// At the start of a delivery: nothing of its scope placed before it is still queued.
    func checkDeliveryOrder(_ entry: OutboxEntry) throws {
        guard let mine = placedAt[entry.id] else { try fail("delivering a write never placed") }
        for record in machine.records.values where record.entry.scope == entry.scope && record.phase.isQueued && record.entry.id != entry.id {
            if let theirs = placedAt[record.entry.id], theirs < mine {
                try fail("delivering \(entry.sequence) of scope \(entry.scope) while \(record.entry.sequence), queued before it, is \(record.phase)")
            }
        }
    }

    mutating func finishAnOperation() throws {
        guard !operations.isEmpty else { return }
        let index = Int(random.next() % UInt64(operations.count))
        let operation = operations.remove(at: index)
        switch operation {
        case .enqueueSave(let entry):
            switch random.next() % 4 {
            case 0:  // saved
                store(entry)
                machine.saveFinished(entry.id, .stored(entry))
            case 1:  // failed, nothing stored; the read-back finds nothing
                machine.saveFinished(entry.id, .absent)
            case 2:  // failed after it committed; the read-back finds it
                store(entry)
                machine.saveFinished(entry.id, .stored(entry))
            default:  // failed, and the read-back failed too
                if chance(50) { store(entry) }
                machine.saveFinished(entry.id, .unknown)
            }
        case .attemptSave(let entry):
            if chance(90) {
                store(entry)
                operations.append(.handler(entry))
            } else {
                machine.heldBack(entry.id, until: now.addingTimeInterval(5))
            }
        case .handler(let entry):
            try answer(entry)
        case .requeueSave(let entry):
            let saved = chance(90)
            if saved { store(entry) }
            machine.requeueFinished(entry.id, saved: saved)
        case .discardRemove(let id):
            let removed = chance(90)
            if removed {
                storage[id] = nil
                discardedForGood.insert(id)
            }
            machine.discardFinished(id, removed: removed)
        }
    }

    mutating func answer(_ entry: OutboxEntry) throws {
        let url = URL(string: "https://h/x")!
        let error: any Error
        switch random.next() % 6 {
        case 0, 1:
            acknowledged.insert(entry.id)
            storage[entry.id] = nil
            machine.delivered(entry.id)
            return
        case 2: error = HTTPError.transport(url: url, reason: "timed out", underlying: POSIXError(.ETIMEDOUT))
        case 3: error = HTTPError.status(code: 503, url: url, headerFields: [:], body: Data())
        case 4: error = HTTPError.status(code: 409, url: url, headerFields: [:], body: Data())
        default: error = HTTPError.status(code: 422, url: url, headerFields: [:], body: Data())
        }
        var context = Machine.DeliveryContext(precondition: nil)
        let decision = Machine.decide(
            after: Outbox.classify(error, at: now), entry: entry, context: &context, conflicts: .serverWins,
            hasAuthRefresh: false, retry: OutboxRetryPolicy(jitter: 0, inFlightConflictRetries: 2), retention: machine.configuration.retention)
        switch decision {
        case .retryLater(let waiting):
            store(waiting)
            machine.deferred(waiting)
        case .park(let failed, let letter):
            var parked = failed
            parked.state = .parked(letter)
            store(parked)
            if let revived = machine.parked(parked) { revive(revived.id) }
        case .dropServerWins:
            serverWon.insert(entry.id)
            storage[entry.id] = nil
            machine.delivered(entry.id)
        case .refreshAuthorization, .resend, .merge:
            try fail("unexpected decision \(decision)")
        }
    }

    /// The process dies: every operation in flight is lost (a save may have landed or not), and a
    /// new machine reads the storage.
    mutating func crashAndRelaunch() throws {
        for operation in operations {
            switch operation {
            case .enqueueSave(let entry), .requeueSave(let entry), .attemptSave(let entry):
                if chance(50) { store(entry) }
            case .discardRemove(let id):
                if chance(50) {
                    storage[id] = nil
                    removedByUnfinishedDiscard.insert(id)
                }
            case .handler:
                break  // the answer is lost; the write is still stored and is sent again
            }
        }
        operations.removeAll()
        machine = Self.newMachine()
        for kind in kinds.sorted() { _ = machine.register(kind) }
        for entry in machine.loaded(Array(storage.values)) { revive(entry.id) }
        _ = machine.connectivityChanged(isOnline: true, now: now)
    }

    func checkInvariants() throws {
        // The queues hold exactly the queued records, by sequence, each once.
        var seen = Set<UUID>()
        for (scope, queue) in machine.queues {
            if queue.isEmpty { try fail("empty queue kept for \(scope)") }
            var previous: UInt64?
            for id in queue {
                guard let record = machine.records[id] else { try fail("queue \(scope) holds a missing id") }
                if !record.phase.isQueued { try fail("queue \(scope) holds a \(record.phase) write") }
                if record.entry.scope != scope { try fail("a write of \(record.entry.scope) in the queue of \(scope)") }
                if let previous, previous >= record.entry.sequence { try fail("queue \(scope) out of sequence order") }
                if !seen.insert(id).inserted { try fail("a write queued twice") }
                previous = record.entry.sequence
            }
        }
        let queuedRecords = machine.records.values.filter { $0.phase.isQueued }.count
        if queuedRecords != seen.count { try fail("\(queuedRecords) queued records, \(seen.count) in queues") }
        // One delivery at a time per scope, and only in a busy scope.
        var delivering: [String: Int] = [:]
        for record in machine.records.values where record.phase == .delivering {
            delivering[record.entry.scope, default: 0] += 1
            if !machine.busyScopes.contains(record.entry.scope) && !machine.records.isEmpty {
                try fail("a write delivering in a scope no drain holds")
            }
        }
        if delivering.values.contains(where: { $0 > 1 }) { try fail("two deliveries in one scope") }
        // The status counts kept incrementally equal a recount.
        var pending: [String: Int] = [:]
        var parked = 0
        for record in machine.records.values {
            switch record.phase.countsAsPending {
            case true?: pending[record.entry.scope, default: 0] += 1
            case false?: parked += 1
            case nil: break
            }
        }
        if machine.status.pendingByScope != pending || machine.status.parked != parked {
            try fail("status \(machine.status.pendingByScope), \(machine.status.parked) parked; a recount gives \(pending), \(parked)")
        }
        // A discarded write never comes back.
        for id in discardedForGood {
            if machine.records[id] != nil { try fail("a discarded write is back in the machine") }
            if storage[id] != nil { try fail("a discarded write is back in the storage") }
        }
        // A write leaves the storage only after its acknowledgement, a server-wins conflict or a
        // discard; and once acknowledged it is gone for good.
        for id in everStored where storage[id] == nil {
            if !acknowledged.contains(id) && !serverWon.contains(id) && !discardedForGood.contains(id)
                && !removedByUnfinishedDiscard.contains(id) {
                try fail("a stored write left the storage unacknowledged")
            }
        }
        for id in acknowledged.union(serverWon) where machine.records[id] != nil || storage[id] != nil {
            try fail("a delivered write is back")
        }
        // No write is in two phases: records are keyed by id, and an operation in flight matches its phase.
        for operation in operations {
            switch operation {
            case .enqueueSave(let entry):
                if machine.records[entry.id]?.phase != .saving { try fail("an enqueue save in flight for a \(String(describing: machine.records[entry.id]?.phase)) write") }
            case .attemptSave(let entry), .handler(let entry):
                if machine.records[entry.id]?.phase != .delivering { try fail("an attempt in flight for a \(String(describing: machine.records[entry.id]?.phase)) write") }
            case .requeueSave(let entry):
                if machine.records[entry.id]?.phase != .requeueing { try fail("a requeue in flight for a \(String(describing: machine.records[entry.id]?.phase)) write") }
            case .discardRemove(let id):
                if machine.records[id]?.phase != .discarding { try fail("a discard in flight for a \(String(describing: machine.records[id]?.phase)) write") }
            }
        }
    }
}
