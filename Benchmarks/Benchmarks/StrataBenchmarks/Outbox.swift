import Benchmark
import BenchmarkFixtures
import Foundation
import GRDB
#if canImport(Glibc)
import Glibc
#endif
@_spi(StrataInternals) import Strata
import StrataOutbox
import StrataSQLite
import StrataTesting

/// The outbox (issue 14): what queueing a write costs, and how fast a drain delivers.
///
/// - Enqueue: 100 HTTP writes (`POST /posts`, a 60-byte JSON body) queued in an `Outbox` over a
///   `FileOutboxStorage`, offline, so nothing is sent. Baseline: the same number of files written the
///   way the storage must write one durably — `Data.write(options: .atomic)` (a temporary file,
///   `fsync`, rename) of 600 bytes, about an entry's size. The outbox also flushes the directory.
/// - Enqueue on SQLite: the same 100 writes in an `Outbox` over a `SQLiteOutboxStorage` (a new file
///   per iteration, WAL, `synchronous = FULL`). Baseline: raw GRDB inserting the same rows — the
///   storage's nine columns and index, the entry JSON encoded beforehand — one transaction each, on a
///   pool configured the same way (`RawOutboxTable`).
/// - Drain: 100 queued writes delivered by `drain()` to a local HTTP server (Python's
///   `ThreadingHTTPServer`, HTTP/1.1 keep-alive, `201` to every `POST`), over `URLSessionHTTPClient`,
///   one scope, so one at a time, as the baseline sends them. Baseline: a loop of the same 100 `POST`s
///   through the same client to the same server, nothing persisted. `.memory` drains from a
///   `MemoryOutboxStorage`, isolating the engine from the two durable writes per write (the attempt
///   count before sending, the removal after); `.sqlite` drains from a `SQLiteOutboxStorage`, where
///   each of those is one WAL commit.
func registerOutboxBenchmarks() {
    let writes = 100
    let body = Data(#"{"title":"Offline post","body":"Written on a train, sent later."}"#.utf8)
    let entryBytes = Data(repeating: 0x61, count: 600)
    let directory = Prepared<TemporaryDirectory>()
    let server = Prepared<LocalPostServer>()
    let distantServer = Prepared<LocalPostServer>()
    let setup: Benchmark.BenchmarkSetupHook = {
        directory.set(try TemporaryDirectory(prefix: "strata-bench-outbox"))
        server.set(try LocalPostServer.start())
        distantServer.set(try LocalPostServer.start(delay: .milliseconds(5)))
    }
    let teardown: Benchmark.BenchmarkTeardownHook = {
        server.value.stop()
        distantServer.value.stop()
        directory.value.remove()
    }
    let configuration = Benchmark.Configuration(maxDuration: .seconds(3), maxIterations: 200, setup: setup, teardown: teardown)
    let round = Locked(0)
    let nextDirectory: @Sendable (String) -> URL = { name in
        let n = round.withLock { value -> Int in
            value += 1
            return value
        }
        return directory.value.appending("\(name)-\(n)")
    }
    let post: @Sendable (URL) -> HTTPRequest = { base in
        var request = HTTPRequest(method: .post, url: base.appendingPathComponent("posts"))
        request.headerFields[.contentType] = "application/json"
        return request
    }
    let queued: @Sendable (any OutboxStorage) async throws -> Outbox = { storage in
        let outbox = Outbox(storage: storage, name: "bench")
        outbox.registerHTTP()
        outbox.connectivityChanged(isOnline: false)
        let request = post(server.value.baseURL)
        for _ in 0..<writes { try await outbox.enqueue(request, body: body) }
        return outbox
    }

    Benchmark("OutboxEnqueue.strata (100 ops)", configuration: configuration) { benchmark in
        let outbox = Outbox(storage: FileOutboxStorage(directory: nextDirectory("enqueue")), name: "bench")
        outbox.connectivityChanged(isOnline: false)
        let request = post(URL(string: "https://api.example.com")!)
        benchmark.startMeasurement()
        for _ in 0..<writes { try await outbox.enqueue(request, body: body) }
        benchmark.stopMeasurement()
    }
    Benchmark("OutboxEnqueue.baseline (100 ops)", configuration: configuration) { benchmark in
        let folder = nextDirectory("raw")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        benchmark.startMeasurement()
        for index in 0..<writes { try entryBytes.write(to: folder.appendingPathComponent("\(index)"), options: .atomic) }
        benchmark.stopMeasurement()
    }
    Benchmark("OutboxEnqueue.sqlite.strata (100 ops)", configuration: configuration) { benchmark in
        let storage = try SQLiteOutboxStorage(path: nextDirectory("sqlite").appendingPathComponent("outbox.sqlite").path)
        let outbox = Outbox(storage: storage, name: "bench")
        outbox.connectivityChanged(isOnline: false)
        _ = try await outbox.entries()  // the (empty) first read, outside the measurement as the baseline's table creation
        let request = post(URL(string: "https://api.example.com")!)
        benchmark.startMeasurement()
        for _ in 0..<writes { try await outbox.enqueue(request, body: body) }
        benchmark.stopMeasurement()
    }
    Benchmark("OutboxEnqueue.sqlite.baseline (100 ops)", configuration: configuration) { benchmark in
        let folder = nextDirectory("sqlite-raw")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let pool = try RawOutboxTable.open(path: folder.appendingPathComponent("raw.sqlite").path)
        let rows = try RawOutboxTable.rows(count: writes, url: URL(string: "https://api.example.com/posts")!, body: body)
        benchmark.startMeasurement()
        for row in rows { try await pool.write { db in try RawOutboxTable.insert(db, row) } }
        benchmark.stopMeasurement()
    }
    // Group commit: 100 callers queue at once, each returning when its own write is durable.
    let burst: @Sendable (any OutboxStorage, Benchmark) async throws -> Void = { storage, benchmark in
        let outbox = Outbox(storage: storage, name: "bench")
        outbox.connectivityChanged(isOnline: false)
        _ = try await outbox.entries()
        let request = post(URL(string: "https://api.example.com")!)
        benchmark.startMeasurement()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<writes { group.addTask { try await outbox.enqueue(request, body: body) } }
            try await group.waitForAll()
        }
        benchmark.stopMeasurement()
    }
    Benchmark("OutboxEnqueue.concurrent.strata (100 ops)", configuration: configuration) { benchmark in
        try await burst(FileOutboxStorage(directory: nextDirectory("enqueue-burst")), benchmark)
    }
    Benchmark("OutboxEnqueue.concurrent.sqlite (100 ops)", configuration: configuration) { benchmark in
        try await burst(try SQLiteOutboxStorage(path: nextDirectory("sqlite-burst").appendingPathComponent("outbox.sqlite").path), benchmark)
    }
    Benchmark("OutboxDrain.strata (100 ops)", configuration: configuration) { benchmark in
        let outbox = try await queued(FileOutboxStorage(directory: nextDirectory("drain")))
        benchmark.startMeasurement()
        outbox.connectivityChanged(isOnline: true)
        let report = try await outbox.drain()
        benchmark.stopMeasurement()
        precondition(report.delivered == writes, "the drain delivered \(report.delivered) of \(writes)")
    }
    Benchmark("OutboxDrain.sqlite (100 ops)", configuration: configuration) { benchmark in
        let storage = try SQLiteOutboxStorage(path: nextDirectory("drain-sqlite").appendingPathComponent("outbox.sqlite").path)
        let outbox = try await queued(storage)
        benchmark.startMeasurement()
        outbox.connectivityChanged(isOnline: true)
        let report = try await outbox.drain()
        benchmark.stopMeasurement()
        precondition(report.delivered == writes, "the drain delivered \(report.delivered) of \(writes)")
    }
    Benchmark("OutboxDrain.memory (100 ops)", configuration: configuration) { benchmark in
        let outbox = try await queued(MemoryOutboxStorage())
        benchmark.startMeasurement()
        outbox.connectivityChanged(isOnline: true)
        let report = try await outbox.drain()
        benchmark.stopMeasurement()
        precondition(report.delivered == writes, "the drain delivered \(report.delivered) of \(writes)")
    }
    // Scopes in parallel: 100 writes in 10 scopes, from SQLite, drained 10 scopes at a time, to a
    // server 5 ms away (each answer waits 5 ms in its own thread: a network's round trip; on this
    // loopback, two cores serve client and server, so without it the CPU, not the outbox, is the
    // limit), through a URLSession client that opens up to 10 connections to the host (the default
    // is 6). Baseline: the loop of the same 100 POSTs to the same server.
    Benchmark("OutboxDrain.scopes10 (100 ops)", configuration: configuration) { benchmark in
        let storage = try SQLiteOutboxStorage(path: nextDirectory("drain-scopes").appendingPathComponent("outbox.sqlite").path)
        let outbox = Outbox(storage: storage, name: "bench", maxConcurrentScopes: 10)
        outbox.registerHTTP(transport: Scenarios.tenConnectionsPerHost)
        outbox.connectivityChanged(isOnline: false)
        let base = distantServer.value.baseURL
        for index in 0..<writes { try await outbox.enqueue(post(base.appendingPathComponent("s\(index % 10)")), body: body) }
        benchmark.startMeasurement()
        outbox.connectivityChanged(isOnline: true)
        let report = try await outbox.drain()
        benchmark.stopMeasurement()
        precondition(report.delivered == writes, "the drain delivered \(report.delivered) of \(writes)")
    }
    Benchmark("OutboxDrain.distantBaseline (100 ops)", configuration: configuration) { _ in
        let request = post(distantServer.value.baseURL)
        for _ in 0..<writes {
            let reply = try await URLSessionHTTPClient.shared.send(request, body: body, options: HTTPRequestOptions())
            precondition(reply.status.code == 201, "the server answered \(reply.status.code)")
        }
    }
    Benchmark("OutboxDrain.baseline (100 ops)", configuration: configuration) { _ in
        let request = post(server.value.baseURL)
        for _ in 0..<writes {
            let reply = try await URLSessionHTTPClient.shared.send(request, body: body, options: HTTPRequestOptions())
            precondition(reply.status.code == 201, "the server answered \(reply.status.code)")
        }
    }
}
