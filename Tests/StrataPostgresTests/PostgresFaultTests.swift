#if Postgres
import Foundation
#if canImport(Glibc)
import Glibc
#endif
@_spi(StrataInternals) import Strata
import StrataPostgres
import StrataTesting
import Testing

/// A PostgreSQL cluster of the test's own (another port, another data directory), which the test
/// stops and starts: the shared server the other suites use is never touched.
struct OwnCluster {
    let port: Int
    let data: String
    var url: String { "postgres://strata:strata@127.0.0.1:\(port)/strata" }

    static var script: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("scripts/postgres.sh").path
    }

    struct Failed: Error, CustomStringConvertible {
        var description: String
    }

    /// Runs `scripts/postgres.sh command` for this cluster and waits for it on a thread of its own.
    ///
    /// Spawned with `posix_spawn` and reaped with `waitpid`, not with Foundation's `Process`, which on
    /// Linux can miss a child's exit (it missed this one's: the server the script starts lives on).
    /// Nothing of this process but its standard streams' `/dev/null` reaches the child, so the server
    /// it starts holds none of the test process's sockets.
    func run(_ command: String) async throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "\(data).script.log", O_WRONLY | O_CREAT | O_APPEND, 0o600)
        typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        guard let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") else {
            throw Failed(description: "this libc has no posix_spawn_file_actions_addclosefrom_np (glibc 2.34+ needed)")
        }
        _ = unsafeBitCast(symbol, to: AddCloseFrom.self)(&actions, 3)
        let environment = ProcessInfo.processInfo.environment.merging(
            ["STRATA_PG_PORT": "\(port)", "STRATA_PG_DATA": data]) { _, new in new }
        let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        let words: [String] = ["/bin/bash", Self.script, command]
        let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
        defer { (envp + argv).forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, "/bin/bash", &actions, nil, argv, envp)
        guard spawned == 0 else { throw Failed(description: "posix_spawn failed: \(spawned)") }
        let status: Int32 = await withCheckedContinuation { continuation in
            let child = pid
            Thread.detachNewThread {
                var status: Int32 = 0
                while waitpid(child, &status, 0) < 0 && errno == EINTR {}
                continuation.resume(returning: status)
            }
        }
        guard status == 0 else {
            let log = (try? String(contentsOfFile: "\(data).script.log", encoding: .utf8)) ?? ""
            throw Failed(description: "postgres.sh \(command) failed (status \(status)): \(log.suffix(600))")
        }
    }
}

/// The fleet tier's fault test: PostgreSQL stopped and started again under load. Readers never
/// fail (L1 or the remote answers), and once the database is back every row equals the last write
/// of its key.
@Suite("TieredStore while PostgreSQL stops and starts under load", .enabled(if: TestServer.isAvailable, TestServer.skipReason), .timeLimit(.minutes(3)))
struct PostgresFaultTests {
    /// Counts the operations done, so the test stops and starts the database at given points.
    final class Progress: Sendable {
        private struct State {
            var done = 0
            var stop = false
            var waiters = ConditionWaiters<Int>()
        }
        private let state = Locked(State())
        var shouldStop: Bool { state.withLock { $0.stop } }
        func stop() { state.withLock { $0.stop = true } }
        func count() {
            state.withLock { state in
                state.done += 1
                state.waiters.resumeSatisfied(by: state.done)
            }
        }
        func wait(for count: Int) async throws {
            try await state.wait(in: \.waiters, current: { $0.done }, until: { $0 >= count })
        }
        var done: Int { state.withLock { $0.done } }
    }

    @Test("reads never fail while the database is away, and every row is the last write of its key once it is back")
    func aDatabaseStoppedAndStartedUnderLoad() async throws {
        // A port and a directory of this run's own; stopped and removed however the test ends.
        let pid = Int(ProcessInfo.processInfo.processIdentifier)
        let cluster = OwnCluster(port: 56000 + pid % 4000, data: "/tmp/strata-pg-fault-\(pid)")
        do {
            try await cluster.run("start")
            try await loadWhileTheDatabaseStopsAndStarts(cluster)
        } catch {
            try? await cluster.run("stop")
            try? FileManager.default.removeItem(atPath: cluster.data)
            try? FileManager.default.removeItem(atPath: cluster.data + ".log")
            try? FileManager.default.removeItem(atPath: cluster.data + ".script.log")
            throw error
        }
        try await cluster.run("stop")
        for leftover in [cluster.data, cluster.data + ".log", cluster.data + ".script.log"] {
            try? FileManager.default.removeItem(atPath: leftover)
        }
    }

    func loadWhileTheDatabaseStopsAndStarts(_ cluster: OwnCluster) async throws {
        let store = try PostgresStore<Item>(
            url: cluster.url,
            options: PostgresStoreOptions(table: TestServer.uniqueTable(), connectTimeout: .seconds(5), queryTimeout: .seconds(10), logger: quietLogger))
        let tiered = TieredStore(
            memory: MemoryStore<String, Item>(), shared: store, environment: LoadEnvironment(logger: quietLogger),
            firstRetryDelay: .milliseconds(100), maxRetryDelay: .milliseconds(400))
        let remote = ClosureLoader<String, Item>("remote") { key in Item(id: key.count, name: "remote \(key)") }
        let read = tiered.loader(freshness: .maxAge(.seconds(3600)))
            .fallingBack(to: remote.writingThrough(in: tiered) { $0 })
            .coalesced()
            .environment(LoadEnvironment(logger: quietLogger))
        let progress = Progress()
        let failedReads = Locked(0)
        let lastWrites = Locked<[String: CacheEntry<Item>]>([:])

        try await withThrowingTaskGroup(of: Void.self) { group in
            // Four writers, each the only writer of its three keys; four readers of other keys
            // (the remote answers what the tiers miss) and of the writers' keys (memory answers).
            for writer in 0..<4 {
                group.addTask {
                    var n = 0
                    while !progress.shouldStop {
                        n += 1
                        let key = "w\(writer)-\(n % 3)"
                        let entry = CacheEntry(value: Item(id: n, name: "writer \(writer)"), storedAt: Date())
                        try await tiered.insert(entry, for: key)
                        lastWrites.withLock { $0[key] = entry }
                        progress.count()
                        await Task.yield()
                    }
                }
            }
            for reader in 0..<4 {
                group.addTask {
                    var n = 0
                    while !progress.shouldStop {
                        n += 1
                        do {
                            _ = try await read.load("r\((reader + n) % 10)")
                            let written = "w\(n % 4)-\(n % 3)"
                            if lastWrites.withLock({ $0[written] }) != nil, try await tiered.retrieve(written) == nil {
                                failedReads.withLock { $0 += 1 }
                            }
                        } catch {
                            failedReads.withLock { $0 += 1 }
                        }
                        progress.count()
                        await Task.yield()
                    }
                }
            }
            try await progress.wait(for: 300)
            try await cluster.run("stop")
            // A read of a key memory does not hold reaches the table, fails, and marks it down
            // (the load's writes may still be waiting for their first failure).
            #expect(try await tiered.retrieve("never written") == nil)
            #expect(tiered.sharedTierIsDown)
            let stoppedAt = progress.done
            try await progress.wait(for: stoppedAt + 300)
            try await cluster.run("start")
            let startedAt = progress.done
            try await progress.wait(for: startedAt + 300)
            progress.stop()
            try await group.waitForAll()
        }
        // Repairs: every waiting write reaches the table, on the store's own retry timer.
        try await tiered.waitForUnsentWrites()
        #expect(failedReads.withLock { $0 } == 0, "a read failed that memory or the remote could answer")
        for (key, last) in lastWrites.withLock({ $0 }) {
            let row = try await store.retrieve(key)
            #expect(row == last, "\(key): the row is the last write")
        }
        await store.shutdown()
    }
}
#endif
