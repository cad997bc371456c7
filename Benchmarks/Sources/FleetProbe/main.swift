// The fleet tier measured against a real PostgreSQL (docs/BENCHMARKS.md, "The fleet tier"):
//
//   eval "$(scripts/postgres.sh start)"
//   swift run -c release --package-path Benchmarks FleetProbe
//
// Prints, each against a baseline measured in the same run:
//   1. an L1 hit (TieredStore) against the MemoryStore it wraps;
//   2. an L2 hit (PostgresStore.retrieve) against a raw PostgresNIO select and JSONDecoder of the row;
//   3. how soon node B drops a copy node A replaced (A's insert returned → B's copy gone), p50/p99,
//      with 2, 10 and 100 listening nodes (listeners in one process stand in for hosts);
//   4. a stampede of 200 concurrent misses on 4 "processes" (each its own pool and lock connection)
//      against an upstream that takes 100 ms: upstream calls and time until every caller has its answer,
//      without coordination, coalesced per process, and with the fleet lock.
import Foundation
import Logging
import PostgresNIO
@_spi(StrataInternals) import Strata
import StrataPostgres

struct Row: Codable, Sendable, Equatable {
    var id: Int
    var title: String
    var body: String
}

let quiet = Logger(label: "fleetprobe") { _ in SwiftLogNoOpLogHandler() }
guard let url = ProcessInfo.processInfo.environment["STRATA_POSTGRES_URL"], let parts = URLComponents(string: url) else {
    FileHandle.standardError.write(Data("FleetProbe: set STRATA_POSTGRES_URL (eval \"$(scripts/postgres.sh start)\")\n".utf8))
    exit(2)
}
let table = "strata_fleetprobe_" + UUID().uuidString.prefix(8).lowercased()
let row = Row(id: 1, title: "A post about caches", body: String(repeating: "Lorem ipsum dolor sit amet. ", count: 8))

func store() throws -> PostgresStore<Row> {
    try PostgresStore<Row>(url: url, table: table, connectTimeout: .seconds(30), logger: quiet)
}

/// The median of `batches` batch timings of `count` calls of `body`, per call, in nanoseconds.
func measure(batches: Int = 15, count: Int, _ body: () async throws -> Void) async rethrows -> Double {
    var perCall: [Double] = []
    for _ in 0..<batches {
        let start = ContinuousClock.now
        for _ in 0..<count { try await body() }
        let elapsed = ContinuousClock.now - start
        perCall.append(Double(elapsed.components.seconds) * 1e9 + Double(elapsed.components.attoseconds) / 1e9)
    }
    perCall.sort()
    return perCall[perCall.count / 2] / Double(count)
}

func format(_ nanoseconds: Double) -> String {
    nanoseconds < 1_000 ? String(format: "%.0f ns", nanoseconds)
        : nanoseconds < 1_000_000 ? String(format: "%.1f µs", nanoseconds / 1_000) : String(format: "%.2f ms", nanoseconds / 1_000_000)
}

func percentile(_ values: [Double], _ p: Double) -> Double {
    let sorted = values.sorted()
    return sorted[min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1)]
}

print("FleetProbe: \(ProcessInfo.processInfo.activeProcessorCount) cores, table \(table)")

// 1. L1 hit.
do {
    let memory = MemoryStore<String, Row>()
    let tiered = TieredStore(memory: memory, shared: try store(), environment: LoadEnvironment(logger: quiet))
    try await tiered.insert(row, for: "post", storedAt: Date())
    // Off the main actor (this file's top level runs on it): a hop per call would be all we measured.
    let (base, l1) = try await Task.detached {
        let base = try await measure(count: 200_000) { _ = try await memory.retrieve("post") }
        let l1 = try await measure(count: 200_000) { _ = try await tiered.retrieve("post") }
        return (base, l1)
    }.value
    print(String(format: "L1 hit: TieredStore.retrieve %@, MemoryStore.retrieve %@: %.2fx", format(l1), format(base), l1 / base))
}

// 2. L2 hit against a raw select.
do {
    let shared = try store()
    try await shared.insert(row, for: "post", storedAt: Date())
    var configuration = PostgresClient.Configuration(
        host: parts.host ?? "127.0.0.1", port: parts.port ?? 5432, username: parts.user ?? "postgres",
        password: parts.password, database: String(parts.path.dropFirst()), tls: .disable)
    configuration.options.maximumConnections = 4
    let client = PostgresClient(configuration: configuration, backgroundLogger: quiet)
    let runner = Task { await client.run() }
    let decoder = JSONDecoder()
    let raw: () async throws -> Void = {
        let rows = try await client.query(
            #"SELECT value, stored_at_seconds FROM "\#(unescaped: table)" WHERE key = \#("post")"#, logger: quiet)
        for try await (value, _) in rows.decode((Data, Double).self) { _ = try decoder.decode(Row.self, from: value) }
    }
    for _ in 0..<200 { try await raw(); _ = try await shared.retrieve("post") }  // warm both pools
    let base = try await measure(batches: 9, count: 500, raw)
    let l2 = try await measure(batches: 9, count: 500) { _ = try await shared.retrieve("post") }
    print(String(format: "L2 hit: PostgresStore.retrieve %@, raw PostgresNIO select + JSONDecoder %@: %.2fx", format(l2), format(base), l2 / base))
    runner.cancel()
    await shared.shutdown()
}

// 3. Notification latency.
for listeners in [2, 10, 100] {
    let writerStore = try store()
    let writerBackplane = try PostgresBackplane(announcingFor: writerStore, node: "writer", logger: quiet)
    let writer = TieredStore(memory: MemoryStore(), shared: writerStore, backplane: writerBackplane, environment: LoadEnvironment(logger: quiet))
    // Every listening node shares one store (its pool is used for the reads only); each has its own backplane connection.
    let readerStore = try store()
    var readers: [(TieredStore<MemoryStore<String, Row>, PostgresStore<Row>>, PostgresBackplane)] = []
    for index in 1..<listeners {
        let backplane = try PostgresBackplane(announcingFor: readerStore, node: "reader-\(index)", logger: quiet)
        readers.append((TieredStore(memory: MemoryStore(), shared: readerStore, backplane: backplane, environment: LoadEnvironment(logger: quiet)), backplane))
    }
    for (reader, backplane) in readers {
        try await backplane.waitUntilListening()
        try await reader.waitForBackplaneEvents(atLeast: 1)
    }
    try await writerBackplane.waitUntilListening()
    var latencies: [Double] = []
    var events = 1
    let rounds = listeners == 100 ? 100 : 300
    for round in 0..<rounds {
        // Every reader holds the old copy; the writer replaces it; how long until the last reader dropped it.
        let storedAt = Date(timeIntervalSinceReferenceDate: 800_000_000 + Double(round))
        for (reader, _) in readers { try await reader.memory.insert(CacheEntry(value: row, storedAt: storedAt), for: "post") }
        try await writer.insert(CacheEntry(value: row, storedAt: storedAt.addingTimeInterval(0.5)), for: "post")
        let committed = ContinuousClock.now
        events += 1
        for (reader, _) in readers { try await reader.waitForBackplaneEvents(atLeast: events) }
        let elapsed = ContinuousClock.now - committed
        latencies.append(Double(elapsed.components.seconds) * 1e9 + Double(elapsed.components.attoseconds) / 1e9)
        if readers.contains(where: { $0.0.memory.immediateEntry(for: "post") != nil }) {
            print("FleetProbe: a reader kept the replaced copy"); exit(1)
        }
    }
    print("notification latency, \(listeners) nodes (last of \(listeners - 1) readers dropped the copy after the writer's insert returned), \(rounds) writes: p50 \(format(percentile(latencies, 0.5))), p99 \(format(percentile(latencies, 0.99)))")
    for (_, backplane) in readers { await backplane.shutdown() }
    await writerBackplane.shutdown()
    await readerStore.shutdown()
    await writerStore.shutdown()
}

// 4. The stampede.
final class Upstream: Loader, Sendable {
    let calls = Locked(0)
    func load(_ input: Void) async throws -> Row {
        calls.withLock { $0 += 1 }
        try await Task.sleep(for: .milliseconds(100))
        return row
    }
}

enum Coordination: String, CaseIterable { case none = "no coordination", perProcess = "coalesced() per process", fleet = "coalesced() + fleet lock" }
for coordination in Coordination.allCases {
    let key = "stampede-\(coordination.rawValue.hashValue)"
    let upstream = Upstream()
    var processes: [any Loader<Void, Row>] = []
    var toShut: [PostgresStore<Row>] = []
    var locks: [PostgresFleetLock] = []
    for index in 0..<4 {
        let shared = try store()
        toShut.append(shared)
        let freshness = FreshnessPolicy.maxAge(.seconds(60))
        switch coordination {
        case .none:
            processes.append(shared.loader(key: key, freshness: freshness).fallingBack(to: upstream.writingThrough(in: shared, key: key)))
        case .perProcess:
            processes.append(shared.loader(key: key, freshness: freshness).fallingBack(to: upstream.writingThrough(in: shared, key: key)).coalesced())
        case .fleet:
            let lock = try PostgresFleetLock(for: shared, node: "p\(index)", logger: quiet)
            locks.append(lock)
            processes.append(shared.loader(key: key, freshness: freshness)
                .fallingBack(to: upstream.coalescedAcrossProcesses(in: shared, key: key, freshness: freshness, lock: lock, pollInterval: .milliseconds(20)))
                .coalesced())
        }
        _ = try await shared.count  // connect (and create the table) before the clock starts
    }
    let start = ContinuousClock.now
    try await withThrowingTaskGroup(of: Row.self) { group in
        for process in processes {
            for _ in 0..<50 { group.addTask { try await process.load(()) } }
        }
        for try await answer in group where answer != row { print("FleetProbe: a wrong answer"); exit(1) }
    }
    let elapsed = ContinuousClock.now - start
    let calls = upstream.calls.withLock { $0 }
    print("stampede, 200 misses on 4 processes, upstream 100 ms, \(coordination.rawValue): \(calls) upstream calls, all answered in \(format(Double(elapsed.components.seconds) * 1e9 + Double(elapsed.components.attoseconds) / 1e9))")
    for lock in locks { await lock.shutdown() }
    for shared in toShut { await shared.shutdown() }
}

// Clean up.
do {
    let cleaner = try store()
    try await cleaner.removeAll()
    await cleaner.shutdown()
    var configuration = PostgresClient.Configuration(
        host: parts.host ?? "127.0.0.1", port: parts.port ?? 5432, username: parts.user ?? "postgres",
        password: parts.password, database: String(parts.path.dropFirst()), tls: .disable)
    configuration.options.maximumConnections = 1
    let client = PostgresClient(configuration: configuration, backgroundLogger: quiet)
    let runner = Task { await client.run() }
    try await client.query(#"DROP TABLE IF EXISTS "\#(unescaped: table)""#, logger: quiet)
    runner.cancel()
}
