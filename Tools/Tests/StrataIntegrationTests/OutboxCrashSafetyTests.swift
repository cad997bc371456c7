import Foundation
import Logging
import DemoServer
import StrataTesting
import Testing
@_spi(StrataInternals) import Strata
import StrataOutbox
import StrataSQLite
#if canImport(Glibc)
import Glibc
#endif

/// The outbox's kill loops, two tests that run side by side.
/// - Queueing: two `strata-crash-writer` processes queue writes into one outbox on disk at once while
///   this test kills both with SIGKILL at random moments.
/// - Replaying: a queue of 600 writes is drained to the real demo server (which honours
///   `Idempotency-Key`) by runs this test kills mid-send, until everything is delivered.
/// After every kill the outbox is opened afresh, as after a crash.
///
/// Must hold: 0 writes lost (every acknowledged enqueue is on disk until the server has it), 0 applied
/// twice (the server holds each write exactly once, though kills land after the server applied a
/// write and before the outbox removed it: those are counted, and there must be some), 0 torn
/// entries (no entry set aside as unreadable), and each scope queued and applied in the order the
/// writers acknowledged (a write after every write either process had acknowledged before it began).
///
/// `STRATA_CRASH_SEED` replays a run; `STRATA_CRASH_KILLS` changes the number of queueing kills (70),
/// `STRATA_CRASH_REPLAY_ROUNDS` the rounds the replay drains (200, three writes each).
@Suite("Crash safety: SIGKILL while queueing and replaying writes", .timeLimit(.minutes(8)))
struct OutboxCrashSafetyTests {
    /// `STRATA_CRASH_SEED` (what the messages print, so a run can be replayed), and the generator's
    /// seed drawn from it.
    static let replaySeed: UInt64 = ProcessInfo.processInfo.environment["STRATA_CRASH_SEED"].flatMap { UInt64($0) } ?? 20_260_101
    static let seed: UInt64 = replaySeed ^ 14
    static let kills = ProcessInfo.processInfo.environment["STRATA_CRASH_KILLS"].flatMap { Int($0) } ?? 70
    /// The rounds (three writes each) the replay phase drains under kills.
    static let replayRounds = ProcessInfo.processInfo.environment["STRATA_CRASH_REPLAY_ROUNDS"].flatMap { Int($0) } ?? 200
    /// A kill-and-relaunch of the writer that takes longer than this fails the loop instead of
    /// running on: the writer stalled. A bound on each step, not on the whole loop, so a slower
    /// machine (two cores, another build beside the run) takes longer without failing.
    static let stepBound: Duration = .seconds(30)

    /// A queued write as the outbox holds it, decoded back to the round it belongs to.
    struct Queued: Decodable {
        /// The writer's `CrashPost.maxPayload`: a round's write carries the first 512 bytes of its payload.
        static let maxPayload = 512

        var title: String
        var seq: Int
        var payload: Data
        var digest: String

        var isIntact: Bool {
            CrashRecord.digest(of: payload) == digest && payload == CrashRecord.payload(for: seq).prefix(Self.maxPayload)
        }
    }

    /// Reads the outbox after a kill as a relaunched process would: through ``FileOutboxStorage``,
    /// checking that nothing is set aside as unreadable, every entry decodes to an intact round, and
    /// no round is queued twice. After each kill it reads only the entry files that are new or
    /// rewritten since its last read (hard links to them in a scratch folder: the outbox never changes
    /// a file in place, it renames a new one over it), so the loop's cost does not grow with the
    /// square of the queue; ``read(context:everything:)`` with `everything` reads the whole folder.
    struct Reader {
        struct Signature: Equatable {
            var inode: UInt
            var size: Int
            var modified: Int
        }

        struct Known {
            var signature: Signature
            var seq: Int
            var key: String
        }

        let directory: URL
        let scratch: URL
        /// `directory` is an SQLite outbox file, read whole each time (WAL: beside the writers).
        let sqlite: Bool
        private var known: [String: Known] = [:]
        private var reads = 0

        init(directory: URL, scratch: URL, sqlite: Bool = false) {
            self.directory = directory
            self.scratch = scratch
            self.sqlite = sqlite
        }

        /// Every round in the SQLite outbox now: each entry intact, none twice.
        func readSQLite(context: String) async throws -> [Int: String] {
            guard FileManager.default.fileExists(atPath: directory.path) else { return [:] }
            let logs = LogCapture()
            let entries = try await SQLiteOutboxStorage(path: directory.path, logger: logs.logger).loadAll()
            let unreadable = logs.entries.filter { $0.message.contains("unreadable") }
            #expect(unreadable.isEmpty, "\(context): \(unreadable.map { $0.line() })")
            var rounds: [Int: String] = [:]
            for entry in entries {
                let queued = try #require(try? entry.decoded(Queued.self), "\(context): entry \(entry.id) does not decode")
                #expect(queued.isIntact, "\(context): round \(queued.seq) is torn")
                #expect(rounds[queued.seq] == nil, "\(context): a round is queued twice")
                rounds[queued.seq] = entry.idempotencyKey
            }
            return rounds
        }

        static func signature(of path: String) -> Signature? {
            var info = stat()
            guard stat(path, &info) == 0 else { return nil }
            return Signature(
                inode: UInt(info.st_ino), size: Int(info.st_size),
                modified: Int(info.st_mtim.tv_sec) * 1_000_000_000 + Int(info.st_mtim.tv_nsec))
        }

        /// The rounds queued now, each with its idempotency key.
        mutating func read(context: String, everything: Bool = false) async throws -> [Int: String] {
            if sqlite { return try await readSQLite(context: context) }
            #expect(tree(directory).filter { $0.hasSuffix(".unreadable") }.isEmpty, "\(context): an entry was set aside")
            let names = ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).filter { $0.hasSuffix(".outbox") }
            var current: [String: Signature] = [:]
            for name in names {
                current[name] = Self.signature(of: directory.appendingPathComponent(name).path)
            }
            known = known.filter { current[$0.key] == $0.value.signature }
            let fresh = everything ? Array(current.keys) : current.keys.filter { known[$0] == nil }
            var folder = directory
            if !everything {
                reads += 1
                folder = scratch.appendingPathComponent("read-\(reads)")
                try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
                for name in fresh {
                    guard link(directory.appendingPathComponent(name).path, folder.appendingPathComponent(name).path) == 0 else {
                        throw TestError("\(context): cannot link \(name) for reading: errno \(errno)")
                    }
                }
            }
            defer { if !everything { try? FileManager.default.removeItem(at: folder) } }

            let logs = LogCapture()
            let entries = try await FileOutboxStorage(directory: folder, logger: logs.logger).loadAll()
            let unreadable = logs.entries.filter { $0.message.contains("unreadable") }
            #expect(unreadable.isEmpty, "\(context): \(unreadable.map { $0.line() })")
            #expect(entries.count == fresh.count, "\(context): \(fresh.count) entry files, \(entries.count) entries read")
            for entry in entries {
                let queued = try #require(try? entry.decoded(Queued.self), "\(context): entry \(entry.id) does not decode")
                #expect(queued.isIntact, "\(context): round \(queued.seq) is torn")
                #expect(entry.idempotencyKey == entry.id.uuidString.lowercased())
                let name = "\(entry.id.uuidString.lowercased()).outbox"
                guard let signature = current[name] else {
                    Issue.record("\(context): read an entry with no file of its name: \(name)")
                    continue
                }
                known[name] = Known(signature: signature, seq: queued.seq, key: entry.idempotencyKey)
            }
            let seqs = known.values.map(\.seq)
            #expect(Set(seqs).count == seqs.count, "\(context): a round is queued twice")
            return Dictionary(known.values.map { ($0.seq, $0.key) }, uniquingKeysWith: { first, _ in first })
        }
    }

    @Test func killsWhileTwoProcessesQueue_loseNothingAndKeepTheOrderTheyAcknowledged() async throws {
        let directory = try TemporaryDirectory(prefix: "strata-outbox-crash-queue")
        _ = try await Self.queueUnderKills(in: directory, postsURL: URL(string: "http://127.0.0.1:9")!)
    }

    /// The same on SQLite, where a write queued alone is numbered and saved in one transaction and
    /// the writes queued behind it are committed together (group commit).
    @Test func killsWhileTwoProcessesQueueIntoSQLite_loseNothingAndKeepTheOrderTheyAcknowledged() async throws {
        let directory = try TemporaryDirectory(prefix: "strata-outbox-crash-queue-sqlite")
        _ = try await Self.queueUnderKills(in: directory, postsURL: URL(string: "http://127.0.0.1:9")!, sqlite: true)
    }

    @Test func killsWhileReplaying_loseNothingAndApplyNothingTwice() async throws {
        try await withDemoServer { server in
            let directory = try TemporaryDirectory(prefix: "strata-outbox-crash-replay")
            try await Self.replayUnderKills(in: directory, server: server)
        }
    }

    /// The first writer's rounds start at 1, the second's here: their posts never share a number.
    static let secondWriterStart = 1_000_000

    /// Phase 1: two writer processes queue into one outbox at once (each round three writes from three
    /// tasks, two into scope `shared`), both killed at random moments. Every acknowledged round must be
    /// on disk, intact, once; each scope's queue order must put a round after every round either
    /// process had acknowledged before it began. Returns the posts queued.
    static func queueUnderKills(in directory: TemporaryDirectory, postsURL: URL, sqlite: Bool = false) async throws -> [Int] {
        let outbox = directory.appending(sqlite ? "outbox.sqlite" : "outbox")
        let stderrFiles = (directory.appending("writer-a-stderr"), directory.appending("writer-b-stderr"))
        var random = SplitMix64(seed: seed)
        let clock = ContinuousClock()
        let started = clock.now
        var reader = Reader(directory: outbox, scratch: directory.appending("scratch"), sqlite: sqlite)

        var queued: [Int] = []
        var acknowledgedPosts = Set<Int>()
        // Every round either writer began: when it began and, once acknowledged, when that was.
        var began: [Int: UInt64] = [:]
        var acknowledgedAt: [Int: UInt64] = [:]
        var next = (1, secondWriterStart)
        var enqueueKills = 0
        var inFlightKept = 0
        // SQLite: half as many (each writer opens the database and its schema, which doubles a step).
        let kills = sqlite ? max(Self.kills / 2, 1) : Self.kills
        while enqueueKills < kills {
            let stepStarted = clock.now
            let acks = Int.random(in: 1...2, using: &random)
            let spin = Duration.microseconds(Int.random(in: 0...10_000, using: &random))
            let common = ["--store", sqlite ? "outbox-enqueue-sqlite" : "outbox-enqueue", "--path", outbox.path, "--url", postsURL.absoluteString]
            let (first, second) = (common + ["--start", "\(next.0)"], common + ["--start", "\(next.1)"])
            let points = try await TwoProcessTests.offPool {
                try KillLoop.killTwoDuringWrites(first, second, afterAcks: acks, spin: spin, stderrFiles: stderrFiles)
            }
            enqueueKills += 1
            let context = "STRATA_CRASH_SEED=\(replaySeed), enqueue kill \(enqueueKills)"
            guard clock.now - stepStarted < Self.stepBound else {
                Issue.record("\(context) took \(clock.now - stepStarted), over \(Self.stepBound): a writer stalled")
                break
            }
            queued = try await reader.read(context: context).keys.sorted()
            for (point, start) in [(points.0, next.0), (points.1, next.1)] {
                #expect(point.status == 128 + SIGKILL, "\(context): a writer ended with \(point.status)")
                began.merge(point.startedAt) { _, new in new }
                acknowledgedAt.merge(point.acknowledgedAt) { _, new in new }
                if let acknowledged = point.acknowledged, acknowledged >= start {
                    acknowledgedPosts.formUnion(3 * start..<3 * (acknowledged + 1))
                }
                let inFlightQueued = point.inFlight.map { round in (3 * round..<3 * round + 3).contains { queued.contains($0) } } ?? false
                if inFlightQueued { inFlightKept += 1 }
            }
            let lost = acknowledgedPosts.subtracting(queued)
            #expect(lost.isEmpty, "\(context): posts of acknowledged rounds lost: \(lost.sorted().prefix(10))")
            next.0 = max(points.0.acknowledged ?? 0, points.0.inFlight ?? 0, next.0 - 1) + 1
            next.1 = max(points.1.acknowledged ?? 0, points.1.inFlight ?? 0, next.1 - 1) + 1
        }
        queued = try await reader.read(context: "STRATA_CRASH_SEED=\(replaySeed), after the queueing kills", everything: true).keys.sorted()
        // The queue order per scope, as every relaunch reads it (by sequence): a round's posts come
        // after those of every round acknowledged before it began, in either process (its tasks
        // started after those enqueues returned). Rounds that overlapped may be in either order, as
        // may one round's two posts into `shared`.
        let order = try await Self.queueOrderPerScope(outbox, sqlite: sqlite)
        var outOfOrder: [String] = []
        // Pairs of rounds of different writers, one acknowledged before the other began: what
        // the order across processes is checked on.
        var pairsAcrossWriters = 0
        for (scope, posts) in order {
            // Every pair: a round acknowledged before another began comes first.
            let rounds = posts.map { $0 / 3 }
            let firstIndex = Dictionary(rounds.enumerated().map { ($1, $0) }, uniquingKeysWith: min)
            let lastIndex = Dictionary(rounds.enumerated().map { ($1, $0) }, uniquingKeysWith: max)
            for earlier in Set(rounds) {
                guard let acknowledged = acknowledgedAt[earlier] else { continue }
                for later in Set(rounds) where later != earlier {
                    guard let start = began[later], acknowledged < start else { continue }
                    if (earlier >= secondWriterStart) != (later >= secondWriterStart) { pairsAcrossWriters += 1 }
                    if lastIndex[earlier]! > firstIndex[later]! { outOfOrder.append("\(scope): round \(later) before \(earlier)") }
                }
            }
        }
        #expect(outOfOrder.isEmpty, "STRATA_CRASH_SEED=\(replaySeed): queued against the order the writers acknowledged: \(outOfOrder.prefix(10))")
        let fromSecond = queued.filter { $0 >= 3 * secondWriterStart }.count
        #expect(fromSecond > 0 && fromSecond < queued.count, "STRATA_CRASH_SEED=\(replaySeed): the queue does not hold both writers' posts")
        #expect(pairsAcrossWriters > 0, "STRATA_CRASH_SEED=\(replaySeed): no round of one writer began after the other's was acknowledged")
        print(
            "OutboxCrashSafety[queue\(sqlite ? ", sqlite" : "")] STRATA_CRASH_SEED=\(replaySeed): \(enqueueKills) kills of two writer processes while queueing "
                + "(in-flight round kept \(inFlightKept)×), \(queued.count) writes queued (\(fromSecond) by the second); lost 0, torn 0, "
                + "queued against the acknowledged order \(outOfOrder.count); \(String(format: "%.1f", (clock.now - started) / .seconds(1))) s")
        return queued
    }

    /// Phase 2: a queue of writes (queued by an uninterrupted writer run) is drained to the demo
    /// server by runs killed after 2–7 answers, until a run drains what is left. Nothing is lost,
    /// nothing applied twice, each scope applied in its queue order.
    static func replayUnderKills(in directory: TemporaryDirectory, server: DemoServer) async throws {
        let outbox = directory.appending("outbox")
        let stderrFile = directory.appending("writer-stderr")
        var random = SplitMix64(seed: seed ^ 2)
        let clock = ContinuousClock()
        let started = clock.now
        var reader = Reader(directory: outbox, scratch: directory.appending("scratch"))
        let arguments = [
            "--store", "outbox-enqueue", "--path", outbox.path, "--url", server.baseURL.absoluteString, "--count", "\(replayRounds)",
        ]
        try await TwoProcessTests.offPool { try KillLoop.runToCompletion(arguments, stderrFile: stderrFile) }
        let queued = try await reader.read(context: "STRATA_CRASH_SEED=\(replaySeed), before the replay", everything: true).keys.sorted()
        let total = queued.count
        #expect(total == 3 * replayRounds)
        let sequenceOrder = try await Self.queueOrderPerScope(outbox)

        // Phase 2: kills while replaying, each after 2–7 writes the server accepted and one in flight,
        // until a run drains what is left and ends on its own.
        var replayKills = 0
        // Kills that landed after the server applied a write and before the outbox removed it: the
        // next run sends that write again, with the same key.
        var killsAfterApply = 0
        var appliedButQueued: [Int: String] = [:]
        var finished = false
        while !finished {
            // Each run the kill ends has had two to seven writes answered, so the replay takes about a
            // quarter as many runs as there are writes (GUARANTEES.md): one still running after as
            // many runs as writes makes no progress.
            guard replayKills <= total else {
                Issue.record("STRATA_CRASH_SEED=\(replaySeed): the replay did not finish within \(total) runs")
                break
            }
            let stepStarted = clock.now
            // Each round queued three writes: a run sends 2–7 before its kill, so the replay takes about
            // as many kills as the rounds it replays.
            let acks = Int.random(in: 2...7, using: &random)
            // Half the kills aim at the moment an answer arrived (before the outbox removes the
            // write), half at a write sent after it (which the server may have applied meanwhile).
            let atAnswer = Bool.random(using: &random)
            let spin = Duration.microseconds(Int.random(in: 0...(atAnswer ? 500 : 3_000), using: &random))
            let arguments = ["--store", "outbox-replay", "--path", outbox.path, "--url", server.baseURL.absoluteString]
            let ended = try await TwoProcessTests.offPool {
                try ReplayKill.run(arguments, afterAcks: acks, atAnswer: atAnswer, spin: spin, stderrFile: stderrFile)
            }
            let context = "STRATA_CRASH_SEED=\(replaySeed), replay run \(replayKills + 1)"
            guard clock.now - stepStarted < Self.stepBound else {
                Issue.record("\(context) took \(clock.now - stepStarted), over \(Self.stepBound): the writer stalled")
                break
            }
            if ended.finished {
                #expect(ended.status == 0, "\(context): the writer ended with \(ended.status)")
                finished = true
            } else {
                replayKills += 1
                #expect(ended.status == 128 + SIGKILL, "\(context): the writer ended with \(ended.status)")
            }
            let remainingKeyed = try await reader.read(context: context)
            let remaining = Set(remainingKeyed.keys)
            let delivered = Set(appliedRounds(server))
            // Nothing lost: each round is still queued, or the server has it (or both, when the kill
            // landed between the server applying it and the outbox removing it).
            let missing = Set(queued).subtracting(remaining).subtracting(delivered)
            #expect(missing.isEmpty, "\(context): rounds neither queued nor delivered: \(missing.sorted().prefix(10))")
            let both = delivered.intersection(remaining)
            if !ended.finished, !both.isEmpty {
                killsAfterApply += 1
                for seq in both { appliedButQueued[seq] = remainingKeyed[seq] }
            }
        }

        let applied = appliedRounds(server)
        // Delivery order per scope is the queue order, across every kill and relaunch.
        let appliedInOrder = server.posts.keys.sorted().compactMap { id in server.posts[id].flatMap { Self.round(ofTitle: $0.title) } }
        for (scope, posts) in sequenceOrder {
            let delivered = appliedInOrder.filter { Self.scope(ofPost: $0) == scope }
            #expect(delivered == posts, "STRATA_CRASH_SEED=\(replaySeed): scope \(scope) was applied out of its queue order")
        }
        let duplicates = Dictionary(grouping: applied, by: { $0 }).filter { $0.value.count > 1 }.keys.sorted()
        #expect(duplicates.isEmpty, "STRATA_CRASH_SEED=\(replaySeed): rounds applied twice: \(duplicates.prefix(10))")
        #expect(applied.sorted() == queued, "STRATA_CRASH_SEED=\(replaySeed): the server holds \(applied.count) of \(total) rounds")
        #expect(try await reader.read(context: "STRATA_CRASH_SEED=\(replaySeed), after the replay", everything: true).isEmpty)
        #expect(killsAfterApply > 0, "STRATA_CRASH_SEED=\(replaySeed): no kill landed between the server applying a write and the outbox removing it")
        // Each write still queued after the server applied it was sent again, and answered from the
        // record, not applied again.
        let notReplayed = appliedButQueued.filter { (server.idempotencyKey($0.value)?.replayed ?? 0) == 0 }.keys.sorted()
        #expect(notReplayed.isEmpty, "STRATA_CRASH_SEED=\(replaySeed): applied but queued, never answered again from the record: \(notReplayed.prefix(10))")
        let resent = server.idempotencyKeys.filter { $0.replayed > 0 }.count
        let overApplied = server.idempotencyKeys.filter { $0.applied != 1 }.map(\.key)
        #expect(overApplied.isEmpty, "STRATA_CRASH_SEED=\(replaySeed): keys applied other than once: \(overApplied.prefix(10))")
        let seconds = (clock.now - started) / .seconds(1)
        print(
            "OutboxCrashSafety[replay] STRATA_CRASH_SEED=\(replaySeed): \(total) writes queued, \(replayKills) kills while replaying (\(killsAfterApply) after the server applied a write "
                + "and before the outbox removed it, \(appliedButQueued.count) such writes, \(resent) answered again from the record); "
                + "lost 0, applied twice \(duplicates.count), torn 0, scopes out of order 0; "
                + "\(String(format: "%.1f", seconds)) s")
    }

    /// The rounds the server applied, one element per post it created.
    static func appliedRounds(_ server: DemoServer) -> [Int] {
        server.posts.values.compactMap { round(ofTitle: $0.title) }
    }

    /// The writer's scope of post `seq` (`crashScope(ofPost:)` in strata-crash-writer).
    static func scope(ofPost seq: Int) -> String {
        seq % 3 == 2 ? "other" : "shared"
    }

    static func round(ofTitle title: String) -> Int? {
        title.hasPrefix("crash-") ? Int(title.dropFirst("crash-".count)) : nil
    }

    /// The posts queued in `directory`, per outbox scope, in the order the outbox delivers them.
    static func queueOrderPerScope(_ directory: URL, sqlite: Bool = false) async throws -> [String: [Int]] {
        let storage: any OutboxStorage = sqlite ? try SQLiteOutboxStorage(path: directory.path) : FileOutboxStorage(directory: directory)
        let entries = try await storage.loadAll().sorted { $0.sequence < $1.sequence }
        var order: [String: [Int]] = [:]
        for entry in entries {
            let post = try entry.decoded(Queued.self).seq
            #expect(entry.scope == scope(ofPost: post), "post \(post) is queued in scope \(entry.scope)")
            order[entry.scope, default: []].append(post)
        }
        return order
    }
}

/// Runs the replaying writer until it has had `acks` writes accepted (and, unless `atAnswer`, sent
/// the next), spins for `spin`, then kills it; or until it drains everything and ends on its own.
enum ReplayKill {
    struct Ended: Sendable {
        var finished: Bool
        var status: Int32
    }

    static func run(_ arguments: [String], afterAcks acks: Int, atAnswer: Bool, spin: Duration, stderrFile: URL) throws -> Ended {
        let writer = try WriterProcess(arguments, stderrFile: stderrFile)
        var accepted = 0
        var inFlight = false
        var finished = false
        var killed = false
        while let line = writer.nextLine() {
            if line.hasPrefix("done") { finished = true }
            if line.hasPrefix("w ") { inFlight = true }
            if line.hasPrefix("a ") {
                accepted += 1
                inFlight = false
            }
            if !killed, !finished, accepted >= acks, atAnswer || inFlight {
                KillLoop.spinFor(spin)
                writer.kill()
                killed = true
            }
        }
        let status = writer.wait()
        if !killed, !finished {
            let stderr = (try? String(contentsOf: stderrFile, encoding: .utf8)) ?? ""
            throw TestError("the replaying writer ended with \(status) without finishing: \(stderr)")
        }
        // The kill can come too late: while this side spun, the writer sent its last writes, printed
        // "done" and exited 0, and the SIGKILL found it gone (a loop run saw status 0 after a kill).
        // That run finished; a run that printed "done" and then ended otherwise did not.
        return Ended(finished: finished && status == 0, status: status)
    }
}
