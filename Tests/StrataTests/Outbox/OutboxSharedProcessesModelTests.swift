import Foundation
@testable import Strata
@testable import StrataOutbox
import StrataTesting
import Testing

/// Several processes sharing one outbox storage, as a model with no task, no lock and no I/O: each
/// process has its own ``OutboxStateMachine`` and claimant, the storage (entries, scope claims, the
/// sequence) is shared and each of its operations is atomic, as the real storages make them. Seeded
/// random interleavings of enqueues, saves, claims, deliveries, discoveries, crashes and relaunches;
/// after every step and at the end it checks what a shared outbox promises: a write is sent once (twice
/// only when its process died with its request on the way), writes of one scope arrive in the order
/// they were acknowledged, and every acknowledged write arrives.
@Suite("One outbox, several processes: the model")
struct OutboxSharedProcessesModelTests {
    @Test("claims: free, lapsed, gone or one's own is taken; a live holder's is not; a release removes only one's own")
    func theClaimRule() {
        let now = Date(timeIntervalSince1970: 1_000)
        let me = OutboxClaimant(processID: 10, host: "h")
        let other = OutboxClaimant(processID: 11, host: "h")
        let later = now.addingTimeInterval(90)
        let held = OutboxScopeClaim(claimant: other, expiresAt: now.addingTimeInterval(30))
        #expect(OutboxClaimRule.decide(held: nil, by: me, until: later, now: now, isGone: { _ in false }).outcome == .claimed)
        #expect(OutboxClaimRule.decide(held: held, by: me, until: later, now: now, isGone: { _ in false }).outcome == .heldElsewhere(held))
        #expect(OutboxClaimRule.decide(held: held, by: me, until: later, now: now, isGone: { $0 == other }).outcome == .claimed)
        #expect(OutboxClaimRule.decide(held: held, by: me, until: later, now: now.addingTimeInterval(30), isGone: { _ in false }).outcome == .claimed)
        let mine = OutboxScopeClaim(claimant: me, expiresAt: now.addingTimeInterval(5))
        let renewed = OutboxClaimRule.decide(held: mine, by: me, until: later, now: now, isGone: { _ in false })
        #expect(renewed.outcome == .claimed && renewed.store?.expiresAt == later)
        #expect(OutboxClaimRule.releases(mine, by: me) && !OutboxClaimRule.releases(held, by: me) && !OutboxClaimRule.releases(nil, by: me))
    }

    @Test("a process of this host that no longer exists is gone; this process, another host's, and an unknown host's are not")
    func goneProcesses() throws {
        let host = OutboxClaimant.hostIdentity
        try #require(!host.isEmpty, "Linux gives a boot id and a PID namespace")
        #expect(!OutboxClaimant.isGone(OutboxClaimant.thisProcess()))
        #expect(!OutboxClaimant.isGone(OutboxClaimant(processID: 1, host: host)), "PID 1 exists")
        let unused = Int32.max - 7  // beyond pid_max
        #expect(OutboxClaimant.isGone(OutboxClaimant(processID: unused, host: host)))
        #expect(!OutboxClaimant.isGone(OutboxClaimant(processID: unused, host: "another-host")))
        #expect(!OutboxClaimant.isGone(OutboxClaimant(processID: unused, host: "")))
    }

    @Test("reading a claimed scope back: writes gone from the storage leave, others' writes join, changes made elsewhere are taken, changes only this process knows are kept")
    func reconcile() throws {
        var machine = OutboxStateMachine(configuration: .init(maxConcurrentScopes: 4, retention: .unlimited))
        _ = machine.loaded([])
        _ = machine.register("k")
        let now = Date(timeIntervalSince1970: 1_000)
        func enqueue(_ sequence: UInt64) throws -> OutboxEntry {
            guard case .save(let entry) = machine.enqueue(
                id: UUID(), kind: "k", scope: "s", payload: Data(), host: "h", baseVersion: nil, now: now, sequence: sequence)
            else { throw TestError("no save") }
            machine.saveFinished(entry.id, .stored(entry))
            return entry
        }
        let delivered = try enqueue(10)
        var retried = try enqueue(12)
        let local = try enqueue(14)
        #expect(machine.nextSequence == 15)
        // Another process queued one between them (sequence 13) and attempted `retried` once.
        let foreign = OutboxEntry(
            id: UUID(), sequence: 13, scope: "s", kind: "k", payload: Data(), host: "h", baseVersion: nil, createdAt: now, invalidates: [])
        retried.attempts += 1
        retried.nextAttemptAt = now.addingTimeInterval(30)
        // This process made `local` due by connectivity (never saved): the stored copy is older.
        _ = machine.connectivityChanged(isOnline: false, now: now)
        _ = machine.connectivityChanged(isOnline: true, now: now)
        #expect(machine.claimDueScopes(now: now, excluding: []) == ["s"])
        let found = machine.reconcile(scope: "s", stored: [retried, foreign, local])
        #expect(found.left.map(\.id) == [delivered.id])
        #expect(found.joined.map(\.id) == [foreign.id])
        #expect(machine.queues["s"] == [retried.id, foreign.id, local.id])
        #expect(machine.entry(retried.id)?.attempts == 1)
        // Discovery while the scope is busy here adds nothing (its drain reads it back itself).
        let late = OutboxEntry(
            id: UUID(), sequence: 20, scope: "s", kind: "k", payload: Data(), host: "h", baseVersion: nil, createdAt: now, invalidates: [])
        #expect(machine.discovered([late]).isEmpty)
        _ = machine.releaseScope("s")
        #expect(machine.discovered([late]).map(\.id) == [late.id])
        #expect(machine.nextSequence == 21)
    }

    /// Seeds per run: 1,000 by default; `STRATA_INTERLEAVING_SEEDS` for a longer search.
    static let seeds = ProcessInfo.processInfo.environment["STRATA_INTERLEAVING_SEEDS"].flatMap { UInt64($0) } ?? 1_000

    @Test("random interleavings of three processes enqueueing, draining, discovering, refreshing, crashing and relaunching keep every promise", arguments: 0..<4)
    func randomInterleavings(batch: UInt64) async throws {
        let perBatch = (Self.seeds + 3) / 4
        for seed in batch * perBatch..<(batch + 1) * perBatch {
            await Task.yield()
            var world = SharedWorld(seed: seed)
            try world.run(steps: 250)
            try world.quiesce()
        }
    }
}

/// Three processes and their shared storage; see ``OutboxSharedProcessesModelTests``.
struct SharedWorld {
    typealias Machine = OutboxStateMachine

    struct Process {
        var machine: Machine
        var claimant: OutboxClaimant
        var alive = true
        /// Scopes claimed in the storage and busy in the machine.
        var draining: Set<String> = []
    }

    enum Operation {
        /// An enqueue the storage has numbered (`nextSequence(after:)`), before its machine takes
        /// the number: a process's concurrent enqueues take theirs in any order.
        case numbered(process: Int, sequence: UInt64, startedAt: Int)
        /// A save of a new write, then its acknowledgement.
        case enqueueSave(process: Int, entry: OutboxEntry, startedAt: Int)
        /// A request on its way (the attempt already saved).
        case request(process: Int, entry: OutboxEntry)
    }

    var random: SplitMix64
    let seed: UInt64
    var processes: [Process] = []
    var storage: [UUID: OutboxEntry] = [:]
    var claims: [String: OutboxScopeClaim] = [:]
    var sequence: UInt64 = 0
    var operations: [Operation] = []
    var now = Date(timeIntervalSince1970: 1_767_225_600)
    let lease: TimeInterval = 10_000
    var step = 0
    var pid: Int32 = 100

    /// Per write: the step its enqueue started, the step it was acknowledged.
    var started: [UUID: Int] = [:]
    var acknowledged: [UUID: Int] = [:]
    /// What the server received, in order.
    var arrivals: [OutboxEntry] = []
    /// Writes whose request was on its way when their process died: they may arrive twice.
    var mayRepeat: Set<UUID> = []
    /// What happened to each write, for a failure's message.
    var history: [String] = []
    mutating func note(_ entry: OutboxEntry, _ what: String) {
        history.append("step \(step): \(entry.id.uuidString.prefix(8)) seq \(entry.sequence) scope \(entry.scope): \(what)")
    }

    init(seed: UInt64) {
        self.seed = seed
        random = SplitMix64(seed: seed)
        for _ in 0..<3 { processes.append(launch()) }
    }

    mutating func launch() -> Process {
        pid += 1
        var machine = Machine(configuration: .init(maxConcurrentScopes: 2, retention: .unlimited))
        _ = machine.register("k")
        _ = machine.loaded(Array(storage.values))
        return Process(machine: machine, claimant: OutboxClaimant(processID: pid, host: "model"))
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
            try check()
        }
    }

    /// Every process that crashed comes back, then all drain until nothing is left in flight or due.
    mutating func quiesce() throws {
        for index in processes.indices where !processes[index].alive { processes[index] = launch() }
        for _ in 0..<2_000 {
            step += 1
            now = now.addingTimeInterval(60)
            if !operations.isEmpty {
                try finish(at: 0)
            } else {
                var progressed = false
                for index in processes.indices {
                    _ = processes[index].machine.discovered(Array(storage.values))
                    _ = processes[index].machine.connectivityChanged(isOnline: false, now: now)
                    _ = processes[index].machine.connectivityChanged(isOnline: true, now: now)
                    progressed = try drain(index) || progressed
                }
                if !progressed && operations.isEmpty { break }
            }
            try check()
        }
        try checkOrder()
        let arrived = Set(arrivals.map(\.id))
        for id in acknowledged.keys where !arrived.contains(id) {
            try fail("write \(id) was acknowledged and never arrived; stored: \(storage[id].map { "\($0)" } ?? "no")")
        }
    }

    mutating func advance() throws {
        switch random.next() % 10 {
        case 0, 1, 2:
            try enqueue(Int(random.next() % 3))
        case 3, 4, 5:
            if !operations.isEmpty { try finish(at: Int(random.next() % UInt64(operations.count))) }
        case 6, 7:
            _ = try drain(Int(random.next() % 3))
        case 8:
            let index = Int(random.next() % 3)
            if processes[index].alive {
                // A drain's look for other processes' writes, or the app told that another process changed the storage.
                if chance(50) {
                    _ = processes[index].machine.discovered(Array(storage.values))
                } else {
                    _ = processes[index].machine.refreshed(Array(storage.values))
                }
            }
        default:
            if chance(40) { crashOrRelaunch(Int(random.next() % 3)) } else { now = now.addingTimeInterval(1) }
        }
    }

    mutating func enqueue(_ index: Int) throws {
        guard processes[index].alive else { return }
        // The storage numbers it (one atomic step); later the machine takes its place, then the save.
        sequence = max(sequence, processes[index].machine.nextSequence &- 1) &+ 1
        operations.append(.numbered(process: index, sequence: sequence, startedAt: step))
    }

    /// The machine of `index` takes the number the storage gave one of its enqueues.
    mutating func takeNumber(_ index: Int, sequence issued: UInt64, startedAt: Int) throws {
        guard processes[index].alive else { return }
        let scope = pick(["a", "b", "c"])!
        guard case .save(let entry) = processes[index].machine.enqueue(
            id: UUID(), kind: "k", scope: scope, payload: Data(), host: "h", baseVersion: nil, now: now, sequence: issued)
        else { try fail("a new write was not saved") }
        started[entry.id] = startedAt
        note(entry, "queued by process \(index) (storage sequence \(issued))")
        operations.append(.enqueueSave(process: index, entry: entry, startedAt: startedAt))
    }

    mutating func finish(at position: Int) throws {
        let operation = operations.remove(at: position)
        switch operation {
        case .numbered(let index, let issued, let startedAt):
            try takeNumber(index, sequence: issued, startedAt: startedAt)
        case .enqueueSave(let index, let entry, _):
            guard processes[index].alive else { return }
            storage[entry.id] = entry
            processes[index].machine.saveFinished(entry.id, .stored(entry))
            acknowledged[entry.id] = step
            note(entry, "acknowledged to process \(index)")
        case .request(let index, let entry):
            guard processes[index].alive else { return }
            if chance(15) {
                // A transient failure (refused before it was applied): saved with its backoff; the
                // scope stops for now.
                var waiting = entry
                waiting.nextAttemptAt = now.addingTimeInterval(5)
                storage[entry.id] = waiting
                processes[index].machine.deferred(waiting)
                release(entry.scope, in: index)
            } else {
                arrivals.append(entry)
                note(entry, "arrived from process \(index)")
                storage[entry.id] = nil
                processes[index].machine.delivered(entry.id)
                try continueScope(entry.scope, in: index)
            }
        }
    }

    /// One drain pass of process `index`: claims its due scopes (in the storage too) and starts each.
    mutating func drain(_ index: Int) throws -> Bool {
        guard processes[index].alive else { return false }
        var started = false
        for scope in processes[index].machine.claimDueScopes(now: now, excluding: processes[index].draining) {
            let decision = OutboxClaimRule.decide(
                held: claims[scope], by: processes[index].claimant, until: now.addingTimeInterval(lease), now: now,
                isGone: { claimant in !processes.contains { $0.alive && $0.claimant.id == claimant.id } })
            guard let claim = decision.store else {
                processes[index].machine.heldElsewhere(scope, until: now.addingTimeInterval(1))
                _ = processes[index].machine.releaseScope(scope)
                continue
            }
            claims[scope] = claim
            history.append("step \(step): process \(index) claims \(scope)")
            processes[index].draining.insert(scope)
            _ = processes[index].machine.reconcile(scope: scope, stored: storage.values.filter { $0.scope == scope })
            started = try continueScope(scope, in: index) || started
        }
        return started
    }

    /// The next step in a scope process `index` drains: a request on its way, or the scope released.
    @discardableResult
    mutating func continueScope(_ scope: String, in index: Int) throws -> Bool {
        guard processes[index].draining.contains(scope) else { try fail("continuing a scope not claimed") }
        if processes[index].machine.needsReread(scope) {
            _ = processes[index].machine.reconcile(scope: scope, stored: storage.values.filter { $0.scope == scope })
        }
        switch processes[index].machine.nextStep(in: scope, now: now) {
        case .deliver(let entry):
            note(entry, "sent by process \(index)")
            storage[entry.id] = entry  // the attempt is saved before the request
            operations.append(.request(process: index, entry: entry))
            return true
        case .park, .resolve, .release:
            release(scope, in: index)
            return false
        }
    }

    mutating func release(_ scope: String, in index: Int) {
        if OutboxClaimRule.releases(claims[scope], by: processes[index].claimant) { claims[scope] = nil }
        processes[index].draining.remove(scope)
        _ = processes[index].machine.releaseScope(scope)
    }

    mutating func crashOrRelaunch(_ index: Int) {
        if processes[index].alive {
            history.append("step \(step): process \(index) dies")
            processes[index].alive = false
            for case .request(let owner, let entry) in operations where owner == index {
                mayRepeat.insert(entry.id)
                // The request may have reached the server before the process died.
                if chance(50) { arrivals.append(entry); note(entry, "arrived as process \(index) died") }
            }
            var kept: [Operation] = []
            for operation in operations {
                switch operation {
                case .enqueueSave(let owner, let entry, _) where owner == index:
                    // A save in flight may have reached the disk (then it is stored, never acknowledged).
                    if chance(50) { storage[entry.id] = entry }
                case .request(let owner, _) where owner == index, .numbered(let owner, _, _) where owner == index:
                    break
                default:
                    kept.append(operation)
                }
            }
            operations = kept
        } else {
            processes[index] = launch()
        }
    }

    func check() throws {
        // Once: a write arrives twice only when its process died with its request on the way.
        var seen: Set<UUID> = []
        for entry in arrivals where !seen.insert(entry.id).inserted && !mayRepeat.contains(entry.id) {
            try fail("write \(entry.id) (scope \(entry.scope)) arrived twice")
        }
        // One place in the queue per write: no two writes share a sequence, in the storage or in
        // a live process's machine.
        var numbers: [UInt64: UUID] = [:]
        for entry in storage.values {
            if let other = numbers.updateValue(entry.id, forKey: entry.sequence), other != entry.id {
                try fail("writes \(other) and \(entry.id) share sequence \(entry.sequence)")
            }
        }
        for process in processes where process.alive {
            for record in process.machine.records.values {
                if let other = numbers[record.entry.sequence], other != record.entry.id {
                    try fail("writes \(other) and \(record.entry.id) share sequence \(record.entry.sequence)")
                }
            }
        }
        // One live drainer per scope.
        var holders: [String: Int] = [:]
        for (index, process) in processes.enumerated() where process.alive {
            for scope in process.draining {
                if let other = holders[scope] { try fail("processes \(other) and \(index) both drain scope \(scope)") }
                holders[scope] = index
            }
        }
    }

    /// In each scope, a write acknowledged before another was queued arrives first (checked at the end).
    func checkOrder() throws {
        var firstArrival: [UUID: Int] = [:]
        for (position, entry) in arrivals.enumerated() where firstArrival[entry.id] == nil { firstArrival[entry.id] = position }
        for (earlier, acked) in acknowledged {
            guard let earlierEntry = arrivals.first(where: { $0.id == earlier }) ?? storage[earlier] else { continue }
            for (later, position) in firstArrival where later != earlier {
                guard let laterStart = started[later], laterStart > acked,
                      arrivals[position].scope == earlierEntry.scope else { continue }
                guard let earlierPosition = firstArrival[earlier], earlierPosition < position else {
                    let phases = processes.map { process in process.machine.records[earlier].map { "\($0.phase) \($0.entry.sequence)" } ?? "-" }
                    try fail("scope \(earlierEntry.scope): write \(later) (sequence \(arrivals[position].sequence)) arrived before \(earlier) "
                        + "(sequence \(earlierEntry.sequence), arrived: \(firstArrival[earlier].map(String.init) ?? "never"), stored: \(storage[earlier] != nil), "
                        + "in the machines: \(phases)), acknowledged before it was queued\n"
                        + history.filter { $0.contains(earlier.uuidString.prefix(8)) || $0.contains(later.uuidString.prefix(8)) || $0.contains("claims \(earlierEntry.scope)") || $0.contains("dies") }.joined(separator: "\n"))
                }
            }
        }
    }
}
