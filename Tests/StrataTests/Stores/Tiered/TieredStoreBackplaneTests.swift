import Foundation
import Testing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

/// A backplane a test drives: it delivers what the test sends.
final class ScriptedBackplane: Backplane {
    let node: String
    let instance: String
    private struct State {
        var subscribers: [AsyncStream<BackplaneEvent>.Continuation] = []
        var ended = 0
        var endWaiters = ConditionWaiters<Int>()
    }
    private let state = Locked(State())

    init(node: String, instance: String? = nil) {
        self.node = node
        self.instance = instance ?? node
    }

    func events() -> AsyncStream<BackplaneEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: BackplaneEvent.self)
        continuation.onTermination = { [state] _ in
            state.withLock { state in
                state.ended += 1
                state.endWaiters.resumeSatisfied(by: state.ended)
            }
        }
        state.withLock { $0.subscribers.append(continuation) }
        return stream
    }

    func send(_ event: BackplaneEvent) {
        for subscriber in state.withLock({ $0.subscribers }) { subscriber.yield(event) }
    }

    /// Returns once `count` subscribers stopped following.
    func waitForEndedSubscribers(_ count: Int) async throws {
        try await state.wait(in: \.endWaiters, current: { $0.ended }, until: { $0 >= count })
    }
}

/// A ``TieredStore`` hearing other nodes' writes through a backplane: which memory copies it
/// drops, which it keeps, and the read that must not keep what a change replaced.
@Suite("TieredStore(memory:shared:backplane:)", .timeLimit(.minutes(1)))
struct TieredStoreBackplaneTests {
    let clock = ManualClock()
    let backplane = ScriptedBackplane(node: "b")

    func node(shared: some Store<String, String> = MemoryStore<String, String>()) -> TieredStore<MemoryStore<String, String>, some Store<String, String>> {
        TieredStore(memory: MemoryStore(), shared: shared, backplane: backplane, environment: clock.environment(logger: quietLogger))
    }

    func change(_ key: String, _ action: CacheChange.Action, at: Date, from sender: String = "a") -> BackplaneEvent {
        .changed(CacheChange(key: key, action: action, at: at, sender: sender))
    }

    @Test func anotherNodesLaterWrite_dropsTheMemoryCopy_andTheNextReadGoesToTheSharedTier() async throws {
        let shared = MemoryStore<String, String>()
        let b = node(shared: shared)
        let t0 = clock.date
        try await b.insert("v1", for: "feed", storedAt: t0)
        try await shared.insert("v2", for: "feed", storedAt: t0.addingTimeInterval(1))  // node A's write
        backplane.send(change("feed", .set, at: t0.addingTimeInterval(1)))
        try await b.waitForBackplaneEvents(atLeast: 1)
        #expect(b.memory.immediateEntry(for: "feed") == nil, "dropped")
        #expect(try await b.retrieve("feed")?.value == "v2")
        #expect(b.backplaneStatistics.copiesDropped == 1)
    }

    @Test(arguments: [CacheChange.Action.set, .remove, .expire])
    func aChangeOlderThanTheCopy_orFromThisNode_leavesItAlone(action: CacheChange.Action) async throws {
        let b = node()
        let t0 = clock.date
        try await b.insert("v2", for: "feed", storedAt: t0.addingTimeInterval(5))
        backplane.send(change("feed", action, at: t0))
        backplane.send(change("feed", action, at: t0.addingTimeInterval(10), from: "b"))
        backplane.send(change("other", action, at: t0.addingTimeInterval(10)))
        try await b.waitForBackplaneEvents(atLeast: 3)
        #expect(b.memory.immediateEntry(for: "feed")?.value == "v2")
        #expect(b.backplaneStatistics.ownChangesIgnored == 1)
        #expect(b.backplaneStatistics.copiesDropped == 0)
    }

    @Test func aRemovalAtTheCopysOwnTime_dropsIt_aSetAtTheSameTimeDoesNot() async throws {
        let b = node()
        let t0 = clock.date
        try await b.insert("v", for: "same", storedAt: t0)
        try await b.insert("v", for: "gone", storedAt: t0)
        backplane.send(change("same", .set, at: t0))
        backplane.send(change("gone", .remove, at: t0))
        try await b.waitForBackplaneEvents(atLeast: 2)
        #expect(b.memory.immediateEntry(for: "same") != nil, "the same version")
        #expect(b.memory.immediateEntry(for: "gone") == nil)
    }

    @Test func listeningAgain_orAnotherNodeClearingEverything_emptiesTheMemoryTier() async throws {
        let b = node()
        try await b.insert("v", for: "a", storedAt: clock.date)
        backplane.send(.listening)
        try await b.waitForBackplaneEvents(atLeast: 1)
        #expect(b.memory.immediateEntry(for: "a") == nil)
        try await b.insert("v", for: "a", storedAt: clock.date)
        backplane.send(.changedAll(at: clock.date, sender: "b", instance: nil))  // its own clear: already done
        backplane.send(.changedAll(at: clock.date, sender: "a", instance: nil))
        try await b.waitForBackplaneEvents(atLeast: 3)
        #expect(b.memory.immediateEntry(for: "a") == nil)
        #expect(b.backplaneStatistics.listeningStarts == 1)
        #expect(b.backplaneStatistics.ownChangesIgnored == 1)
    }

    /// The race the coherence guards against: B's read of the shared tier returns the row A is
    /// about to replace; A's change arrives before the read ends. The read answers, but its value
    /// is not kept in memory, so B does not serve it after the change.
    @Test func aReadThatWasInFlightWhenAChangeArrived_answersButIsNotKept() async throws {
        let shared = GatedStore(MemoryStore<String, String>())
        let b = node(shared: shared)
        let t0 = clock.date
        try await shared.base.insert("v1", for: "feed", storedAt: t0)
        shared.holdReads = true
        let read = Task { try await b.retrieve("feed") }
        try await shared.waitForHeldReads(1)
        try await shared.base.insert("v2", for: "feed", storedAt: t0.addingTimeInterval(1))
        backplane.send(change("feed", .set, at: t0.addingTimeInterval(1)))
        try await b.waitForBackplaneEvents(atLeast: 1)
        shared.releaseReads(with: CacheEntry(value: "v1", storedAt: t0))  // what it read before A wrote
        #expect(try await read.value?.value == "v1")
        #expect(b.memory.immediateEntry(for: "feed") == nil, "not kept: a change came while it ran")
        #expect(b.backplaneStatistics.fillsSkipped == 1)
        shared.holdReads = false
        #expect(try await b.retrieve("feed")?.value == "v2")
        #expect(b.memory.immediateEntry(for: "feed")?.value == "v2", "a read after the change is kept")
    }

    @Test func aReleasedStore_stopsFollowingTheBackplane() async throws {
        do {
            let store = TieredStore(memory: MemoryStore<String, String>(), shared: MemoryStore<String, String>(), backplane: backplane)
            backplane.send(.listening)
            try await store.waitForBackplaneEvents(atLeast: 1)
        }
        // Released: its follower task is cancelled, which ends its subscription (a timeout here
        // means the store, or its task, lives on).
        try await backplane.waitForEndedSubscribers(1)
    }
}

/// A store whose reads, while ``holdReads`` is on, wait for the test to answer them.
final class GatedStore<Base: Store>: Store where Base.Key: Sendable {
    typealias Key = Base.Key
    typealias Value = Base.Value
    let base: Base
    private struct State {
        var hold = false
        var held: [CheckedContinuation<CacheEntry<Value>?, Never>] = []
        var waiters = ConditionWaiters<Int>()
        var holdInserts = false
        var heldInserts: [CheckedContinuation<Void, Never>] = []
        var insertWaiters = ConditionWaiters<Int>()
    }
    private let state = Locked(State())

    init(_ base: Base) { self.base = base }

    var holdReads: Bool {
        get { state.withLock { $0.hold } }
        set { state.withLock { $0.hold = newValue } }
    }

    func waitForHeldReads(_ count: Int) async throws {
        try await state.wait(in: \.waiters, current: { $0.held.count }, until: { $0 >= count })
    }

    func releaseReads(with entry: CacheEntry<Value>?) {
        let held = state.withLock { state in
            defer { state.held = [] }
            return state.held
        }
        for continuation in held { continuation.resume(returning: entry) }
    }

    func retrieve(_ key: Key) async throws -> CacheEntry<Value>? {
        guard holdReads else { return try await base.retrieve(key) }
        return await withCheckedContinuation { continuation in
            state.withLock { state in
                state.held.append(continuation)
                state.waiters.resumeSatisfied(by: state.held.count)
            }
        }
    }

    /// While on, inserts wait for ``releaseInserts()`` before they reach the base store.
    var holdInserts: Bool {
        get { state.withLock { $0.holdInserts } }
        set { state.withLock { $0.holdInserts = newValue } }
    }

    func waitForHeldInserts(_ count: Int) async throws {
        try await state.wait(in: \.insertWaiters, current: { $0.heldInserts.count }, until: { $0 >= count })
    }

    func releaseInserts() {
        let held = state.withLock { state in
            defer { state.heldInserts = []; state.holdInserts = false }
            return state.heldInserts
        }
        for continuation in held { continuation.resume() }
    }

    func insert(_ entry: CacheEntry<Value>, for key: Key) async throws {
        if holdInserts {
            await withCheckedContinuation { continuation in
                state.withLock { state in
                    state.heldInserts.append(continuation)
                    state.insertWaiters.resumeSatisfied(by: state.heldInserts.count)
                }
            }
        }
        try await base.insert(entry, for: key)
    }
    func delete(_ key: Key) async throws { try await base.delete(key) }
    func removeAll() async throws { try await base.removeAll() }
}

/// `TierCoherence` alone: examples, then seeded random interleavings of another node's writes and
/// their notifications, this node's reads and restarts of listening, checking after every step
/// that the memory tier never holds a version older than one this node was told about.
@Suite("TierCoherence: a read never keeps what a change replaced")
struct TierCoherenceTests {
    @Test func aReadKeepsItsEntry_unlessItsKeyChangedOrListeningRestartedWhileItRan() {
        var coherence = TierCoherence<String>()
        let first = coherence.readStarted
        #expect(coherence.mayFill("a", readStartedAt: first))
        coherence.changeReceived("b")
        #expect(coherence.mayFill("a", readStartedAt: first), "another key's change")
        coherence.changeReceived("a")
        #expect(!coherence.mayFill("a", readStartedAt: first))
        let second = coherence.readStarted
        #expect(coherence.mayFill("a", readStartedAt: second), "started after the change")
        coherence.listeningStarted()
        #expect(!coherence.mayFill("z", readStartedAt: second))
    }

    @Test func pastItsLimit_itForgetsTheKeys_andNoReadStartedBeforeKeepsItsEntry() {
        var coherence = TierCoherence<String>(limit: 2)
        let before = coherence.readStarted
        coherence.changeReceived("a")
        coherence.changeReceived("b")
        #expect(coherence.mayFill("z", readStartedAt: before))
        coherence.changeReceived("c")  // the third key: the memory is reset
        #expect(coherence.changed.count == 1)
        #expect(!coherence.mayFill("z", readStartedAt: before))
        #expect(coherence.mayFill("z", readStartedAt: coherence.readStarted))
    }

    static let seeds = ProcessInfo.processInfo.environment["STRATA_INTERLEAVING_SEEDS"].flatMap { UInt64($0) } ?? 1_000

    @Test("random interleavings of writes, notifications, reads and restarts never leave an older version in memory")
    func randomInterleavings() async throws {
        for seed in 0..<Self.seeds {
            await Task.yield()  // between seeds: a long synchronous search would hold a cooperative thread
            var world = CoherenceWorld(seed: seed)
            try world.run(steps: 300)
        }
    }
}

/// Node B's memory tier, node A's writes and B's own, by version number (a version is a store
/// time: a later write usually has a larger one, but B's writes may come late, with an older one).
/// Every step is one of `TieredStore`'s turns: a decision and its act on one key.
struct CoherenceWorld {
    struct Violation: Error, CustomStringConvertible {
        var seed: UInt64
        var step: Int
        var what: String
        var description: String { "seed \(seed), step \(step): \(what)" }
    }

    struct Read {
        var key: String
        var started: UInt64
        /// B's own latest write of the key when the read started: the least it may answer.
        var ownAtStart: Int
        /// The version it read from the shared tier, once it did (0: no row).
        var version: Int?
    }

    let seed: UInt64
    var random: SplitMix64
    var coherence = TierCoherence<String>(limit: 2)
    /// The shared tier's versions (newest wins), and B's memory tier's.
    var shared: [String: Int] = [:]
    var memory: [String: Int] = [:]
    /// Notifications of A's writes committed and not delivered yet, in commit order.
    var notifications: [(key: String, version: Int)] = []
    var reads: [Read] = []
    /// B's writes that have not reached the shared tier (last write of a key wins).
    var unsent: [String: Int] = [:]
    /// The latest version B wrote itself and kept, per key.
    var own: [String: Int] = [:]
    /// The version B must not be older than, per key: told by a notification, or committed before
    /// B (re)started listening.
    var known: [String: Int] = [:]
    var lastVersion = 0
    let keys = ["a", "b", "c"]

    init(seed: UInt64) {
        self.seed = seed
        random = SplitMix64(seed: seed)
    }

    static func time(_ version: Int) -> Date { Date(timeIntervalSinceReferenceDate: Double(version)) }

    mutating func run(steps: Int) throws {
        for step in 0..<steps {
            let floor = coherence.floor
            if let problem = advance(random.next() % 10) {
                throw Violation(seed: seed, step: step, what: problem)
            }
            // Past its limit the coherence forgets every key (so does a restart of listening): a
            // write of B's that comes late, older than one B made before, and finds nothing newer
            // in memory is then kept until the key changes again. What B wrote is judged from
            // there on.
            if coherence.floor != floor { own = [:] }
            for (key, version) in memory {
                // B's own write that came late is kept until the shared tier refuses it.
                if version < known[key] ?? 0, unsent[key] != version {
                    throw Violation(seed: seed, step: step, what: "B's memory holds \(key) v\(version), told of v\(known[key]!)")
                }
                if version < own[key] ?? 0 {
                    throw Violation(seed: seed, step: step, what: "B's memory holds \(key) v\(version), B wrote v\(own[key]!)")
                }
            }
        }
    }

    /// One step; a problem found in what it answered, if any.
    mutating func advance(_ choice: UInt64) -> String? {
        let key = keys[Int(random.next() % UInt64(keys.count))]
        switch choice {
        case 0:  // A writes and commits (newest wins); its notification is on its way
            lastVersion += 1
            shared[key] = max(shared[key] ?? 0, lastVersion)
            notifications.append((key, lastVersion))
        case 1 where !notifications.isEmpty:  // the oldest notification arrives
            let (key, version) = notifications.removeFirst()
            coherence.changeReceived(key, at: Self.time(version), setAt: Self.time(version))
            known[key] = max(known[key] ?? 0, version)
            if let held = memory[key], held < version { memory[key] = nil }
        case 2:  // B's memory misses: a read starts, answered by B's write on its way if any
            guard memory[key] == nil else { break }
            if let pending = unsent[key] {
                if pending < own[key] ?? 0 { return "a read of \(key) answered v\(pending), B wrote v\(own[key]!)" }
            } else {
                reads.append(Read(key: key, started: coherence.readStarted, ownAtStart: own[key] ?? 0))
            }
        case 3 where !reads.isEmpty:  // a read reads the shared tier
            let index = Int(random.next() % UInt64(reads.count))
            if reads[index].version == nil { reads[index].version = shared[reads[index].key] ?? 0 }
        case 4 where !reads.isEmpty:  // a read that has read ends, and keeps its entry if it may
            let index = Int(random.next() % UInt64(reads.count))
            guard let version = reads[index].version else { break }
            let read = reads.remove(at: index)
            if version < read.ownAtStart { return "a read of \(read.key) answered v\(version), B had written v\(read.ownAtStart)" }
            if version > 0, coherence.mayFill(read.key, readStartedAt: read.started, storedAt: Self.time(version)), unsent[read.key] == nil,
               (memory[read.key] ?? 0) < version {
                memory[read.key] = version
            }
        case 5 where random.next() % 8 == 0:  // the listening connection drops and comes back
            notifications = []  // sent while B was not listening: never delivered
            coherence.listeningStarted()
            memory = [:]
            for (key, version) in shared { known[key] = max(known[key] ?? 0, version) }
        case 6:  // B writes: usually the latest time, sometimes a write that comes late
            let version: Int
            if random.next() % 3 == 0, lastVersion > 1 {
                version = lastVersion - Int(random.next() % 3)
            } else {
                lastVersion += 1
                version = lastVersion
            }
            if let held = memory[key], held > version { break }
            if coherence.isOutdated(key, storedAt: Self.time(version)) { break }
            memory[key] = version
            coherence.changeReceived(key, at: Self.time(version), setAt: Self.time(version))
            unsent[key] = version
            own[key] = max(own[key] ?? 0, version)
        case 7:  // B's write of the key reaches the shared tier (newest wins there)
            guard let version = unsent.removeValue(forKey: key) else { break }
            if version < shared[key] ?? 0 {
                // Refused: a copy B kept of it goes, and reads that ran meanwhile keep nothing.
                if memory[key] == version {
                    memory[key] = nil
                    coherence.changeReceived(key)
                }
            } else {
                shared[key] = version
            }
        case 8:  // the memory tier lets the key go (its count limit)
            memory[key] = nil
        default:
            break
        }
        return nil
    }
}
