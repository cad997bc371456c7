// Runs one benchmark scenario in a loop, with nothing else in the process worth counting: the driver
// for `valgrind --tool=callgrind` (instruction counts are repeatable on a noisy machine; wall time is
// not). See docs/BENCHMARKS.md, "How to profile".
//
// Usage: BenchProbe <scenario> <iterations>
// Instructions per operation = (Ir(2N) − Ir(N)) / N, which cancels start-up and setup.
// With STRATA_PROBE_KEEP set, the files the scenario wrote are kept and their directory printed.
import BenchmarkFixtures
import Foundation
@_spi(StrataInternals) import Strata
import StrataOutbox
import StrataQueries
import StrataTesting
import GRDB
import StrataSQLite
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Keeps a value alive and opaque to the optimiser (the benchmark package's `blackHole`, inlined here
/// so this program links nothing but Strata).
@inline(never)
func consume<T>(_ value: T) { withExtendedLifetime(value) {} }

let scenarios = [
    "chain5", "chain5-baseline", "memory-hit", "mutex-hit", "file-read-json", "file-read-binary",
    "file-read-baseline", "file-write-json", "file-write-baseline", "json-decode", "binary-decode",
    "coalesced-10k", "tasks-10k", "sqlite-read", "sqlite-read-baseline", "sqlite-write", "sqlite-write-baseline",
    "readme-chain", "main-readme-chain", "main-chain5", "main-chain5-baseline", "main-memory-hit", "main-mutex-hit",
    "outbox-enqueue-sqlite", "outbox-enqueue-sqlite-baseline", "chain5-uncoalesced", "main-chain5-uncoalesced",
    "main-query-read", "main-query-current", "query-refetch", "query-refetch-inspected",
    "query-publish-1", "query-publish-10", "query-publish-1000",
    "query-publish-1-baseline", "query-publish-10-baseline", "query-publish-1000-baseline",
    "outbox-shared-files", "main-selection-read", "mutation-rollback", "mutation-rollback-unobserved", "outbox-enqueue-memory",
    "outbox-drain-sqlite", "outbox-drain-files", "outbox-drain-memory",
    "outbox-drain-http-memory", "outbox-drain-http-sqlite", "outbox-drain-http-files", "post-loop",
    "outbox-drain-scopes10-latency", "post-loop-latency",
    "outbox-enqueue-files", "outbox-enqueue-files-baseline", "outbox-enqueue-files-concurrent", "outbox-enqueue-sqlite-concurrent",
] + Scenarios.PassThrough.allCases.map { "pass-\($0.rawValue)" }
let arguments = CommandLine.arguments
guard arguments.count == 3, scenarios.contains(arguments[1]), let iterations = Int(arguments[2]), iterations > 0 else {
    FileHandle.standardError.write(Data("usage: BenchProbe <\(scenarios.joined(separator: "|"))> <iterations>\n".utf8))
    exit(2)
}
let scenario = arguments[1]
let feed = BenchmarkFeed.make()
let directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("strata-probe-\(getpid())")

/// Runs `load` `iterations` times (with the iteration's index): from main-actor code for the `main-`
/// scenarios (the main thread runs the main queue below), from this task for the others. `load` is
/// `nonisolated(nonsending)`, so it runs where it is called: a plain `async` closure would leave the
/// main actor and come back on every call, the very hop the main-actor scenarios must not contain.
/// For scenarios whose body can suspend, ``repeatLoads(of:)`` is the loop (see there).
func repeatLoads(_ load: nonisolated(nonsending) @Sendable (Int) async throws -> Void) async throws {
    if scenario.hasPrefix("main-") {
        try await Scenarios.onMainActor(iterations) { try await load($0) }
    } else {
        for index in 0..<iterations { try await load(index) }
    }
}

/// Loads `loader` `iterations` times, each load awaited by the loop itself, as app code awaits one
/// (`items = try await feed.load()`): from main-actor code for the `main-` scenarios, from this task
/// for the others. A loop that reaches each load through a closure value (``repeatLoads(_:)``) pays
/// an executor check per load once the load can suspend, which a direct `await` does not
/// (docs/BENCHMARKS.md, "What dominates each remaining gap").
func repeatLoads<L: Loader>(of loader: L) async throws where L.Input == Void {
    if scenario.hasPrefix("main-") {
        try await loadOnMainActor(loader, iterations)
    } else {
        for _ in 0..<iterations { consume(try await loader.load()) }
    }
}

@MainActor
func loadOnMainActor<L: Loader>(_ loader: L, _ count: Int) async throws where L.Input == Void {
    for _ in 0..<count { consume(try await loader.load()) }
}

/// The baseline of ``repeatLoads(of:)``: the same loops around the store call the chains end in.
func repeatRetrieves(of memory: MemoryStore<String, [Article]>) async throws {
    if scenario.hasPrefix("main-") {
        try await retrieveOnMainActor(memory, iterations)
    } else {
        for _ in 0..<iterations { consume(try await memory.retrieve(Scenarios.feedKey)!.value) }
    }
}

@MainActor
func retrieveOnMainActor(_ memory: MemoryStore<String, [Article]>, _ count: Int) async throws {
    for _ in 0..<count { consume(try await memory.retrieve(Scenarios.feedKey)!.value) }
}

/// Runs `scenario` `iterations` times.
func run() async throws {
    switch scenario {
    case _ where scenario.hasPrefix("pass-"):
        let memory = try await Scenarios.memoryHoldingFeed(feed)
        let hit = memory.loader(key: Scenarios.feedKey, freshness: .any)
        let remote = ClosureLoader<Void, [Article]>("remote") { throw Scenarios.NotReached() }
        func loop<L: Loader>(_ loader: L) async throws where L.Input == Void {
            try await repeatLoads(of: loader)
        }
        switch Scenarios.PassThrough(rawValue: String(scenario.dropFirst("pass-".count)))! {
        case .bare: try await loop(hit)
        case .named: try await loop(hit.named("local"))
        case .map: try await loop(hit.map { $0 })
        case .mapError: try await loop(hit.mapError { $0 })
        case .fallingBack: try await loop(hit.fallingBack(to: remote.writingThrough(in: memory, key: Scenarios.feedKey)))
        }
    case "chain5", "chain5-baseline", "readme-chain", "main-chain5", "main-chain5-baseline", "main-readme-chain",
         "chain5-uncoalesced", "main-chain5-uncoalesced":
        let memory = try await Scenarios.memoryHoldingFeed(feed)
        let chain5 = Scenarios.chain5(memory: memory)
        let uncoalesced = Scenarios.chain5Uncoalesced(memory: memory)
        let readme = Scenarios.readmeChain(memory: memory)
        switch scenario.replacingOccurrences(of: "main-", with: "") {
        case "chain5": try await repeatLoads(of: chain5)
        case "chain5-uncoalesced": try await repeatLoads(of: uncoalesced)
        case "readme-chain": try await repeatLoads(of: readme)
        default: try await repeatRetrieves(of: memory)
        }
    case "main-selection-read":
        // A selection of the observed query (its count), read from the main actor: against
        // `main-query-read`, the plain observed read.
        let memory = try await Scenarios.memoryHoldingFeed(feed)
        let readme = Scenarios.readmeChain(memory: memory)
        let queries = QueryClient(environment: LoadEnvironment(logger: Scenarios.droppingInfoLogger(label: "app.queries")))
        let query = queries.query(["feed"], policy: QueryPolicy(staleAfter: .seconds(3600)), chain: readme)
        let selection = await MainActor.run { query.observed(select: { $0.count }) }
        await Scenarios.onMainActor(iterations) { _ in consume(selection.value) }
    case "mutation-rollback", "mutation-rollback-unobserved":
        // A mutation with an optimistic update, refused at once and rolled back, on an observed
        // query (a task reading its snapshots: its wake-ups vary with the scheduling, so the count
        // moves between runs) or on one nobody observes (the same work without the deliveries:
        // repeatable).
        let (queries, query, mutation) = Scenarios.refusedMutation()
        let observing = scenario == "mutation-rollback" ? Task { for await _ in query.snapshots() {} } : nil
        if observing != nil { try await query.waitForObservers(1) }
        query.refetch()
        try await query.settled()
        for index in 0..<iterations { _ = try? await mutation.mutate(index) }
        observing?.cancel()
        consume(queries)
    case "outbox-enqueue-memory":
        // The mutation's baseline: a plain enqueue into an outbox in memory.
        let outbox = Outbox(storage: MemoryOutboxStorage(), name: "probe")
        outbox.connectivityChanged(isOnline: false)
        _ = try await outbox.entries()
        let payload = Data(#"{"title":"Offline post","body":"Written on a train, sent later."}"#.utf8)
        for _ in 0..<iterations { consume(try await outbox.enqueue(kind: "post", scope: "/posts", payload: payload)) }
    case "main-query-read", "main-query-current":
        let memory = try await Scenarios.memoryHoldingFeed(feed)
        let readme = Scenarios.readmeChain(memory: memory)
        let queries = QueryClient(environment: LoadEnvironment(logger: Scenarios.droppingInfoLogger(label: "app.queries")))
        let query = queries.query(["feed"], policy: QueryPolicy(staleAfter: .seconds(3600)), chain: readme)
        let live = await MainActor.run { query.observed() }
        if scenario == "main-query-read" {
            await Scenarios.onMainActor(iterations) { _ in consume(live.value) }
        } else {
            try await repeatLoads { _ in consume(query.current.value) }
        }
    case "query-refetch", "query-refetch-inspected":
        // A refetch of an observed query until it settles, with or without an inspector following
        // the client (`QueryRefetch` in the benchmarks).
        let queries = QueryClient(environment: LoadEnvironment(logger: Scenarios.droppingInfoLogger(label: "app.queries")))
        let query = queries.query(["feed"], policy: QueryPolicy(staleAfter: .seconds(3600)), chain: ClosureLoader { 1 })
        let observing = Task { for await _ in query.snapshots() {} }
        let following = scenario == "query-refetch-inspected" ? queries.changes() : nil
        let inspector = following.map { changes in Task { for await _ in changes {} } }
        try await query.waitForObservers(1)
        try await query.settled()
        for _ in 0..<iterations {
            query.refetch()
            try await query.settled()
        }
        observing.cancel()
        inspector?.cancel()
    case "query-publish-1", "query-publish-10", "query-publish-1000",
         "query-publish-1-baseline", "query-publish-10-baseline", "query-publish-1000-baseline":
        // One change (the query's `enabled` toggled: a phase change, no load) delivered to 1, 10 or
        // 1,000 observers, each a task iterating its stream, until every one has every change
        // (`QueryPublish` in the benchmarks); the baseline yields the same snapshots to as many bare
        // `AsyncStream`s with the same buffering and the same consumers.
        let observers = Int(scenario.split(separator: "-")[2])!
        let target = iterations * observers
        let received = Locked(0)
        let (done, finished) = AsyncStream.makeStream(of: Void.self)
        let count: @Sendable () -> Void = {
            if received.withLock({ count in
                count += 1
                return count
            }) == target { finished.yield() }
        }
        if scenario.hasSuffix("-baseline") {
            var snapshot = QueryClient().query(["feed"], chain: ClosureLoader { 1 }).current
            var continuations: [AsyncStream<QuerySnapshot<Int>>.Continuation] = []
            let consumers = (0..<observers).map { _ in
                let (stream, continuation) = AsyncStream.makeStream(of: QuerySnapshot<Int>.self, bufferingPolicy: .bufferingNewest(iterations + 1))
                continuations.append(continuation)
                return Task { for await _ in stream { count() } }
            }
            let state = Locked(snapshot)
            for index in 0..<iterations {
                snapshot = state.withLock { state in
                    state.phase = index % 2 == 1 ? .idle : .paused(.disabled)
                    return state
                }
                for continuation in continuations { continuation.yield(snapshot) }
            }
            for await _ in done { break }
            continuations.forEach { $0.finish() }
            consumers.forEach { $0.cancel() }
        } else {
            let queries = QueryClient(environment: LoadEnvironment(logger: Scenarios.droppingInfoLogger(label: "app.queries")))
            let query = queries.query(["feed"], policy: QueryPolicy(staleAfter: .seconds(3600)), chain: ClosureLoader { 1 })
            // A value shown and fresh: toggling `enabled` publishes a phase change and loads nothing.
            query.refetch()
            try await query.settled()
            // Each consumer's first element is the current snapshot, not a change: counted, and
            // the target moved by as many.
            received.withLock { $0 -= observers }
            let consumers = (0..<observers).map { _ in
                Task { for await _ in query.snapshots(bufferingNewest: iterations + 1) { count() } }
            }
            try await query.waitForObservers(observers)
            for index in 0..<iterations { query.setEnabled(index % 2 == 1) }
            for await _ in done { break }
            consumers.forEach { $0.cancel() }
        }
    case "memory-hit", "mutex-hit", "main-memory-hit", "main-mutex-hit":
        guard #available(macOS 15, *) else { fatalError("Synchronization.Mutex needs macOS 15") }
        let keys = feed.map { "article-\($0.id)" }
        if scenario.hasSuffix("memory-hit") {
            let memory = MemoryStore<String, Article>()
            for (key, article) in zip(keys, feed) { try await memory.insert(article, for: key, storedAt: Date()) }
            try await repeatLoads { index in consume(try await memory.retrieve(keys[index % keys.count])) }
        } else {
            let mutex = MutexDictionary(Dictionary(uniqueKeysWithValues: zip(keys, feed)))
            try await repeatLoads { index in consume(mutex.value(for: keys[index % keys.count])) }
        }
    case "file-read-json", "file-read-binary", "file-write-json":
        let store = scenario == "file-read-binary"
            ? FileStore<[Article]>(directory: directory, codec: BinaryCodec<[Article]>())
            : FileStore<[Article]>(directory: directory)
        try await store.insert(feed, for: Scenarios.feedKey, storedAt: Date())
        if scenario == "file-write-json" {
            for _ in 0..<iterations { try await store.insert(feed, for: Scenarios.feedKey, storedAt: Date()) }
        } else {
            for _ in 0..<iterations { consume(try await store.retrieve(Scenarios.feedKey)!) }
        }
    case "file-read-baseline", "file-write-baseline":
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let url = directory.appendingPathComponent("feed.json")
        try JSONCodec<[Article]>().encode(feed).write(to: url, options: .atomic)
        if scenario == "file-write-baseline" {
            for _ in 0..<iterations {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys]
                try encoder.encode(feed).write(to: url, options: .atomic)
            }
        } else {
            for _ in 0..<iterations { consume(try JSONDecoder().decode([Article].self, from: Data(contentsOf: url))) }
        }
    case "json-decode":
        let bytes = try JSONCodec<[Article]>().encode(feed)
        for _ in 0..<iterations { consume(try JSONDecoder().decode([Article].self, from: bytes)) }
    case "binary-decode":
        let codec = BinaryCodec<[Article]>()
        let bytes = try codec.encode(feed)
        for _ in 0..<iterations { consume(try codec.decode(bytes)) }
    case "coalesced-10k", "tasks-10k":
        for _ in 0..<iterations {
            let gate = Gate(open: scenario == "tasks-10k")
            let upstream = ClosureLoader<Void, [Article]>("upstream") {
                await gate.wait()
                return feed
            }
            let loader = upstream.coalesced()
            // Unstructured tasks, as in the benchmark: a task group's child bookkeeping is quadratic
            // when 10,000 children finish at once.
            let opener = Task {
                if scenario == "coalesced-10k" { try await loader.waitForWaiters(count: 10_000) }
                gate.open()
            }
            let callers = (0..<10_000).map { _ in
                Task { scenario == "coalesced-10k" ? try await loader.load().count : try await upstream.load().count }
            }
            var served = 0
            for caller in callers { served += try await caller.value }
            try await opener.value
            precondition(served == 10_000 * feed.count)
        }
    case "sqlite-read", "sqlite-write":
        // The benchmark's SQLite scenario: 64-byte values under 10,000 keys, one operation at a time.
        let keys = (0..<10_000).map { "entry-\($0)" }
        let payload = Data((0..<64).map { UInt8($0) })
        let store = try SQLiteStore<Data>(path: directory.appendingPathComponent("store.sqlite"), codec: DataCodec())
        for key in keys { try await store.insert(payload, for: key, storedAt: Date()) }
        for index in 0..<iterations {
            if scenario == "sqlite-read" {
                consume(try await store.retrieve(keys[index % keys.count]))
            } else {
                try await store.insert(payload, for: keys[index % keys.count], storedAt: Date())
            }
        }
    case "sqlite-read-baseline", "sqlite-write-baseline":
        let keys = (0..<10_000).map { "entry-\($0)" }
        let payload = Data((0..<64).map { UInt8($0) })
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        let pool = try DatabasePool(path: directory.appendingPathComponent("raw.sqlite").path, configuration: configuration)
        try await pool.write { db in
            try db.execute(sql: RawTable.create)
            for key in keys { try RawTable.upsert(db, key: key, value: payload, storedAt: Date()) }
        }
        for index in 0..<iterations {
            let key = keys[index % keys.count]
            if scenario == "sqlite-read-baseline" {
                consume(try await pool.read { db in try RawTable.fetch(db, key: key) })
            } else {
                let storedAt = Date()
                try await pool.write { db in try RawTable.upsert(db, key: key, value: payload, storedAt: storedAt) }
            }
        }
    case "outbox-enqueue-sqlite":
        // The benchmark's SQLite enqueue: a queued POST of a 60-byte JSON body, offline, one at a time.
        let body = Data(#"{"title":"Offline post","body":"Written on a train, sent later."}"#.utf8)
        let outbox = Outbox(storage: try SQLiteOutboxStorage(path: directory.appendingPathComponent("outbox.sqlite").path), name: "probe")
        outbox.connectivityChanged(isOnline: false)
        _ = try await outbox.entries()
        var request = HTTPRequest(method: .post, url: URL(string: "https://api.example.com/posts")!)
        request.headerFields[.contentType] = "application/json"
        for _ in 0..<iterations { try await outbox.enqueue(request, body: body) }
    case "outbox-enqueue-files", "outbox-enqueue-files-concurrent", "outbox-enqueue-sqlite-concurrent":
        // One at a time (`-files`), or 100 callers at once each round (`-concurrent`): group commit.
        let body = Data(#"{"title":"Offline post","body":"Written on a train, sent later."}"#.utf8)
        let storage: any OutboxStorage = scenario.hasSuffix("sqlite-concurrent")
            ? try SQLiteOutboxStorage(path: directory.appendingPathComponent("outbox.sqlite").path)
            : FileOutboxStorage(directory: directory.appendingPathComponent("outbox"))
        let outbox = Outbox(storage: storage, name: "probe")
        outbox.connectivityChanged(isOnline: false)
        _ = try await outbox.entries()
        var request = HTTPRequest(method: .post, url: URL(string: "https://api.example.com/posts")!)
        request.headerFields[.contentType] = "application/json"
        if scenario.hasSuffix("-concurrent") {
            let post = request
            try await Scenarios.concurrently(iterations, by: 100) { try await outbox.enqueue(post, body: body) }
        } else {
            for _ in 0..<iterations { try await outbox.enqueue(request, body: body) }
        }
    case "outbox-drain-sqlite", "outbox-drain-files", "outbox-drain-memory":
        // Queues `iterations` writes offline, then drains them through a handler that answers at
        // once: what the drain's engine and its two storage writes per delivery cost, no network.
        let storage: any OutboxStorage = switch scenario {
        case "outbox-drain-sqlite": try SQLiteOutboxStorage(path: directory.appendingPathComponent("outbox.sqlite").path)
        case "outbox-drain-files": FileOutboxStorage(directory: directory.appendingPathComponent("outbox"))
        default: MemoryOutboxStorage()
        }
        let outbox = Outbox(storage: storage, name: "probe")
        outbox.register("post") { _ in .delivered }
        outbox.connectivityChanged(isOnline: false)
        let payload = Data(#"{"title":"Offline post","body":"Written on a train, sent later."}"#.utf8)
        for _ in 0..<iterations { try await outbox.enqueue(kind: "post", scope: "/posts", payload: payload) }
        outbox.connectivityChanged(isOnline: true)
        let started = ContinuousClock.now
        let report = try await outbox.drain()
        precondition(report.delivered == iterations, "delivered \(report.delivered) of \(iterations)")
        FileHandle.standardError.write(Data("\(scenario): drain of \(iterations) took \(ContinuousClock.now - started)\n".utf8))
    case "outbox-drain-http-memory", "outbox-drain-http-sqlite", "outbox-drain-http-files", "post-loop",
         "outbox-drain-scopes10-latency", "post-loop-latency":
        // The drain benchmarks' two sides in one process: `iterations` queued POSTs drained to
        // Python's server over URLSession, or the same POSTs sent in a loop; prints the wall time.
        // `-latency`: the server answers after 5 ms, and the drain takes 10 scopes at once.
        let distant = scenario.hasSuffix("-latency")
        let server = try LocalPostServer.start(delay: distant ? .milliseconds(5) : .zero)
        defer { server.stop() }
        let body = Data(#"{"title":"Offline post","body":"Written on a train, sent later."}"#.utf8)
        let post = { (path: String) -> HTTPRequest in
            var request = HTTPRequest(method: .post, url: server.baseURL.appendingPathComponent(path))
            request.headerFields[.contentType] = "application/json"
            return request
        }
        // A first request outside the measurement opens the connection, as the benchmark's warm-up does.
        _ = try await DefaultHTTPTransport.shared.send(post("warm"), body: body, options: HTTPRequestOptions())
        let started: ContinuousClock.Instant
        if scenario.hasPrefix("post-loop") {
            started = .now
            for _ in 0..<iterations { _ = try await DefaultHTTPTransport.shared.send(post("posts"), body: body, options: HTTPRequestOptions()) }
        } else {
            let storage: any OutboxStorage = switch scenario {
            case "outbox-drain-http-sqlite": try SQLiteOutboxStorage(path: directory.appendingPathComponent("outbox.sqlite").path)
            case "outbox-drain-http-files": FileOutboxStorage(directory: directory.appendingPathComponent("outbox"))
            default: MemoryOutboxStorage()
            }
            let outbox = Outbox(storage: storage, name: "probe", maxConcurrentScopes: distant ? 10 : 4)
            #if StrataURLSession
            outbox.registerHTTP(transport: distant ? Scenarios.tenConnectionsPerHost : DefaultHTTPTransport.shared)
            #else
            outbox.registerHTTP()
            #endif
            outbox.connectivityChanged(isOnline: false)
            for index in 0..<iterations { try await outbox.enqueue(post(distant ? "s\(index % 10)" : "posts"), body: body) }
            outbox.connectivityChanged(isOnline: true)
            started = .now
            let report = try await outbox.drain()
            precondition(report.delivered == iterations, "delivered \(report.delivered) of \(iterations)")
        }
        let elapsed = ContinuousClock.now - started
        FileHandle.standardError.write(Data("\(scenario): \(iterations) in \(elapsed), \(elapsed / iterations) each\n".utf8))
    case "outbox-enqueue-files-baseline":
        let bytes = Data(repeating: 0x61, count: 600)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        for index in 0..<iterations { try bytes.write(to: directory.appendingPathComponent("\(index)"), options: .atomic) }
    case "outbox-enqueue-sqlite-baseline":
        let body = Data(#"{"title":"Offline post","body":"Written on a train, sent later."}"#.utf8)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let pool = try RawOutboxTable.open(path: directory.appendingPathComponent("raw.sqlite").path)
        let rows = try RawOutboxTable.rows(count: iterations, url: URL(string: "https://api.example.com/posts")!, body: body)
        for row in rows { try await pool.write { db in try RawOutboxTable.insert(db, row) } }
    case "outbox-shared-files":
        // Four outboxes on one file outbox (as four processes would be): each queues `iterations`
        // writes into 8 scopes while all four drain, then all drain what is left. Prints the longest
        // any of them held the directory's lock (issue 40: never across a send).
        let storages = (0..<4).map { _ in FileOutboxStorage(directory: directory.appendingPathComponent("shared-outbox")) }
        let outboxes = storages.map { storage in
            let outbox = Outbox(storage: storage, name: "probe")
            outbox.register("probe") { _ in
                try await Task.sleep(for: .microseconds(200))  // the network: no lock is held meanwhile
                return .delivered
            }
            return outbox
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, outbox) in outboxes.enumerated() {
                group.addTask {
                    for write in 0..<iterations {
                        try await outbox.enqueue(kind: "probe", scope: "s\((index + write) % 8)", payload: Data("\(index)-\(write)".utf8))
                        if write % 8 == 0 { try await outbox.drain() }
                    }
                }
            }
            try await group.waitForAll()
        }
        for outbox in outboxes { try await outbox.drain() }
        let left = try await storages[0].loadAll().count
        let longest = storages.map(\.longestLockHold).max() ?? .zero
        print("outbox-shared-files: \(4 * iterations) writes by 4 outboxes on one directory, \(left) left; "
            + "longest hold of its lock: \(longest)")
    default:
        fatalError("unknown scenario \(scenario)")
    }
}

// The main thread only waits: with async top-level code it would park in libdispatch's `sigsuspend`,
// where valgrind 3.19 crashes before it writes its profile.
let finished = DispatchSemaphore(value: 0)
Task.detached {
    do {
        try await run()
    } catch {
        FileHandle.standardError.write(Data("BenchProbe \(scenario): \(error)\n".utf8))
        exit(1)
    }
    finished.signal()
    // Wakes the main thread's run loop (main-actor scenarios) to see that the run finished.
    DispatchQueue.main.async {}
}
if scenario.hasPrefix("main-") {
    // The main-actor scenarios need the main queue run: a run loop does it (not `dispatch_main`,
    // which parks in the `sigsuspend` valgrind cannot follow).
    while finished.wait(timeout: .now()) == .timedOut {
        _ = RunLoop.main.run(mode: .default, before: .distantFuture)
    }
} else {
    finished.wait()
}
if ProcessInfo.processInfo.environment["STRATA_PROBE_KEEP"] == nil {
    try? FileManager.default.removeItem(at: directory)
} else {
    // What the scenario wrote stays, for profiling the relaunch helpers against real files.
    print(directory.path)
}
exit(0)
