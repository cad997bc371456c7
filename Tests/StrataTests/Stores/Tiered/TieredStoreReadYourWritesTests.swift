import Foundation
import Testing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

/// A ``TieredStore``'s own writes against its reads of the shared tier, and the one ordering rule
/// (the latest store time wins): a read that started before a write never puts the older row back,
/// a write on its way answers reads of its key, an older write changes nothing, concurrent writes
/// of one key end with the latest in both tiers. Also: a shared tier known to be down is tried once
/// per probe interval, and writes that go to it in the background.
@Suite("TieredStore: read your writes, newest wins", .timeLimit(.minutes(1)))
struct TieredStoreReadYourWritesTests {
    let clock = ManualClock()
    struct Down: Error {}

    @Test func aReadOfTheSharedTierStartedBeforeALocalWrite_neverPutsTheOlderRowBack() async throws {
        let shared = GatedStore(MemoryStore<String, String>())
        let node = TieredStore(memory: MemoryStore(), shared: shared, environment: clock.environment(logger: quietLogger))
        let t0 = clock.date
        try await shared.base.insert("before the PUT", for: "k", storedAt: t0)
        shared.holdReads = true
        let read = Task { try await node.retrieve("k") }
        try await shared.waitForHeldReads(1)
        // The node's own PUT lands while its GET reads the shared tier.
        try await node.insert("the PUT", for: "k", storedAt: t0.addingTimeInterval(1))
        shared.releaseReads(with: CacheEntry(value: "before the PUT", storedAt: t0))
        #expect(try await read.value?.value == "before the PUT", "the read answers what it read")
        #expect(node.memory.immediateEntry(for: "k")?.value == "the PUT", "but never keeps it over the write")
        shared.holdReads = false
        #expect(try await node.retrieve("k")?.value == "the PUT")
    }

    @Test func aWriteThatHasNotReachedTheSharedTier_answersReadsOfItsKey_andNothingOlderIsKept() async throws {
        let shared = StoreSpy(MemoryStore<String, String>())
        let node = TieredStore(memory: MemoryStore(), shared: shared, environment: clock.environment(logger: quietLogger))
        let t0 = clock.date
        try await shared.base.insert("old", for: "k", storedAt: t0)
        shared.faults = .init(insert: Down())
        try await node.insert("new", for: "k", storedAt: t0.addingTimeInterval(1))
        #expect(node.unsentWrites == 1)
        try await node.memory.delete("k")  // the memory tier let it go (its count limit)
        #expect(try await node.retrieve("k")?.value == "new", "the write on its way, not the shared tier's older row")
        #expect(node.memory.immediateEntry(for: "k") == nil, "nothing read from the shared tier is kept meanwhile")
        shared.faults = .init()
        #expect(try await node.retrieve("other") == nil)  // the tier answers: the write goes as a repair
        try await node.waitForUnsentWrites()
        #expect(try await shared.base.retrieve("k")?.value == "new")
        #expect(try await node.retrieve("k")?.value == "new")
    }

    @Test func anOlderWrite_changesNothing_inEitherTier() async throws {
        let shared = MemoryStore<String, String>()
        let node = TieredStore(memory: MemoryStore(), shared: shared, environment: clock.environment(logger: quietLogger))
        let t0 = clock.date
        try await node.insert("newer", for: "k", storedAt: t0.addingTimeInterval(5))
        try await node.insert("older", for: "k", storedAt: t0)
        #expect(node.memory.immediateEntry(for: "k")?.value == "newer")
        #expect(try await shared.retrieve("k")?.value == "newer")
        #expect(try await node.refresh("k", storedAt: t0, validators: CacheValidators()))
        #expect(node.memory.immediateEntry(for: "k")?.storedAt == t0.addingTimeInterval(5), "an older re-stamp changes nothing")
    }

    @Test func anEntryReadFromTheSharedTier_neverReplacesANewerOneInMemory() async throws {
        let shared = GatedStore(MemoryStore<String, String>())
        let node = TieredStore(memory: MemoryStore(), shared: shared, environment: clock.environment(logger: quietLogger))
        let t0 = clock.date
        shared.holdReads = true
        let read = Task { try await node.retrieve("k") }
        try await shared.waitForHeldReads(1)
        // A newer entry reaches the memory tier by a path the coherence does not see (the memory
        // tier is the app's own, too).
        try await node.memory.insert("newer", for: "k", storedAt: t0.addingTimeInterval(5))
        shared.releaseReads(with: CacheEntry(value: "older", storedAt: t0))
        _ = try await read.value
        #expect(node.memory.immediateEntry(for: "k")?.value == "newer")
    }

    @Test(arguments: [TieredStore<MemoryStore<String, String>, MemoryStore<String, String>>.SharedTierWriting.awaited, .inBackground])
    func concurrentWritesOfOneKey_endWithTheLatestInBothTiers(
        writing: TieredStore<MemoryStore<String, String>, MemoryStore<String, String>>.SharedTierWriting
    ) async throws {
        let shared = MemoryStore<String, String>()
        let node = TieredStore(
            memory: MemoryStore(), shared: shared, environment: clock.environment(logger: quietLogger), sharedTierWriting: writing)
        let t0 = clock.date
        // Shuffled store times: the order the writes run in is not the order of their times.
        var times = Array(0..<64)
        var random = SplitMix64(seed: 7)
        times.shuffle(using: &random)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for time in times {
                group.addTask { try await node.insert("v\(time)", for: "k", storedAt: t0.addingTimeInterval(Double(time))) }
            }
            try await group.waitForAll()
        }
        try await node.waitForUnsentWrites()
        #expect(node.memory.immediateEntry(for: "k")?.value == "v63")
        #expect(try await shared.retrieve("k")?.value == "v63")
    }

    @Test func aSharedTierKnownDown_isTriedOncePerProbeInterval_theOtherReadsAreMissesAtOnce() async throws {
        let shared = StoreSpy(MemoryStore<String, String>())
        let node = TieredStore(
            memory: MemoryStore(), shared: shared, environment: clock.environment(logger: quietLogger),
            downProbeInterval: .seconds(2))
        func reads() -> Int { shared.messages.filter { if case .retrieve = $0 { true } else { false } }.count }
        shared.faults = .init(retrieve: Down())
        #expect(try await node.retrieve("a") == nil)
        #expect(node.sharedTierIsDown)
        #expect(try await node.retrieve("b") == nil)
        #expect(try await node.retrieve("c") == nil)
        #expect(reads() == 2, "the first read marked it down; one probe; then misses without asking")
        clock.advance(by: .seconds(1))
        #expect(try await node.retrieve("d") == nil)
        #expect(reads() == 2)
        shared.faults = .init()
        try await shared.base.insert("v", for: "e", storedAt: clock.date)
        clock.advance(by: .seconds(1))
        #expect(try await node.retrieve("e")?.value == "v", "the probe finds the tier up")
        #expect(!node.sharedTierIsDown)
        #expect(try await node.retrieve("f") == nil)
        #expect(reads() == 4)
    }

    @Test func inTheBackground_aWriteReturnsOnceTheMemoryTierHasIt() async throws {
        let shared = GatedStore(MemoryStore<String, String>())
        let node = TieredStore(
            memory: MemoryStore(), shared: shared, environment: clock.environment(logger: quietLogger),
            sharedTierWriting: .inBackground)
        shared.holdInserts = true
        try await node.insert("v", for: "k", storedAt: clock.date)  // returns while the shared tier's insert is held
        #expect(node.memory.immediateEntry(for: "k")?.value == "v")
        try await shared.waitForHeldInserts(1)
        #expect(node.unsentWrites == 1)
        #expect(try await node.retrieve("k")?.value == "v")
        shared.releaseInserts()
        try await node.waitForUnsentWrites()
        #expect(try await shared.base.retrieve("k")?.value == "v")
    }

    @Test func waitUntilSent_returnsOnceTheSharedTierHasTheKeysWrite() async throws {
        let shared = GatedStore(MemoryStore<String, String>())
        let node = TieredStore(
            memory: MemoryStore(), shared: shared, environment: clock.environment(logger: quietLogger),
            sharedTierWriting: .inBackground)
        try await node.waitUntilSent("k")  // nothing on its way: at once
        shared.holdInserts = true
        try await node.insert("v", for: "k", storedAt: clock.date)
        try await node.insert("w", for: "other", storedAt: clock.date)
        try await shared.waitForHeldInserts(1)
        let waiting = Task { try await node.waitUntilSent("k") }
        shared.releaseInserts()
        try await waiting.value
        #expect(try await shared.base.retrieve("k")?.value == "v")
    }

    @Test func pastItsLimit_theOldestWaitingWriteIsForgotten() {
        var machine = SharedTierWrites<String, Int>()
        machine.maxWaiting = 2
        _ = machine.handle(.failed)  // the tier is down: every write waits
        for (number, key) in ["a", "b", "c"].enumerated() { _ = machine.handle(.written(key, number)) }
        #expect(machine.unsent == 2)
        #expect(machine.unsentWrite(of: "a") == nil, "the oldest went")
        #expect(machine.unsentWrite(of: "c") == 2)
        #expect(machine.forgotten == 1)
        _ = machine.handle(.written("b", 9))  // a key that waits already: replaced, nothing forgotten
        #expect(machine.unsent == 2 && machine.forgotten == 1)
    }

    @Test func nodesThatShareAName_hearEachOther_byInstance() async throws {
        let backplane = ScriptedBackplane(node: "proxy-1", instance: "i-1")
        let node = TieredStore(
            memory: MemoryStore<String, String>(), shared: MemoryStore<String, String>(), backplane: backplane,
            environment: clock.environment(logger: quietLogger))
        let t0 = clock.date
        try await node.insert("v1", for: "k", storedAt: t0)
        backplane.send(.changed(CacheChange(key: "k", action: .set, at: t0, sender: "proxy-1", instance: "i-1")))
        try await node.waitForBackplaneEvents(atLeast: 1)
        #expect(node.backplaneStatistics.ownChangesIgnored == 1)
        // Another process, also PID 1 in its container: same name, its own instance.
        backplane.send(.changed(CacheChange(key: "k", action: .set, at: t0.addingTimeInterval(1), sender: "proxy-1", instance: "i-2")))
        backplane.send(.changedAll(at: t0.addingTimeInterval(2), sender: "proxy-1", instance: "i-2"))
        try await node.waitForBackplaneEvents(atLeast: 3)
        #expect(node.backplaneStatistics.copiesDropped == 2)
        #expect(node.memory.immediateEntry(for: "k") == nil)
    }
}
