import AsyncHTTPClient
import Foundation
@_spi(StrataInternals) import Strata
import StrataAsyncHTTPClient
import StrataTesting
import DemoServer
import Testing
@testable import StrataCLI

/// Debian's PostgreSQL binaries, which the partition run starts a cluster of its own with.
enum PostgresBinaries {
    static var directory: URL? {
        let root = URL(fileURLWithPath: "/usr/lib/postgresql")
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: root.path)) ?? []
        return versions.sorted().last.map { root.appendingPathComponent($0).appendingPathComponent("bin") }
    }
}

/// The fleet under partitions, checked like Jepsen: three `strata proxy` processes on a PostgreSQL
/// cluster of the test's own, each node behind a fault injector (a `TCPRelay`) to the database and
/// another to the origin. Clients write and read through the nodes while a seeded nemesis cuts,
/// black-holes, delays and resets those links and restarts PostgreSQL; every operation is recorded
/// with its start and end, and `PartitionChecker` judges the history: every read saw a value
/// current no earlier than its start minus the staleness window, and no acknowledged write is lost.
///
/// The run is real time (real processes, real faults held for real seconds): its pacing is the
/// workload, not a wait for a condition. `STRATA_PARTITION_SECONDS` (20), `STRATA_PARTITION_SEED`
/// (39) and `STRATA_PARTITION_HISTORY` (a file for the history, as JSON lines) drive it;
/// `Benchmarks/partitions/run.sh` runs it longer, over several seeds. The same seed gives the same
/// schedule of faults and the same choices of every client; what the processes do in between is
/// their own timing.
@Suite(
    "strata proxy: the fleet under partitions, checked like Jepsen", .serialized, .timeLimit(.minutes(30)),
    .enabled(if: PostgresBinaries.directory != nil || ProcessInfo.processInfo.environment["CI"] == "true",
             "PostgreSQL's binaries (Debian's postgresql package) are not installed"))
struct PartitionTests {
    static let environment = ProcessInfo.processInfo.environment
    static let seconds = Double(environment["STRATA_PARTITION_SECONDS"] ?? "") ?? 20
    static let seed = UInt64(environment["STRATA_PARTITION_SEED"] ?? "") ?? 39
    static let keys = ["a", "b", "c", "d"]
    /// Every response lives 2 s; a node may serve it 3 s past that when the origin fails (`--max-stale`).
    static let lifetime = 2.0
    static let maxStale = 3.0
    /// `STRATA_PARTITION_WINDOW` overrides it, to see the checker fail: a window shorter than the
    /// lifetime must find violations.
    static let checker = PartitionChecker(window: Double(environment["STRATA_PARTITION_WINDOW"] ?? "") ?? lifetime + maxStale + 0.5)

    /// How long the run's processes may live (`Child`'s failsafe): the run, and the checks after it.
    static let processLifetime = seconds + 600

    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    /// A PostgreSQL cluster of the test's own (`scripts/postgres.sh` with its own port and data
    /// directory), so that restarting it disturbs no other test.
    struct Cluster {
        let port: Int
        let data: String
        let url: String

        static func start() async throws -> Cluster {
            let data = "/tmp/strata-pg-partitions-\(UUID().uuidString.prefix(8).lowercased())"
            var lastError = ""
            for _ in 1...3 {
                let port = DemoServerPorts.shared.take()
                let (status, output) = try await run("start", port: port, data: data)
                if status == 0, let line = output.split(separator: "\n").last(where: { $0.hasPrefix("export STRATA_POSTGRES_URL=") }) {
                    return Cluster(port: port, data: data, url: String(line.dropFirst("export STRATA_POSTGRES_URL=".count)))
                }
                lastError = output
            }
            throw TestError("the partition run's PostgreSQL did not start: \(lastError)")
        }

        static func run(_ command: String, port: Int, data: String) async throws -> (Int32, String) {
            let directory = try TemporaryDirectory(prefix: "strata-pg-script")
            defer { directory.remove() }
            let out = directory.appending("out")
            let child = try Child.spawn(
                URL(fileURLWithPath: "/usr/bin/env"),
                ["STRATA_PG_PORT=\(port)", "STRATA_PG_DATA=\(data)", "bash", repository.appendingPathComponent("scripts/postgres.sh").path, command],
                pipeStdin: false, pipeStdout: false, stdoutFile: out, stderrFile: out)
            let status = try await TwoProcessTests.offPool { child.wait() }
            return (status, (try? String(contentsOf: out, encoding: .utf8)) ?? "")
        }

        func restart() async throws {
            let (status, output) = try await Self.run("restart", port: port, data: data)
            guard status == 0 else { throw TestError("PostgreSQL did not restart: \(output)") }
        }

        func stop() async {
            _ = try? await Self.run("stop", port: port, data: data)
            try? FileManager.default.removeItem(atPath: data)
            try? FileManager.default.removeItem(atPath: data + ".log")
        }
    }

    /// A node and the two links the nemesis acts on.
    struct Member {
        let node: ProxyFleetTests.Node
        let database: TCPRelay
        let upstream: TCPRelay
    }

    /// One fault of the schedule: what, on which node (nil: the database itself), for how long.
    struct PlannedFault: Sendable {
        enum Kind: String, Sendable, CaseIterable {
            case databaseCut = "database cut", databaseBlackHole = "database black hole", databaseDelay = "database delay"
            case databaseReset = "database reset", databaseRestart = "PostgreSQL restart", everyDatabaseLinkCut = "every node cut from the database"
            case upstreamCut = "upstream cut", upstreamBlackHole = "upstream black hole", upstreamDelay = "upstream delay"
            case upstreamReset = "upstream reset"
        }
        var kind: Kind
        var member: Int
        var delay: Duration
        var quietBefore: Duration
        var length: Duration
    }

    /// The nemesis's schedule, from `seed` alone: rounds in which every kind of fault comes once,
    /// in a shuffled order, each on a random node, after a quiet spell. The nemesis takes faults
    /// from it until the run's time is up (a round lasts about 20 s).
    static func schedule(seed: UInt64, rounds: Int) -> [PlannedFault] {
        var random = SplitMix64(seed: seed ^ 0xFA17)
        var planned: [PlannedFault] = []
        for _ in 0..<rounds {
            for kind in PlannedFault.Kind.allCases.shuffled(using: &random) {
                planned.append(PlannedFault(
                    kind: kind, member: Int.random(in: 0..<3, using: &random),
                    delay: .milliseconds(Int.random(in: 50...600, using: &random)),
                    quietBefore: .milliseconds(Int.random(in: 200...800, using: &random)),
                    // A black hole may outlast the nodes' upstream timeout (5 s): writes whose outcome is unknown.
                    length: .milliseconds(Int.random(in: kind == .upstreamBlackHole || kind == .databaseBlackHole ? 1000...7000 : 500...2000,
                                                     using: &random))))
            }
        }
        return planned
    }

    /// The record every client adds its operations to, in the order they end.
    final class Recorder: Sendable {
        let started = ContinuousClock.now
        private let state = Locked<(operations: [PartitionOperation], faults: [PartitionFault])>(([], []))

        func now() -> Double {
            let elapsed = ContinuousClock.now - started
            return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        }

        func add(_ operation: PartitionOperation) { state.withLock { $0.operations.append(operation) } }
        func add(_ fault: PartitionFault) { state.withLock { $0.faults.append(fault) } }
        var operations: [PartitionOperation] { state.withLock { $0.operations } }
        var faults: [PartitionFault] { state.withLock { $0.faults } }
    }

    static func path(_ key: String) -> String { "/items/\(key)?cc=max-age%3D2&etag=1" }

    /// A client's request: bounded, so an operation held by a black hole ends (failed, or unknown).
    static func send(_ method: HTTPRequest.Method, _ node: ProxyFleetTests.Node, _ key: String, version: Int? = nil) async throws -> HTTPReply {
        var fields = HTTPFields()
        if let version { fields[HTTPField.Name("X-Set-Version")!] = String(version) }
        let request = HTTPRequest(method: method, scheme: "http", authority: "127.0.0.1:\(node.port)", path: path(key), headerFields: fields)
        return try await ProxyFleetTests.transport.send(
            request, body: method == .put ? Data("{}".utf8) : nil, options: HTTPRequestOptions(timeout: .seconds(8)))
    }

    static func version(in reply: HTTPReply) -> Int? {
        (try? JSONSerialization.jsonObject(with: reply.body) as? [String: Any])?["version"] as? Int
    }

    @Test("three nodes under cuts, black holes, delays, resets and PostgreSQL restarts: every read within the staleness window, no acknowledged write lost")
    func theFleetUnderPartitions() async throws {
        let cluster = try await Cluster.start()
        let directory: TemporaryDirectory
        let origin: ProxyFleetTests.Origin
        do {
            directory = try TemporaryDirectory(prefix: "strata-partitions")
            origin = try await ProxyFleetTests.Origin.start(in: directory, failsafe: Self.processLifetime)
        } catch {
            await cluster.stop()
            throw error
        }
        defer { directory.remove() }
        var members: [Member] = []
        var relays: [TCPRelay] = []
        do {
            let table = "partitions"
            var components = try #require(URLComponents(string: cluster.url))
            for index in 1...3 {
                let database = TCPRelay(targetHost: "127.0.0.1", targetPort: cluster.port)
                let upstream = TCPRelay(targetHost: "127.0.0.1", targetPort: origin.port)
                relays += [database, upstream]
                try await database.start()
                components.port = database.port
                try await upstream.start()
                let node = try await Self.spawn(
                    "p\(index)", upstream: "http://127.0.0.1:\(upstream.port)", in: directory,
                    ["--postgres-url", try #require(components.string), "--table", table, "--soft-timeout", "200ms",
                     "--lock-timeout", "1s", "--hard-timeout", "5s", "--max-stale", "3s"])
                members.append(Member(node: node, database: database, upstream: upstream))
            }
            for member in members {
                try await ProxyFleetTests.eventually("\(member.node.name) listens") {
                    try await member.node.metric("strata_backplane_listening_starts_total") >= 1
                }
            }
            try await run(members, origin: origin, cluster: cluster, directory: directory)
        } catch {
            for member in members {
                Issue.record("\(member.node.name) stderr: \((try? String(contentsOf: member.node.log, encoding: .utf8))?.suffix(4000) ?? "")")
            }
            await stopAll(members, relays: relays, origin: origin, cluster: cluster)
            throw error
        }
        await stopAll(members, relays: relays, origin: origin, cluster: cluster)
    }

    func stopAll(_ members: [Member], relays: [TCPRelay], origin: ProxyFleetTests.Origin, cluster: Cluster) async {
        for member in members { await member.node.stop() }
        for relay in relays { await relay.stop() }
        await origin.stop()
        await cluster.stop()
    }

    static func spawn(_ name: String, upstream: String, in directory: TemporaryDirectory, _ arguments: [String]) async throws -> ProxyFleetTests.Node {
        let log = directory.appending("\(name)-stderr.log")
        let child = try Child.spawn(
            try TwoProcessTests.executable(),
            ["proxy", "--upstream", upstream, "--port", "0", "--node", name, "--admin-token", ProxyFleetTests.Node.adminToken] + arguments,
            pipeStdin: false, pipeStdout: true, stdoutFile: nil, stderrFile: log, failsafe: processLifetime)
        let line = try await TwoProcessTests.offPool { child.readLine() }
        guard let (port, adminPort) = ProxyFleetTests.Node.ports(in: line) else {
            child.signal(SIGKILL)
            _ = try await TwoProcessTests.offPool { child.wait() }
            throw TestError("strata proxy \(name) did not start: '\(line)' \((try? String(contentsOf: log, encoding: .utf8)) ?? "")")
        }
        return ProxyFleetTests.Node(name: name, child: child, port: port, adminPort: adminPort, log: log)
    }

    func run(_ members: [Member], origin: ProxyFleetTests.Origin, cluster: Cluster, directory: TemporaryDirectory) async throws {
        let recorder = Recorder()
        let stop = Locked(false)
        let nodes = members.map(\.node)
        print("partitions: seed \(Self.seed), \(Self.seconds) s; replay with STRATA_PARTITION_SEED=\(Self.seed)")

        // The clients: one writer per key (its writes never overlap, each names its version), and
        // readers of every key through every node.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (process, key) in Self.keys.enumerated() {
                group.addTask {
                    var random = SplitMix64(seed: Self.seed &+ UInt64(process) &* 7919)
                    var version = 1
                    while !stop.withLock({ $0 }) {
                        version += 1
                        let node = nodes.randomElement(using: &random)!
                        let start = recorder.now()
                        var outcome = PartitionOperation.Outcome.unknown
                        var detail: String?
                        do {
                            let reply = try await Self.send(.put, node, key, version: version)
                            if reply.status.kind == .successful { outcome = .ok } else { detail = "status \(reply.status.code)" }
                        } catch {
                            detail = "\(error)"
                        }
                        recorder.add(PartitionOperation(
                            process: process, kind: .write, key: key, node: node.name, version: version,
                            start: start, end: recorder.now(), outcome: outcome, detail: detail))
                        try await Task.sleep(for: .milliseconds(Int.random(in: 100...400, using: &random)))
                    }
                }
            }
            for reader in 0..<6 {
                group.addTask {
                    let process = Self.keys.count + reader
                    var random = SplitMix64(seed: Self.seed &+ UInt64(process) &* 7919)
                    while !stop.withLock({ $0 }) {
                        let node = nodes.randomElement(using: &random)!
                        let key = Self.keys.randomElement(using: &random)!
                        try await Self.read(key, via: node, process: process, recorder: recorder)
                        try await Task.sleep(for: .milliseconds(Int.random(in: 5...40, using: &random)))
                    }
                }
            }
            // The nemesis.
            group.addTask {
                defer { stop.withLock { $0 = true } }
                for fault in Self.schedule(seed: Self.seed, rounds: Int(Self.seconds / 5) + 1) {
                    guard recorder.now() < Self.seconds else { break }
                    try await Task.sleep(for: fault.quietBefore)
                    try await Self.inject(fault, into: members, cluster: cluster, recorder: recorder)
                }
            }
            try await group.waitForAll()
        }

        // Healed: every read of every key through every node comes to the last acknowledged write
        // (or a later one) within 20 s (a failure is recorded, and the history still judged), and
        // the origin holds it.
        for member in members {
            member.database.fault = .none
            member.upstream.fault = .none
            try await member.database.start()
            try await member.upstream.start()
        }
        let final = Self.keys.count + 6
        let history = recorder.operations
        var unconverged: [String] = []
        for key in Self.keys {
            let acknowledged = history.filter { $0.key == key && $0.kind == .write && $0.outcome == .ok }.compactMap(\.version).max() ?? 1
            for node in nodes {
                do {
                    try await ProxyFleetTests.eventually("\(node.name) serves \(key) at version \(acknowledged) or later", seconds: 20) {
                        (try await Self.read(key, via: node, process: final, recorder: recorder) ?? 0) >= acknowledged
                    }
                } catch {
                    unconverged.append("\(error)")
                }
            }
        }
        var originVersions: [String: Int] = [:]
        for key in Self.keys {
            let reply = try await ProxyFleetTests.send(.get, origin.url + "/items/\(key)", via: ProxyFleetTests.control)
            originVersions[key] = Self.version(in: reply)
        }
        for failure in unconverged { Issue.record("after healing: \(failure)") }
        if !unconverged.isEmpty {
            Issue.record("origin stderr: \((try? String(contentsOf: origin.log, encoding: .utf8))?.suffix(4000) ?? "")")
        }

        let operations = recorder.operations
        let violations = Self.checker.check(operations, originVersions: originVersions)
        let figures = PartitionFigures(seed: Self.seed, seconds: recorder.now(), history: operations, faults: recorder.faults,
                                       violations: violations.count, staleness: Self.checker.staleness(operations))
        print(figures)
        if let file = Self.environment["STRATA_PARTITION_HISTORY"] {
            let lines = try operations.map { String(decoding: try JSONEncoder().encode($0), as: UTF8.self) }
                + recorder.faults.map { String(decoding: try JSONEncoder().encode($0), as: UTF8.self) }
            try (lines.joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)
        }
        for violation in violations.prefix(20) { Issue.record("\(violation)") }
        #expect(violations.isEmpty, "\(violations.count) violations")
        #expect(operations.filter { $0.kind == .read && $0.outcome == .ok }.count >= 50, "the clients read throughout: \(figures)")
        #expect(operations.contains { $0.kind == .write && $0.outcome == .ok }, "some writes were acknowledged")
        #expect(recorder.faults.count >= 3, "the nemesis injected faults")
    }

    /// Reads `key` through `node` and records it; the version read, or nil.
    @discardableResult
    static func read(_ key: String, via node: ProxyFleetTests.Node, process: Int, recorder: Recorder) async throws -> Int? {
        let start = recorder.now()
        var operation = PartitionOperation(process: process, kind: .read, key: key, node: node.name, start: start, end: start, outcome: .failed)
        do {
            let reply = try await send(.get, node, key)
            operation.cache = reply.headerFields[HTTPField.Name("X-Cache")!]
            if reply.status == .ok, let version = version(in: reply) {
                operation.version = version
                operation.outcome = .ok
            } else {
                operation.detail = "status \(reply.status.code)"
            }
        } catch {
            operation.detail = "\(error)"
        }
        operation.end = recorder.now()
        recorder.add(operation)
        return operation.version
    }

    static func inject(_ fault: PlannedFault, into members: [Member], cluster: Cluster, recorder: Recorder) async throws {
        let member = members[fault.member]
        let start = recorder.now()
        var target = member.node.name
        /// Takes `relay` away, or sets its fault, for the fault's length; then heals it.
        func hold(_ relay: TCPRelay, _ kind: TCPRelay.Fault?) async throws {
            if let kind { relay.fault = kind } else { await relay.stop() }
            try await Task.sleep(for: fault.length)
            if kind != nil { relay.fault = .none } else { try await relay.start() }
        }
        switch fault.kind {
        case .databaseCut: try await hold(member.database, nil)
        case .databaseBlackHole: try await hold(member.database, .blackHole)
        case .databaseDelay: try await hold(member.database, .delay(fault.delay))
        case .databaseReset: await member.database.resetConnections()
        case .upstreamCut: try await hold(member.upstream, nil)
        case .upstreamBlackHole: try await hold(member.upstream, .blackHole)
        case .upstreamDelay: try await hold(member.upstream, .delay(fault.delay))
        case .upstreamReset: await member.upstream.resetConnections()
        case .everyDatabaseLinkCut:
            target = "every node"
            for member in members { await member.database.stop() }
            try await Task.sleep(for: fault.length)
            for member in members { try await member.database.start() }
        case .databaseRestart:
            target = "PostgreSQL"
            try await cluster.restart()
        }
        recorder.add(PartitionFault(kind: fault.kind.rawValue, target: target, start: start, end: recorder.now()))
    }
}
