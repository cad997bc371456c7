import Foundation
import Testing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

/// `SharedTierWrites`, the decisions of a ``TieredStore`` about its shared tier, without tasks or
/// stores: examples, then seeded random interleavings that check the invariants after every step.
@Suite("SharedTierWrites: one write per key, the last one kept while the shared tier is down")
struct SharedTierWritesTests {
    typealias Machine = SharedTierWrites<String, Int>

    static func sends(_ actions: [Machine.Action]) -> [Machine.Send] {
        actions.compactMap { if case .send(let send) = $0 { send } else { nil } }
    }

    @Test func aWrite_isSentAtOnce_andAWriteOfTheSameKeyWaitsBehindIt() {
        var machine = Machine()
        let first = Self.sends(machine.handle(.written("a", 1)))
        #expect(first.map(\.write) == [1])
        #expect(!first[0].isRepair)
        #expect(machine.handle(.written("a", 2)).isEmpty, "waits behind the first")
        #expect(machine.handle(.written("a", 3)).isEmpty, "replaces the one that waited")
        #expect(Self.sends(machine.handle(.written("b", 9))).map(\.write) == [9], "another key goes at once")
        let next = Self.sends(machine.handle(.sent("a", number: first[0].number, succeeded: true)))
        #expect(next.map(\.write) == [3], "the last write of the key, not the one it replaced")
        #expect(machine.unsent == 2)
    }

    @Test func whileTheTierIsDown_theLastWriteOfEachKeyWaits_andGoesAsARepairWhenItAnswers() {
        var machine = Machine()
        let first = Self.sends(machine.handle(.written("a", 1)))
        let failed = machine.handle(.sent("a", number: first[0].number, succeeded: false))
        guard case .scheduleRetry(afterFailures: 1)? = failed.first else { Issue.record("\(failed)"); return }
        #expect(machine.isDown)
        #expect(machine.handle(.written("a", 2)).isEmpty, "scheduled already")
        #expect(machine.handle(.written("b", 5)).isEmpty)
        // A read answers: the tier is up; both keys' last writes go, as repairs.
        let repairs = Self.sends(machine.handle(.answered))
        #expect(repairs.map(\.write) == [2, 5])
        #expect(repairs.allSatisfy { $0.isRepair })
        #expect(!machine.isDown)
    }

    @Test func aDueRetry_probesWithOneWrite_andAFailedProbeSchedulesTheNextWithMoreFailures() {
        var machine = Machine()
        _ = machine.handle(.failed)
        _ = machine.handle(.written("a", 1))
        _ = machine.handle(.written("b", 2))
        let probe = Self.sends(machine.handle(.retryDue))
        #expect(probe.map(\.write) == [1], "one write while the tier may still be down")
        let again = machine.handle(.sent("a", number: probe[0].number, succeeded: false))
        guard case .scheduleRetry(afterFailures: 2)? = again.first else { Issue.record("\(again)"); return }
        let second = Self.sends(machine.handle(.retryDue))
        let rest = Self.sends(machine.handle(.sent(second[0].key, number: second[0].number, succeeded: true)))
        #expect(Set((second + rest).map(\.write)) == [1, 2])
        #expect(machine.failures == 0)
    }

    /// Seeds per run: 1,000 by default (CI); `STRATA_INTERLEAVING_SEEDS=20000` for a longer search.
    static let seeds = ProcessInfo.processInfo.environment["STRATA_INTERLEAVING_SEEDS"].flatMap { UInt64($0) } ?? 1_000

    @Test("random interleavings of writes, sends that succeed or fail, reads and retries keep every invariant, and lose no last write")
    func randomInterleavings() async throws {
        for seed in 0..<Self.seeds {
            await Task.yield()  // between seeds: a long synchronous search would hold a cooperative thread
            var world = SharedTierWorld(seed: seed)
            try world.run(steps: 200)
            try world.settle()
        }
    }
}

/// One tiered store's shared tier over time: the machine, the sends on their way, and the shared
/// tier's rows (by write number).
struct SharedTierWorld {
    typealias Machine = SharedTierWrites<String, Int>

    struct Violation: Error, CustomStringConvertible {
        var seed: UInt64
        var step: Int
        var what: String
        var description: String { "seed \(seed), step \(step): \(what)" }
    }

    let seed: UInt64
    var random: SplitMix64
    var machine = Machine()
    var onTheirWay: [Machine.Send] = []
    var retryScheduled = false
    /// What the shared tier holds: the value of the last write that landed, by key.
    var shared: [String: Int] = [:]
    /// The last write made of each key, and the last number sent of each key.
    var lastWritten: [String: Int] = [:]
    var lastSentNumber: [String: UInt64] = [:]
    var nextValue = 0
    let keys = ["a", "b", "c"]

    init(seed: UInt64) {
        self.seed = seed
        random = SplitMix64(seed: seed)
    }

    mutating func run(steps: Int) throws {
        for step in 0..<steps {
            let event = nextEvent()
            try apply(machine.handle(event), after: event, step: step)
            try check(step: step)
        }
    }

    /// The tier comes back for good: every send succeeds until nothing is left, and the tier then
    /// holds each key's last write.
    mutating func settle() throws {
        var step = 10_000
        try apply(machine.handle(.answered), after: .answered, step: step)
        while !onTheirWay.isEmpty || retryScheduled {
            step += 1
            if let send = onTheirWay.first {
                onTheirWay.removeFirst()
                let event = Machine.Event.sent(send.key, number: send.number, succeeded: true)
                shared[send.key] = send.write
                try apply(machine.handle(event), after: event, step: step)
            } else {
                retryScheduled = false
                try apply(machine.handle(.retryDue), after: .retryDue, step: step)
            }
            try check(step: step)
            guard step < 20_000 else { throw Violation(seed: seed, step: step, what: "does not settle") }
        }
        for (key, value) in lastWritten where shared[key] != value {
            throw Violation(seed: seed, step: step, what: "\(key)'s last write \(value) never reached the shared tier (it holds \(shared[key].map(String.init) ?? "nothing"))")
        }
    }

    mutating func nextEvent() -> Machine.Event {
        switch random.next() % 6 {
        case 0, 1:
            nextValue += 1
            let key = keys[Int(random.next() % UInt64(keys.count))]
            lastWritten[key] = nextValue
            return .written(key, nextValue)
        case 2 where !onTheirWay.isEmpty, 3 where !onTheirWay.isEmpty:
            // One send ends, in any order, succeeding or failing.
            let index = Int(random.next() % UInt64(onTheirWay.count))
            let send = onTheirWay.remove(at: index)
            let succeeded = random.next() % 3 != 0
            if succeeded { shared[send.key] = send.write }
            return .sent(send.key, number: send.number, succeeded: succeeded)
        case 4:
            return random.next() % 2 == 0 ? .answered : .failed
        case 5 where retryScheduled:
            retryScheduled = false
            return .retryDue
        default:
            return .answered
        }
    }

    mutating func apply(_ actions: [Machine.Action], after event: Machine.Event, step: Int) throws {
        for action in actions {
            switch action {
            case .send(let send):
                if onTheirWay.contains(where: { $0.key == send.key }) {
                    throw Violation(seed: seed, step: step, what: "two sends of \(send.key) on their way after \(event)")
                }
                // Never an older write after a newer one (the same one again after it failed: yes).
                if let last = lastSentNumber[send.key], send.number < last {
                    throw Violation(seed: seed, step: step, what: "\(send.key) sent write \(send.number) after \(last) after \(event)")
                }
                lastSentNumber[send.key] = send.number
                onTheirWay.append(send)
            case .scheduleRetry(let failures):
                if retryScheduled { throw Violation(seed: seed, step: step, what: "a second retry scheduled after \(event)") }
                if failures < 1 { throw Violation(seed: seed, step: step, what: "a retry after \(failures) failures") }
                retryScheduled = true
            }
        }
    }

    func check(step: Int) throws {
        func fail(_ what: String) -> Violation { Violation(seed: seed, step: step, what: what) }
        for (key, value) in lastWritten {
            // Nothing lost: the last write of each key has landed, is on its way, or waits.
            let onItsWay = onTheirWay.contains { $0.key == key && $0.write == value }
            let waits = machine.waiting[key]?.write == value
            if shared[key] != value, !onItsWay, !waits { throw fail("\(key)'s last write \(value) is lost") }
        }
        for (key, waiting) in machine.waiting {
            if let sending = machine.sending[key], sending.number >= waiting.number {
                throw fail("\(key) waits with an older write than the one on its way")
            }
            if !machine.isDown, machine.sending[key] == nil { throw fail("\(key) waits while the tier is up and nothing of it is on its way") }
        }
        // Something will move the waiting writes: a send's end, or the retry.
        if !machine.waiting.isEmpty, onTheirWay.isEmpty, !retryScheduled, machine.isDown {
            throw fail("writes wait with nothing on their way and no retry scheduled")
        }
        if machine.sending.count != onTheirWay.count { throw fail("the machine's sends and the world's disagree") }
    }
}

/// ``TieredStore`` with real stores: memory in front of a file store, and in front of a shared
/// tier that fails (a ``StoreSpy``'s faults) and comes back. Time is a manual clock.
@Suite("TieredStore: memory in front of a shared store", .timeLimit(.minutes(1)))
struct TieredStoreTests {
    let clock = ManualClock()
    let directory: TemporaryDirectory

    init() throws {
        directory = try TemporaryDirectory(prefix: "strata-tiered")
    }

    struct Down: Error {}

    func store(_ shared: StoreSpy<FileStore<String>>) -> TieredStore<MemoryStore<String, String>, StoreSpy<FileStore<String>>> {
        TieredStore(memory: MemoryStore(), shared: shared, environment: clock.environment(logger: quietLogger), firstRetryDelay: .seconds(1))
    }

    @Test("an L2 hit fills L1 with the entry as stored, so L1 serves it no longer than L2 would")
    func anL2Hit_fillsL1_keepingItsStoreTime() async throws {
        let files = FileStore<String>(directory: directory.url)
        let storedAt = clock.date.addingTimeInterval(-50)
        try await files.insert("shared", for: "k", storedAt: storedAt)
        let tiered = store(StoreSpy(files))
        #expect(try await tiered.retrieve("k")?.value == "shared")
        #expect(try await tiered.memory.retrieve("k")?.storedAt == storedAt)
        #expect(tiered.immediateEntry(for: "k")?.value == "shared", "the next read is a memory hit")
        // With a 60 s freshness, L1's copy has 10 s left, as L2's has.
        let loader = tiered.loader(key: "k", freshness: .maxAge(.seconds(60))).environment(clock.environment(logger: quietLogger))
        clock.advance(by: .seconds(11))
        await #expect(throws: CacheLoadError.self) { try await loader.load() }
    }

    @Test("an L2 that is down is a miss, never a failed read; a write then waits, and reaches L2 when it answers")
    func aDownL2_isAMiss_andItsWritesAreRepaired() async throws {
        let shared = StoreSpy(FileStore<String>(directory: directory.url))
        let tiered = store(shared)
        shared.faults = .init(retrieve: Down(), insert: Down(), delete: Down())
        #expect(try await tiered.retrieve("k") == nil, "a miss: the chain's remote answers")
        #expect(tiered.sharedTierIsDown)

        try await tiered.insert("v1", for: "k", storedAt: clock.date)
        try await tiered.insert("v2", for: "k", storedAt: clock.date.addingTimeInterval(1))
        #expect(try await tiered.retrieve("k")?.value == "v2", "L1 answers")
        #expect(tiered.unsentWrites == 1, "the last write of the key waits")

        // L2 comes back; the next retry (1 s on the manual clock) sends the last write.
        shared.faults = .init()
        try await clock.waitForSleepers(count: 1)
        clock.advance(by: .seconds(1))
        try await tiered.waitForUnsentWrites()
        #expect(try await shared.base.retrieve("k")?.value == "v2")
        #expect(!tiered.sharedTierIsDown)
    }

    @Test("a repaired write never replaces a row another process stored later")
    func aRepair_neverReplacesANewerRow() async throws {
        let shared = StoreSpy(FileStore<String>(directory: directory.url))
        let tiered = store(shared)
        shared.faults = .init(insert: Down())
        try await tiered.insert("ours", for: "k", storedAt: clock.date)
        #expect(tiered.unsentWrites == 1)
        // Meanwhile another node writes a later row, straight to L2.
        try await shared.base.insert("theirs", for: "k", storedAt: clock.date.addingTimeInterval(5))
        shared.faults = .init()
        // A read answers: the tier is up, and the waiting write goes as a repair within that call.
        #expect(try await tiered.retrieve("other") == nil)
        #expect(tiered.unsentWrites == 0)
        #expect(try await shared.base.retrieve("k")?.value == "theirs")
    }

    @Test("deletes and refreshes reach L2 in order with inserts; removeAll clears both and forgets waiting writes")
    func deletesRefreshesAndRemoveAll() async throws {
        let shared = StoreSpy(FileStore<String>(directory: directory.url))
        let tiered = store(shared)
        try await tiered.insert("v", for: "k", storedAt: clock.date)
        let restamped = clock.date.addingTimeInterval(30)
        #expect(try await tiered.refresh("k", storedAt: restamped, validators: CacheValidators(etag: "\"1\"")))
        #expect(try await shared.base.retrieve("k")?.storedAt == restamped)
        try await tiered.delete("k")
        #expect(try await shared.base.retrieve("k") == nil)

        shared.faults = .init(insert: Down())
        try await tiered.insert("lost on purpose", for: "j", storedAt: clock.date)
        #expect(tiered.unsentWrites == 1)
        shared.faults = .init()
        try await tiered.removeAll()
        #expect(tiered.unsentWrites == 0)
        #expect(try await tiered.retrieve("j") == nil)
        #expect(try await shared.base.retrieve("j") == nil)
    }

    @Test("a file store failing for real (its directory unusable) is a miss; the write made meanwhile reaches it when it is back")
    func aRealSharedTierFailing_andComingBack() async throws {
        let files = FileStore<String>(directory: directory.url, logger: quietLogger)
        let tiered = TieredStore(memory: MemoryStore<String, String>(), shared: files, environment: clock.environment(logger: quietLogger))
        try await tiered.insert("before", for: "a", storedAt: clock.date)
        let later = clock.date.addingTimeInterval(1)
        try await UnusableDirectory.while(directory.url) {
            #expect(try await tiered.retrieve("b") == nil, "a miss, not a failed read")
            try await tiered.insert("during", for: "a", storedAt: later)
            #expect(tiered.unsentWrites == 1)
            #expect(try await tiered.retrieve("a")?.value == "during", "the memory tier answers")
        }
        // Back: the next read of the shared tier answers, and the waiting write goes within it.
        _ = try await tiered.retrieve("b")
        #expect(tiered.unsentWrites == 0)
        #expect(try await files.retrieve("a")?.value == "during")
        #expect(try await files.retrieve("a")?.storedAt == later)
    }

    @Test("invalidating forgets the writes waiting for the shared tier: sent later, they would undo the invalidation")
    func invalidating_forgetsWaitingWrites() async throws {
        let shared = InvalidatingFiles(StoreSpy(FileStore<String>(directory: directory.url, logger: quietLogger)))
        let tiered = TieredStore(memory: MemoryStore<String, String>(), shared: shared, environment: clock.environment(logger: quietLogger), firstRetryDelay: .seconds(1))
        shared.spy.faults = .init(insert: Down())
        try await tiered.insert("written while L2 was down", for: "k", storedAt: clock.date)
        #expect(tiered.unsentWrites == 1)
        try await clock.waitForSleepers(count: 1)  // the repair's retry
        shared.spy.faults = .init()

        #expect(try await tiered.invalidate(.all, as: .remove) == 0)
        #expect(shared.invalidations == [.all])
        #expect(tiered.unsentWrites == 0)
        #expect(tiered.immediateEntry(for: "k") == nil, "the memory tier is emptied")
        // The retry's time passes: nothing is sent, and a read (which would send a waiting write) finds nothing.
        clock.advance(by: .seconds(60))
        #expect(try await tiered.retrieve("k") == nil)
        #expect(try await shared.spy.base.retrieve("k") == nil)
        let inserts = shared.spy.messages.filter { if case .insert = $0 { true } else { false } }
        #expect(inserts.count == 1, "only the first attempt, which failed")
    }

    @Test("an invalidation, and removeAll, let a write on its way to the shared tier end first: landing after, it would put back what they removed; one that fails meanwhile is forgotten, not retried",
          arguments: [true, false], [false, true])
    func invalidating_waitsForTheWriteOnItsWay(byInvalidating: Bool, sendFails: Bool) async throws {
        let gated = GatedStore(InvalidatingFiles(StoreSpy(FileStore<String>(directory: directory.url, logger: quietLogger))))
        let tiered = TieredStore(memory: MemoryStore<String, String>(), shared: gated, environment: clock.environment(logger: quietLogger),
                                 firstRetryDelay: .seconds(1), sharedTierWriting: .inBackground)
        gated.holdInserts = true
        try await tiered.insert("stored just before the clear", for: "k", storedAt: clock.date)
        try await gated.waitForHeldInserts(1)

        let clearing = Task {
            if byInvalidating { _ = try await tiered.invalidate(.all, as: .remove) } else { try await tiered.removeAll() }
        }
        try await tiered.waitForSendWaits(atLeast: 1)
        #expect(gated.base.invalidations.isEmpty && gated.base.spy.messages.allSatisfy { if case .removeAll = $0 { false } else { true } },
                "the shared tier is not touched while the write is on its way")
        if sendFails { gated.base.spy.faults = .init(insert: Down()) }
        gated.releaseInserts()
        try await clearing.value
        gated.base.spy.faults = .init()
        #expect(tiered.unsentWrites == 0, "nothing of before the clear waits to be sent again")
        clock.advance(by: .seconds(60))  // past any retry
        #expect(try await tiered.retrieve("k") == nil)
        #expect(try await gated.base.spy.base.retrieve("k") == nil, "the write landed first, or failed and was forgotten; the clear removed it")
    }

    @Test("a shared tier that cannot invalidate fails the call, and the memory tier keeps its copies")
    func aFailedInvalidation_leavesTheMemoryTier() async throws {
        let shared = InvalidatingFiles(StoreSpy(FileStore<String>(directory: directory.url, logger: quietLogger)))
        let tiered = TieredStore(memory: MemoryStore<String, String>(), shared: shared, environment: clock.environment(logger: quietLogger))
        try await tiered.insert("v", for: "k", storedAt: clock.date)
        shared.invalidateFault = Down()
        await #expect(throws: Down.self) { try await tiered.invalidate(.tag("feeds"), as: .expire) }
        #expect(tiered.immediateEntry(for: "k")?.value == "v")
    }

    static let contract = StoreContract(keys: ("feed", "posts/42"), values: (itemA, itemB)) {
        TieredStore(memory: MemoryStore<String, Item>(), shared: FileStore<Item>(directory: try TemporaryDirectory.scoped(), logger: quietLogger))
    }

    @Test("a memory tier in front of a file store keeps the store contract", arguments: contract.applicableCases)
    func theStoreContract(_ behaviour: StoreContractCase) async throws {
        try await Self.contract.verify(behaviour)
    }

}

/// A file store behind a spy that can also invalidate (`.all` only: it removes every entry), and
/// records the selections it was asked to invalidate.
final class InvalidatingFiles: InvalidatingStore, Sendable {
    typealias Key = String
    typealias Value = String
    let spy: StoreSpy<FileStore<String>>
    private let state = Locked<(invalidations: [CacheSelection], fault: (any Error)?)>(([], nil))

    init(_ spy: StoreSpy<FileStore<String>>) { self.spy = spy }

    var invalidations: [CacheSelection] { state.withLock { $0.invalidations } }
    var invalidateFault: (any Error)? {
        get { state.withLock { $0.fault } }
        set { state.withLock { $0.fault = newValue } }
    }

    func invalidate(_ selection: CacheSelection, as mode: InvalidationMode) async throws -> Int {
        let fault = state.withLock { state in
            state.invalidations.append(selection)
            return state.fault
        }
        if let fault { throw fault }
        precondition(selection == .all && mode == .remove, "this double only removes everything")
        try await spy.base.removeAll()
        return 0
    }

    var origin: Origin { spy.origin }
    func retrieve(_ key: String) async throws -> CacheEntry<String>? { try await spy.retrieve(key) }
    func immediateEntry(for key: String) -> CacheEntry<String>? { spy.immediateEntry(for: key) }
    func insert(_ entry: CacheEntry<String>, for key: String) async throws { try await spy.insert(entry, for: key) }
    func delete(_ key: String) async throws { try await spy.delete(key) }
    func refresh(_ key: String, storedAt: Date, validators: CacheValidators) async throws -> Bool {
        try await spy.refresh(key, storedAt: storedAt, validators: validators)
    }
    func removeAll() async throws { try await spy.removeAll() }
}

extension GatedStore: InvalidatingStore where Base: InvalidatingStore {
    func invalidate(_ selection: CacheSelection, as mode: InvalidationMode) async throws -> Int {
        try await base.invalidate(selection, as: mode)
    }
}
