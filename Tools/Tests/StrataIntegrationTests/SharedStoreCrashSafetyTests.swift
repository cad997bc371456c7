import Foundation
import Logging
import Testing
@_spi(StrataInternals) import Strata
import StrataSQLite
import StrataTesting
#if canImport(Glibc)
import Glibc
#endif

/// The kill loop with two writer processes on one store: an app and its
/// extension, or two server workers, writing one cache folder or one SQLite file at once.
///
/// Two `strata-crash-writer`s write self-validating values, each to its own key (`a`, `b`) and both to
/// one pool of filler keys (`filler-<seq % 8>`, so they also race on the same keys), and each reads
/// the other's key after every round it acknowledges (`--watch`): what it reads must be intact and
/// never older than what it read there before. The test kills both with SIGKILL at a random moment
/// (after the first has acknowledged 1–3 rounds and begun the next, plus a spin of 0–10 ms drawn from
/// a seeded generator), opens the store afresh, as after a crash, and checks:
/// - each writer's key holds its last acknowledged round or the one in flight (with limits, it may
///   also have been evicted by the other writer's rounds, never replaced by an older round);
/// - every entry there is intact, and nothing was reported corrupt;
/// - the count and byte limits hold once the store has taken a new write;
/// - the store still takes and returns a new write.
///
/// `STRATA_CRASH_SEED` replays a run; `STRATA_CRASH_SHARED_KILLS` changes the kills per store (40).
@Suite("Crash safety: two processes writing one store", .serialized, .timeLimit(.minutes(8)))
struct SharedStoreCrashSafetyTests {
    /// The one-writer loop's (`STRATA_CRASH_SEED`).
    static let seed = CrashSafetyTests.seed
    static let kills = ProcessInfo.processInfo.environment["STRATA_CRASH_SHARED_KILLS"].flatMap { Int($0) } ?? 40
    /// A kill-and-relaunch of both writers that takes longer than this fails the loop: a writer stalled.
    static let stepBound: Duration = .seconds(30)
    /// The limits of the limited stores: two writers' keys and eight fillers do not fit, so rounds
    /// evict, and with one entry in four of 100–270 KB the byte limit bites too.
    static let countLimit = 6
    static let byteLimit = 400_000
    static let fillers = (0..<8).map { "filler-\($0)" }

    /// The stores of the one-writer loop, with seeds of their own.
    typealias Target = CrashSafetyTests.Target

    /// What a loop saw, for the report.
    struct Figures: CustomStringConvertible {
        var kills = 0
        /// Kills after which a writer's key held the round in flight (committed before the kill).
        var committedInFlight = 0
        /// Kills after which a writer's key was gone: evicted by the other writer (limited stores).
        var evicted = 0
        /// Filler entries found evicted after the kills (limited stores; each kill counts those gone).
        var fillersEvicted = 0
        /// Values that did not validate (torn, mixed, corrupt) or went back in time: must stay 0.
        var defects = 0
        /// Reads by one writer of the other's key that found a value.
        var watchedFound = 0
        var seconds = 0.0

        var description: String {
            "\(kills) kills of two writers in \(String(format: "%.1f", seconds)) s; a writer's in-flight round committed "
                + "\(committedInFlight)×, its key evicted by the other \(evicted)×; reads of the other's key that "
                + "found it \(watchedFound); fillers found evicted \(fillersEvicted); torn, invalid or older values \(defects)"
        }
    }

    @Test(arguments: Target.allCases)
    func twoWritersKilledAtOnceLeaveEveryEntryWholeAndTheLimitsHeld(_ target: Target) async throws {
        let seed = Self.seed ^ (target.seedSalt &+ 40)
        let directory = try TemporaryDirectory(prefix: "strata-crash-shared")
        let storePath = target == .sqlite ? directory.appending("db/cache.sqlite").path : directory.appending("cache").path
        let stderrFiles = (directory.appending("writer-a-stderr"), directory.appending("writer-b-stderr"))
        var random = SplitMix64(seed: seed)
        var figures = Figures()
        var next = (a: 1, b: 1)
        let clock = ContinuousClock()
        let started = clock.now
        var limits: [String] = []
        if target.isLimited {
            limits = ["--count-limit", "\(Self.countLimit)", "--byte-limit", "\(Self.byteLimit)"]
        }

        while figures.kills < Self.kills {
            let stepStarted = clock.now
            let acks = Int.random(in: 1...3, using: &random)
            let spin = Duration.microseconds(Int.random(in: 0...10_000, using: &random))
            let common = ["--store", target.rawValue, "--path", storePath] + limits
            let first = common + ["--key", "a", "--watch", "b", "--start", "\(next.a)"]
            let second = common + ["--key", "b", "--watch", "a", "--start", "\(next.b)"]
            let (pointA, pointB) = try await TwoProcessTests.offPool {
                try KillLoop.killTwoDuringWrites(first, second, afterAcks: acks, spin: spin, stderrFiles: stderrFiles)
            }
            figures.kills += 1
            let context = "seed \(seed), kill \(figures.kills) (\(acks) acks + \(spin) spin)"
            guard clock.now - stepStarted < Self.stepBound else {
                Issue.record("\(context) took \(clock.now - stepStarted), over \(Self.stepBound): a writer stalled")
                break
            }
            #expect(pointA.status == 128 + SIGKILL && pointB.status == 128 + SIGKILL, "\(context): writers ended with \(pointA.status), \(pointB.status)")
            figures.watchedFound += pointA.watchedFound + pointB.watchedFound

            let found = try await checkStore(target, storePath: storePath, points: ["a": pointA, "b": pointB], context: context, figures: &figures)
            next.a = max(pointA.acknowledged ?? 0, pointA.inFlight ?? 0, found["a"] ?? 0) + 1
            next.b = max(pointB.acknowledged ?? 0, pointB.inFlight ?? 0, found["b"] ?? 0) + 1
        }
        figures.seconds = (clock.now - started) / .seconds(1)
        #expect(figures.defects == 0, "seed \(seed)")
        #expect(figures.kills >= Self.kills)
        // The loop saw what it is about: each writer read the other's writes while both ran.
        #expect(figures.watchedFound > 0, "seed \(seed): no writer ever read the other's key")
        if target.isLimited {
            #expect(figures.fillersEvicted > 0, "seed \(seed): no entry was ever evicted; the limits never bit")
        }
        print("SharedStoreCrashSafety[\(target.rawValue)] seed \(seed): \(figures)")
    }

    /// Opens the store as a restarted process would and checks both writers' keys, every other
    /// entry, the limits and a new write. Returns the round each writer's key holds.
    private func checkStore(
        _ target: Target, storePath: String, points: [String: KillPoint], context: String, figures: inout Figures
    ) async throws -> [String: Int] {
        let logs = LogCapture()
        let store: any Store<String, CrashRecord>
        let sqlite: SQLiteStore<CrashRecord>?
        switch target {
        case .file:
            store = FileStore<CrashRecord>(directory: URL(fileURLWithPath: storePath), logger: logs.logger)
            sqlite = nil
        case .fileLimited:
            store = FileStore<CrashRecord>(
                directory: URL(fileURLWithPath: storePath), countLimit: Self.countLimit, byteLimit: Self.byteLimit, logger: logs.logger)
            sqlite = nil
        case .sqlite:
            let opened = try SQLiteStore<CrashRecord>(
                path: storePath, limits: .init(countLimit: Self.countLimit, byteLimit: Self.byteLimit), logger: logs.logger)
            store = opened
            sqlite = opened
        }

        var found: [String: Int] = [:]
        for (key, point) in points.sorted(by: { $0.key < $1.key }) {
            let allowed = [point.acknowledged, point.inFlight].compactMap { $0 }
            guard let record = try await store.retrieve(key)?.value else {
                if target.isLimited {
                    figures.evicted += 1
                } else {
                    figures.defects += 1
                    Issue.record("\(context): \(key) holds nothing after round \(point.acknowledged ?? 0) was acknowledged")
                }
                continue
            }
            found[key] = record.seq
            if let defect = record.defect {
                figures.defects += 1
                Issue.record("\(context): \(key): \(defect)")
            } else if !allowed.contains(record.seq) {
                figures.defects += 1
                Issue.record("\(context): \(key) holds round \(record.seq), expected one of \(allowed)")
            } else if record.seq == point.inFlight {
                figures.committedInFlight += 1
            }
        }
        for key in Self.fillers {
            guard let record = try await store.retrieve(key)?.value else {
                if target.isLimited { figures.fillersEvicted += 1 }  // `file` writes no fillers
                continue
            }
            if let defect = record.defect {
                figures.defects += 1
                Issue.record("\(context): \(key): \(defect)")
            }
        }
        let corrupt = logs.entries.filter { $0.message.contains("corrupt") }
        #expect(corrupt.isEmpty, "\(context): \(corrupt.map { $0.line() })")

        // Still writable, and the limits hold once a write has run its evictions (a kill between a
        // write's rename and its evictions leaves one entry over; the next write evicts it).
        let probe = CrashRecord(seq: 0, payload: CrashRecord.payload(for: 0), digest: CrashRecord.digest(of: CrashRecord.payload(for: 0)))
        try await store.insert(probe, for: "probe", storedAt: Date())
        #expect(try await store.retrieve("probe")?.value == probe, "\(context): the probe did not read back")
        switch target {
        case .fileLimited:
            let entries = tree(URL(fileURLWithPath: storePath)).filter { !$0.hasPrefix(".") }
            let bytes = entries.reduce(0) { total, name in
                var info = stat()
                return total + (stat(storePath + "/" + name, &info) == 0 ? Int(info.st_size) : 0)
            }
            #expect(entries.count <= Self.countLimit, "\(context): \(entries.count) entry files with countLimit \(Self.countLimit)")
            #expect(bytes <= Self.byteLimit, "\(context): \(bytes) bytes of entry files with byteLimit \(Self.byteLimit)")
        case .sqlite:
            let count = try await sqlite?.count ?? 0
            let bytes = try await sqlite?.totalBytes ?? 0
            #expect(count <= Self.countLimit, "\(context): \(count) rows with countLimit \(Self.countLimit)")
            #expect(bytes <= Self.byteLimit, "\(context): \(bytes) bytes with byteLimit \(Self.byteLimit)")
        case .file:
            break
        }
        try await store.delete("probe")
        return found
    }
}

extension CrashSafetyTests.Target {
    /// Whether the store has a count and a byte limit in the two-writer loop.
    var isLimited: Bool { self != .file }
}
