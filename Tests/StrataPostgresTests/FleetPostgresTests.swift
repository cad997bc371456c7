#if Postgres
import Foundation
import Logging
import PostgresNIO
@_spi(StrataInternals) import Strata
@testable import StrataPostgres
import StrataTesting
import Testing

/// The fleet tier on the real server: nodes (each its own pool, backplane connection and lock
/// connection, as separate processes have) over one table. A node's write reaches the others
/// through `LISTEN/NOTIFY`; a lost listening connection empties the memory tier; one remote call
/// for hundreds of concurrent misses on several nodes; a holder whose connection dies releases.
@Suite("The fleet tier over PostgreSQL", .enabled(if: TestServer.isAvailable, TestServer.skipReason), .timeLimit(.minutes(2)))
struct FleetPostgresTests {
    typealias Node = TieredStore<MemoryStore<String, Item>, PostgresStore<Item>>

    /// A node: its store, backplane and tiered store, shut down at the end of the scope.
    func node(_ name: String, table: String) async throws -> (tiered: Node, backplane: PostgresBackplane) {
        let shared = try TestScope.store(Item.self, table: table)
        let backplane = try PostgresBackplane(announcingFor: shared, node: name, logger: quietLogger)
        TestScope.onExit { await backplane.shutdown() }
        let tiered = TieredStore(memory: MemoryStore(), shared: shared, backplane: backplane, environment: LoadEnvironment(logger: quietLogger))
        try await backplane.waitUntilListening()
        try await tiered.waitForBackplaneEvents(atLeast: 1)  // it has emptied its (empty) memory tier
        return (tiered, backplane)
    }

    @Test("a write on node A drops node B's older copy; B's next read is A's value; A ignores its own notice")
    func aWriteOnOneNode_reachesTheOthers() async throws {
        try await TestScope.run {
            let table = TestScope.table()
            let (a, _) = try await node("a", table: table)
            let (b, _) = try await node("b", table: table)
            // Stored in the past: a removal is stamped with the remover's clock, and must be later.
            let t0 = Date().addingTimeInterval(-60)
            try await a.insert(itemA, for: "feed", storedAt: t0)
            try await b.waitForBackplaneEvents(atLeast: 2)  // listening, then A's set
            #expect(try await b.retrieve("feed")?.value == itemA)
            #expect(b.memory.immediateEntry(for: "feed")?.value == itemA, "kept in B's memory")

            try await a.insert(itemB, for: "feed", storedAt: t0.addingTimeInterval(1))
            try await b.waitForBackplaneEvents(atLeast: 3)
            #expect(b.memory.immediateEntry(for: "feed") == nil, "B's older copy is dropped")
            #expect(try await b.retrieve("feed")?.value == itemB)

            try await a.delete("feed")
            try await b.waitForBackplaneEvents(atLeast: 4)
            #expect(b.memory.immediateEntry(for: "feed") == nil)
            #expect(try await b.retrieve("feed") == nil)
            try await a.waitForBackplaneEvents(atLeast: 4)
            #expect(a.backplaneStatistics.ownChangesIgnored == 3)
            #expect(b.backplaneStatistics.copiesDropped == 2)
        }
    }

    @Test("three nodes that share one name (every container's process is PID 1) stay coherent, and each warns of the others")
    func nodesSharingOneName_stayCoherent() async throws {
        try await TestScope.run {
            let table = TestScope.table()
            var nodes: [(tiered: Node, backplane: PostgresBackplane)] = []
            for _ in 0..<3 { nodes.append(try await node("proxy-1", table: table)) }
            #expect(Set(nodes.map(\.backplane.instance)).count == 3)
            #expect(nodes[2].backplane.otherListenersNamedAlike == 2)
            let t0 = Date().addingTimeInterval(-60)
            for (index, node) in nodes.enumerated() {
                try await node.tiered.insert(itemA, for: "feed", storedAt: t0.addingTimeInterval(Double(index)))
            }
            try await nodes[1].tiered.insert(itemB, for: "feed", storedAt: t0.addingTimeInterval(10))
            for node in nodes { try await node.tiered.waitForBackplaneEvents(atLeast: 5) }  // listening + 4 writes
            for node in nodes { #expect(try await node.tiered.retrieve("feed")?.value == itemB) }
            #expect(nodes.map { $0.tiered.backplaneStatistics.ownChangesIgnored } == [1, 2, 1])
        }
    }

    @Test("the latest store time wins in the table: an older write, refresh or removal changes nothing and announces nothing")
    func anOlderWrite_neverReplacesALaterRow_andAnnouncesNothing() async throws {
        try await TestScope.run {
            let table = TestScope.table()
            let (a, _) = try await node("a", table: table)
            let (b, _) = try await node("b", table: table)
            let t0 = Date().addingTimeInterval(-60)
            try await a.insert(itemB, for: "feed", storedAt: t0.addingTimeInterval(5))
            try await b.waitForBackplaneEvents(atLeast: 2)
            // Straight to the table, as another node whose write committed last would.
            #expect(try await !a.shared.insertUnlessNewer(CacheEntry(value: itemA, storedAt: t0), for: "feed"))
            try await a.shared.insert(itemA, for: "feed", storedAt: t0)
            #expect(try await !a.shared.refresh("feed", storedAt: t0, validators: CacheValidators()))
            try await a.shared.delete("feed", storedAtOrBefore: t0)
            try await a.shared.delete("never written")
            #expect(try await a.shared.retrieve("feed")?.value == itemB)
            #expect(try await a.shared.retrieve("feed")?.storedAt == t0.addingTimeInterval(5))
            // A marker: notices arrive in commit order, so any of the above would come before it.
            try await a.insert(itemA, for: "marker", storedAt: t0)
            try await b.waitForBackplaneEvents(atLeast: 3)
            #expect(b.backplaneStatistics.events == 3, "listening, the first write, the marker: nothing else was announced")
        }
    }

    @Test("a notification is slim: key, action, time and sender, never the value; a store that does not announce sends none")
    func theNotification_isSlim() async throws {
        try await TestScope.run {
            let table = TestScope.table()
            let quiet = try TestScope.store(Item.self, table: table)
            let loud = try TestScope.store(Item.self, table: table)
            loud.announceChanges(as: "loud")
            #expect(quiet.announcingNode == nil)
            let configuration = try PostgresConnection.Configuration(
                host: "127.0.0.1", port: TestServer.configuration().port ?? 5432, username: "strata", password: "strata",
                database: "strata", tls: .disable)
            let connection = try await PostgresConnection.connect(configuration: configuration, id: 1, logger: quietLogger)
            let secret = Item(id: 7, name: "a value that must not travel")
            let payload = try await connection.listen(on: loud.changeChannel) { notifications in
                try await quiet.insert(secret, for: "quiet", storedAt: Date())
                try await loud.insert(secret, for: "loud", storedAt: Date(timeIntervalSinceReferenceDate: 800_000_000.25))
                var iterator = notifications.makeAsyncIterator()
                return try await iterator.next()?.payload
            }
            try await connection.close()
            let notice = try #require(payload.flatMap(PostgresChangeNotice.parse))
            #expect(notice == PostgresChangeNotice(key: "loud", action: .set, at: Date(timeIntervalSinceReferenceDate: 800_000_000.25), sender: "loud"))
            #expect(payload?.contains("must not travel") == false)
        }
    }

    @Test("when the listening connection drops (closed here, or terminated by the server), the node empties its memory tier once it listens again")
    func aLostListeningConnection_emptiesTheMemoryTier() async throws {
        try await TestScope.run {
            let table = TestScope.table()
            // A name of its own: the server ends this node's listening connection by its name.
            let name = "b-\(table)"
            let (b, backplane) = try await node(name, table: table)
            try await b.insert(itemA, for: "feed", storedAt: Date())
            #expect(b.memory.immediateEntry(for: "feed") != nil)
            // Its own notice first: one still on its way when the connection drops is lost with it.
            try await b.waitForBackplaneEvents(atLeast: 2)
            await backplane.dropConnection()
            try await backplane.waitUntilListening(starts: 2)
            try await b.waitForBackplaneEvents(atLeast: 3)  // listening, own set, listening again
            #expect(b.memory.immediateEntry(for: "feed") == nil, "treated as stale: read from the shared tier again")
            #expect(try await b.retrieve("feed")?.value == itemA)

            // The server ends the session (an administrator, a failover): the same.
            let applicationName = "strata backplane \(name)"
            try await Admin.require().execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = \(applicationName)")
            try await backplane.waitUntilListening(starts: 3)
            try await b.waitForBackplaneEvents(atLeast: 4)
            #expect(b.memory.immediateEntry(for: "feed") == nil)
            #expect(b.backplaneStatistics.listeningStarts == 3)
        }
    }

    enum HeartbeatFault: String, CustomTestStringConvertible {
        /// The connection closes just before the heartbeat's query is sent.
        case closedFirst
        /// The connection closes and the query is never answered, whatever the cancellation (what
        /// PostgresNIO 1.33 does with a query written to a closed connection).
        case neverAnswered
        var testDescription: String { rawValue }
    }

    @Test("a heartbeat due as the listening connection closes never stalls the backplane, even when its query is never answered: it listens again", arguments: [HeartbeatFault.closedFirst, .neverAnswered])
    func aHeartbeatOnAClosedConnection_neverStallsTheBackplane(_ fault: HeartbeatFault) async throws {
        try await TestScope.run {
            let table = TestScope.table()
            let shared = try TestScope.store(Item.self, table: table)
            let backplane = try PostgresBackplane(
                announcingFor: shared, node: "hb-\(table)", heartbeatInterval: .milliseconds(20), heartbeatTimeout: .seconds(60),
                logger: quietLogger)
            // A timeout far away: no heartbeat of a loaded run fails by itself, so the only loss of
            // the connection is the one below, and recovering from it cannot rely on the timeout.
            TestScope.onExit { await backplane.shutdown() }
            try await backplane.waitUntilListening()
            let fired = Locked(false)
            let unanswered = Locked<CheckedContinuation<Void, Never>?>(nil)
            TestScope.onExit { unanswered.withLock { $0 }?.resume() }  // lets the abandoned check end
            backplane.core.beforeHeartbeatQuery.withLock {
                $0 = { connection in
                    guard fired.withLock({ fired in defer { fired = true }; return !fired }) else { return }
                    try? await connection.close()
                    if fault == .neverAnswered {
                        await withCheckedContinuation { continuation in unanswered.withLock { $0 = continuation } }
                    }
                }
            }
            try await backplane.waitUntilListening(starts: 2)
            #expect(fired.withLock { $0 })
            #expect(backplane.isListening)
        }
    }

    @Test("clearing the cache on one node empties every node's memory tier")
    func clearingOnOneNode_emptiesTheOthers() async throws {
        try await TestScope.run {
            let table = TestScope.table()
            let (a, _) = try await node("a", table: table)
            let (b, _) = try await node("b", table: table)
            try await b.insert(itemA, for: "feed", storedAt: Date())
            try await a.removeAll()
            try await b.waitForBackplaneEvents(atLeast: 3)  // listening, own set, A's clear
            #expect(b.memory.immediateEntry(for: "feed") == nil)
            #expect(try await b.retrieve("feed") == nil)
        }
    }
}

/// An upstream for the stampede tests: counts its loads, and holds each until the test opens it
/// (or, for a load the test wants to die with its holder, forever).
final class GatedUpstream: Loader {
    private struct State {
        var loads = 0
        var open = false
        var waiters = ConditionWaiters<Int>()
        var openWaiters = ConditionWaiters<Bool>()
    }
    private let state = Locked(State())
    let value: Item
    /// Loads by these callers' numbers (1-based) never answer.
    let neverAnswering: Set<Int>

    init(value: Item, neverAnswering: Set<Int> = []) {
        self.value = value
        self.neverAnswering = neverAnswering
    }

    var loads: Int { state.withLock { $0.loads } }

    func open() {
        state.withLock { state in
            state.open = true
            state.openWaiters.resumeSatisfied(by: true)
        }
    }

    func waitForLoads(_ count: Int) async throws {
        try await state.wait(in: \.waiters, current: { $0.loads }, until: { $0 >= count })
    }

    func load(_ input: Void) async throws -> Item {
        let number = state.withLock { state in
            state.loads += 1
            state.waiters.resumeSatisfied(by: state.loads)
            return state.loads
        }
        if neverAnswering.contains(number) {
            try await state.wait(in: \.waiters, current: { $0.loads }, until: { _ in false })  // until cancelled
        }
        try await state.wait(in: \.openWaiters, current: { $0.open }, until: { $0 })
        return value
    }
}

/// Stampede protection across processes: each "process" has its own pool and its own lock
/// connection, as a separate process would.
@Suite("PostgresFleetLock and coalescedAcrossProcesses", .enabled(if: TestServer.isAvailable, TestServer.skipReason), .timeLimit(.minutes(2)))
struct FleetLockPostgresTests {
    struct Process {
        var store: StoreSpy<PostgresStore<Item>>
        var lock: PostgresFleetLock
    }

    func process(_ name: String, table: String) throws -> Process {
        let store = try TestScope.store(Item.self, table: table)
        // Generous, as the stores' connect timeout: the tests share two cores with every other suite.
        let lock = try PostgresFleetLock(for: store, node: name, operationTimeout: .seconds(30), logger: quietLogger)
        TestScope.onExit { await lock.shutdown() }
        return Process(store: StoreSpy(store), lock: lock)
    }

    func loader(_ upstream: GatedUpstream, _ process: Process, timeout: Duration = .seconds(600)) -> some Loader<Void, Item> {
        upstream
            .coalescedAcrossProcesses(
                in: process.store, key: "hot", freshness: .maxAge(.seconds(60)), lock: process.lock, timeout: timeout,
                pollInterval: .milliseconds(50))
            .environment(LoadEnvironment(logger: quietLogger))
    }

    @Test("four processes, 200 concurrent misses of one key: one upstream call, every caller answered with it")
    func aStampede_callsTheUpstreamOnce() async throws {
        try await TestScope.run {
            let table = TestScope.table()
            let processes = try (1...4).map { try process("p\($0)", table: table) }
            let upstream = GatedUpstream(value: itemA)
            try await withThrowingTaskGroup(of: Item.self) { group in
                for process in processes {
                    for _ in 0..<50 { group.addTask { try await loader(upstream, process).load() } }
                }
                try await upstream.waitForLoads(1)
                // Every caller tried the lock and read the table at least once before the holder answers.
                try await waitForReads(atLeast: 50, in: processes)
                upstream.open()
                var answers = 0
                for try await item in group {
                    #expect(item == itemA)
                    answers += 1
                }
                #expect(answers == 200)
            }
            #expect(upstream.loads == 1)
            #expect(processes.map(\.lock.heldKeys) == [0, 0, 0, 0])
        }
    }

    @Test("the holder's connection dies mid-load: its lock goes with it, and a waiter on another process loads and answers")
    func aKilledHolder_releasesByDying() async throws {
        try await TestScope.run {
            let table = TestScope.table()
            let holderName = "holder-\(table)"
            let holder = try process(holderName, table: table)
            let waiter = try process("waiter", table: table)
            let upstream = GatedUpstream(value: itemB, neverAnswering: [1])
            upstream.open()
            let holding = Task { try await loader(upstream, holder).load() }
            try await upstream.waitForLoads(1)
            #expect(holder.lock.heldKeys == 1)
            // A waiter polls; the lock timeout is far away, so only the lock's release lets it load.
            let waiting = Task { try await loader(upstream, waiter).load() }
            try await waitForReads(atLeast: 2, in: [waiter])
            let applicationName = "strata lock \(holderName)"
            try await Admin.require().execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = \(applicationName)")
            #expect(try await waiting.value == itemB)
            #expect(upstream.loads == 2)
            holding.cancel()
            _ = await holding.result
        }
    }

    /// Waits until each process's store has been read at least `count` times.
    func waitForReads(atLeast count: Int, in processes: [Process]) async throws {
        for process in processes { try await process.store.waitForMessages(atLeast: count) }
    }
}
#endif

#if Postgres
/// The limits a fleet's shared table needs: a largest value, and the format version that lets two
/// versions of an app share the table during a rollout.
@Suite("PostgresStore limits: maxValueBytes and formatVersion", .enabled(if: TestServer.isAvailable, TestServer.skipReason), .timeLimit(.minutes(2)))
struct PostgresStoreLimitsTests {
    @Test("a value over maxValueBytes is not stored, the row it replaces goes, and the load still answers")
    func aValueOverTheLimit_isNotStored() async throws {
        try await TestScope.run {
            let table = TestScope.table()
            let store = try TestScope.store(Item.self, table: table)
            #expect(store.maxValueBytes == 1 << 20)
            store.maxValueBytes = 64
            try await store.insert(itemA, for: "feed", storedAt: Date())
            #expect(try await store.retrieve("feed")?.value == itemA)
            let big = Item(id: 2, name: String(repeating: "x", count: 100))
            let answered = try await LoaderSpy<Void, Item>(.success(big))
                .writingThrough(in: store, key: "feed")
                .environment(LoadEnvironment(logger: quietLogger))
                .load()
            #expect(answered == big, "the load answers")
            #expect(try await store.retrieve("feed") == nil, "not stored, and the older row is gone")
            #expect(try await Admin.require().rowCount(in: table, key: "feed") == 0)
        }
    }

    @Test("a byte budget for the table: the rows read or written least recently go until the rest fit")
    func aByteBudget_removesTheLeastRecentlyUsedRows() async throws {
        try await TestScope.run {
            let table = TestScope.table()
            let store = try TestScope.store(Item.self, table: table)
            let t0 = Date().addingTimeInterval(-600)
            for index in 0..<20 {
                try await store.insert(Item(id: 100 + index, name: String(repeating: "x", count: 1_000)), for: "k\(index)", storedAt: t0)
            }
            let total = try await store.storedBytes()
            let each = total / 20
            #expect(each > 1_000)
            // Newest last_access first: k19 … k0 were written in that order.
            let removed = try await store.removeEntries(toFitBytes: each * 5)
            #expect(removed == 15)
            #expect(try await store.storedBytes() <= each * 5)
            for index in 15..<20 { #expect(try await store.retrieve("k\(index)") != nil, "k\(index) is kept") }
            #expect(try await store.retrieve("k0") == nil)
            #expect(try await store.removeEntries(toFitBytes: 0) == 5)
            #expect(try await store.storedBytes() == 0)
        }
    }

    @Test("a table made before the format version (and the server's max-age) gains the columns in place; its rows are version 0")
    func anOlderTable_gainsTheColumnsInPlace() async throws {
        try await TestScope.run {
            let table = TestScope.table()
            let bytes = try JSONEncoder().encode(itemA)
            let seconds = Date(timeIntervalSinceReferenceDate: 800_000_000).timeIntervalSinceReferenceDate
            try await Admin.require().execute(#"""
                CREATE TABLE "\#(unescaped: table)" (
                    key TEXT PRIMARY KEY, value BYTEA NOT NULL, stored_at TIMESTAMPTZ NOT NULL,
                    stored_at_seconds DOUBLE PRECISION NOT NULL, etag TEXT, last_modified TEXT,
                    last_access TIMESTAMPTZ NOT NULL, size INTEGER NOT NULL, expires_at TIMESTAMPTZ)
                """#)
            try await Admin.require().execute(#"""
                INSERT INTO "\#(unescaped: table)" VALUES ('feed', \#(bytes), now(), \#(seconds), NULL, NULL, now(), \#(Int32(bytes.count)), NULL)
                """#)
            let store = try TestScope.store(Item.self, table: table)
            #expect(try await store.retrieve("feed")?.value == itemA)
            let newer = try TestScope.store(Item.self, table: table)
            newer.formatVersion = 1
            #expect(try await newer.retrieve("feed") == nil)
        }
    }

    @Test("two format versions share one table: each reads only its own rows, and leaves the other's in place")
    func twoFormatVersions_shareOneTable() async throws {
        try await TestScope.run {
            let table = TestScope.table()
            let old = try TestScope.store(Item.self, table: table)
            let new = try TestScope.store(Item.self, table: table)
            new.formatVersion = 2
            let t0 = Date()
            try await new.insert(itemB, for: "feed", storedAt: t0)
            #expect(try await old.retrieve("feed") == nil, "another version's row is a miss")
            #expect(try await old.refresh("feed", storedAt: t0.addingTimeInterval(5), validators: .none) == false)
            #expect(try await new.retrieve("feed") == CacheEntry(value: itemB, storedAt: t0), "left in place, not re-stamped")
            try await old.insert(itemA, for: "feed", storedAt: t0)
            #expect(try await new.retrieve("feed") == nil)
            #expect(try await old.retrieve("feed")?.value == itemA)
            #expect(try await Admin.require().rowCount(in: table, key: "feed") == 1)
        }
    }
}

/// Many keys against the real server: one query for the stored ones, one remote call for the rest.
@Suite("loadingMany(in:freshness:) over PostgresStore", .enabled(if: TestServer.isAvailable, TestServer.skipReason), .timeLimit(.minutes(2)))
struct LoadingManyPostgresTests {
    @Test("PostgresStore.retrieveMany reads the keys in one query; a row of another format version or one that no longer decodes is a miss")
    func retrieveMany_readsInOneQuery() async throws {
        try await TestScope.run {
            let table = TestScope.table()
            let store = try TestScope.store(Item.self, table: table)
            let t0 = Date(timeIntervalSinceReferenceDate: 800_000_000.5)
            try await store.insert(itemA, for: "a", storedAt: t0)
            try await store.insert(itemB, for: "b", storedAt: t0)
            try await store.insert(itemB, for: "broken", storedAt: t0)
            try await Admin.require().execute(#"UPDATE "\#(unescaped: table)" SET value = '\\x00' WHERE key = 'broken'"#)
            let entries = try await store.retrieveMany(["a", "b", "broken", "none", "a"])
            #expect(entries == ["a": CacheEntry(value: itemA, storedAt: t0), "b": CacheEntry(value: itemB, storedAt: t0)])
            #expect(try await Admin.require().rowCount(in: table, key: "broken") == 0, "the broken row is discarded")
        }
    }

    @Test("a tiered store answers from memory, then one shared read; the remote is called once for the misses")
    func loadingMany_overATieredStore() async throws {
        try await TestScope.run {
            let table = TestScope.table()
            let shared = StoreSpy(try TestScope.store(Item.self, table: table))
            let tiered = TieredStore(memory: MemoryStore<String, Item>(), shared: shared, environment: LoadEnvironment(logger: quietLogger))
            try await tiered.insert(itemA, for: "in-memory", storedAt: Date())
            try await shared.base.insert(itemB, for: "in-table", storedAt: Date())
            let remote = LoaderSpy<[String], [String: Item]>(.success(["new": Item(id: 9, name: "new")]))
            let answers = try await remote
                .loadingMany(in: tiered, freshness: .maxAge(.seconds(60)))
                .environment(LoadEnvironment(logger: quietLogger))
                .load(["in-memory", "in-table", "new"])
            #expect(answers.count == 3)
            #expect(remote.inputs == [["new"]])
            let reads = shared.messages.filter { if case .retrieveMany = $0 { true } else { false } }
            #expect(reads.count == 1, "one read of the table for the keys memory did not have")
            if case .retrieveMany(let keys)? = reads.first { #expect(Set(keys) == ["in-table", "new"]) }
            #expect(try await shared.base.retrieve("new")?.value.name == "new", "written to the table")
            #expect(tiered.memory.immediateEntry(for: "in-table") != nil, "kept in memory")
        }
    }
}
#endif
