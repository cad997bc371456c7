import Foundation
import Logging
import Testing
@_spi(StrataInternals) import Strata
import StrataSQLite
import StrataTesting
#if canImport(Glibc)
import Glibc
#endif

/// The kill loop: `strata-crash-writer` writes self-validating values to a store while this test kills
/// it with SIGKILL at random moments, each time after it has acknowledged 1–3 rounds and begun the
/// next, plus a random spin of 0–10 ms (drawn from a seeded generator; nothing sleeps). After every
/// kill the store is opened afresh, as after a crash, and must hold the last acknowledged value or
/// the one in flight, complete and valid, and take a new write.
///
/// `STRATA_CRASH_SEED` replays a run; `STRATA_CRASH_KILLS` changes the number of kills (200 by default).
@Suite("Crash safety: SIGKILL while writing", .serialized, .timeLimit(.minutes(8)))
struct CrashSafetyTests {
    static let seed: UInt64 = ProcessInfo.processInfo.environment["STRATA_CRASH_SEED"].flatMap { UInt64($0) } ?? 20_260_101
    static let kills = ProcessInfo.processInfo.environment["STRATA_CRASH_KILLS"].flatMap { Int($0) } ?? 200
    /// The most one store's loop may take; 200 kills take 15–40 s on a busy two-core machine.
    static let budget: Duration = .seconds(180)
    static let key = "feed"

    enum Target: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case file
        case fileLimited = "file-limited"
        case sqlite

        var testDescription: String { rawValue }
        var seedSalt: UInt64 {
            switch self {
            case .file: 1
            case .fileLimited: 2
            case .sqlite: 3
            }
        }
    }

    /// What a loop saw, for the report.
    struct Figures: CustomStringConvertible {
        var kills = 0
        /// Kills after which the round in flight turned out to be committed.
        var committedInFlight = 0
        /// Values that did not validate (torn, mixed, corrupt): must stay 0.
        var torn = 0
        /// Temporary files left behind by kills mid-file (FileStore only).
        var temporaryFilesLeft: Int?
        var seconds = 0.0

        var description: String {
            "\(kills) kills in \(String(format: "%.1f", seconds)) s; in-flight round committed \(committedInFlight)×, "
                + "old value kept \(kills - committedInFlight)×; torn or invalid values \(torn)"
                + (temporaryFilesLeft.map { "; temporary files left by kills mid-file \($0), all swept after the loop" } ?? "")
        }
    }

    @Test(arguments: Target.allCases)
    func everyKillLeavesTheOldOrTheNewValueNeverATornOneAndTheStoreStaysWritable(_ target: Target) async throws {
        let seed = Self.seed ^ target.seedSalt
        let directory = try TemporaryDirectory(prefix: "strata-crash")
        let storePath = target == .sqlite ? directory.appending("db/cache.sqlite").path : directory.appending("cache").path
        let stderrFile = directory.appending("writer-stderr")
        var random = SplitMix64(seed: seed)
        var figures = Figures()
        var next = 1
        let clock = ContinuousClock()
        let started = clock.now

        while figures.kills < Self.kills {
            guard clock.now - started < Self.budget else {
                Issue.record("seed \(seed): only \(figures.kills) kills within the \(Self.budget) budget")
                break
            }
            let acks = Int.random(in: 1...3, using: &random)
            let spin = Duration.microseconds(Int.random(in: 0...10_000, using: &random))
            let arguments = [
                "--store", target.rawValue, "--path", storePath, "--key", Self.key, "--start", "\(next)", "--umask", "000",
            ]
            let point = try await TwoProcessTests.offPool {
                try KillLoop.killDuringWrite(arguments, afterAcks: acks, spin: spin, stderrFile: stderrFile)
            }
            figures.kills += 1
            let context = "seed \(seed), kill \(figures.kills) (\(acks) acks + \(spin) spin)"
            #expect(point.status == 128 + SIGKILL, "\(context): the writer ended with \(point.status)")
            let acknowledged = try #require(point.acknowledged, "\(context): nothing acknowledged")

            checkModes(target, storePath: storePath, context: context)
            let found = try await checkStore(target, storePath: storePath, point: point, context: context)
            if let found {
                if found.seq == acknowledged + 1 { figures.committedInFlight += 1 }
                if found.defect != nil { figures.torn += 1 }
                next = max(found.seq, acknowledged) + 1
            } else {
                figures.torn += 1
                next = acknowledged + 2
            }
        }
        figures.seconds = (clock.now - started) / .seconds(1)
        if target != .sqlite {
            let leftovers = tree(URL(fileURLWithPath: storePath)).filter { $0.hasPrefix(".tmp-") }.count
            figures.temporaryFilesLeft = leftovers
            // With no writer left, every leftover may go: the explicit sweep removes exactly those,
            // and the value stays readable.
            let sweeper = FileStore<CrashRecord>(
                directory: URL(fileURLWithPath: storePath), countLimit: target == .fileLimited ? 4 : nil, logger: quietLogger)
            #expect(try await sweeper.removeTemporaryFiles(olderThan: .zero) == leftovers, "seed \(seed)")
            #expect(tree(URL(fileURLWithPath: storePath)).filter { $0.hasPrefix(".tmp-") }.isEmpty, "seed \(seed)")
            #expect(try await sweeper.retrieve(Self.key)?.value.defect == nil, "seed \(seed)")
        }
        #expect(figures.torn == 0, "seed \(seed)")
        #expect(figures.kills >= Self.kills)
        print("CrashSafety[\(target.rawValue)] seed \(seed): \(figures)")
    }

    /// Opens the store as a restarted process would and checks the value, that nothing was reported
    /// corrupt, and that the store takes a new write. Returns the record found (`nil` for none).
    private func checkStore(_ target: Target, storePath: String, point: KillPoint, context: String) async throws -> CrashRecord? {
        let logs = LogCapture()
        let acknowledged = point.acknowledged ?? 0
        let store: any Store<String, CrashRecord>
        switch target {
        case .file:
            store = FileStore<CrashRecord>(directory: URL(fileURLWithPath: storePath), logger: logs.logger)
        case .fileLimited:
            store = FileStore<CrashRecord>(directory: URL(fileURLWithPath: storePath), countLimit: 4, logger: logs.logger)
        case .sqlite:
            store = try SQLiteStore<CrashRecord>(path: storePath, limits: .init(countLimit: 4), logger: logs.logger)
        }

        let entry = try await store.retrieve(Self.key)
        #expect(entry != nil, "\(context): no value after round \(acknowledged) was acknowledged")
        if let record = entry?.value {
            #expect(record.defect == nil, "\(context): \(record.defect ?? "")")
            let allowed = [acknowledged] + (point.inFlight.map { [$0] } ?? [])
            #expect(allowed.contains(record.seq), "\(context): found round \(record.seq), expected one of \(allowed)")
        }
        let corrupt = logs.entries.filter { $0.message.contains("corrupt") }
        #expect(corrupt.isEmpty, "\(context): \(corrupt.map { $0.line() })")

        // Still writable: a new entry goes in and comes back, then leaves.
        let probe = CrashRecord(seq: 0, payload: CrashRecord.payload(for: 0), digest: CrashRecord.digest(of: CrashRecord.payload(for: 0)))
        try await store.insert(probe, for: "probe", storedAt: Date())
        #expect(try await store.retrieve("probe")?.value == probe, "\(context): the probe did not read back")
        switch target {
        case .fileLimited:
            let entries = tree(URL(fileURLWithPath: storePath)).filter { !$0.hasPrefix(".") }
            #expect(entries.count <= 4, "\(context): \(entries.count) entry files with countLimit 4")
        case .sqlite:
            let count = try await (store as? SQLiteStore<CrashRecord>)?.count ?? 0
            #expect(count <= 4, "\(context): \(count) rows with countLimit 4")
        case .file:
            break
        }
        try await store.delete("probe")
        return entry?.value
    }

    /// Everything the writer created (with umask 000) is private: directories 0700, files 0600 —
    /// entries, temporary files, the index journal and its lock, the database and its -wal and -shm.
    private func checkModes(_ target: Target, storePath: String, context: String) {
        let directory = target == .sqlite ? (storePath as NSString).deletingLastPathComponent : storePath
        #expect(permissions(directory) == 0o700, "\(context): \(directory) has mode \(String(permissions(directory) ?? 0, radix: 8))")
        for name in tree(URL(fileURLWithPath: directory)) {
            let mode = permissions(directory + "/" + name)
            #expect(mode == 0o600, "\(context): \(name) has mode \(String(mode ?? 0, radix: 8))")
        }
    }

    /// The negative control: a writer that rewrites its file in place (truncate, then write) is caught
    /// by the same loop within a few kills. It proves the loop can see a torn write at all.
    @Test func theLoopCatchesAWriterThatWritesInPlace() async throws {
        let directory = try TemporaryDirectory(prefix: "strata-crash-naive")
        let path = directory.appending("value.json").path
        let stderrFile = directory.appending("writer-stderr")
        var random = SplitMix64(seed: Self.seed)
        var next = 1
        var torn = 0
        var kills = 0
        while torn == 0, kills < 100 {
            let spin = Duration.microseconds(Int.random(in: 0...10_000, using: &random))
            let arguments = ["--store", "naive", "--path", path, "--start", "\(next)"]
            let point = try await TwoProcessTests.offPool {
                try KillLoop.killDuringWrite(arguments, afterAcks: 1, spin: spin, stderrFile: stderrFile)
            }
            kills += 1
            let data = try Data(contentsOf: URL(fileURLWithPath: path))
            if let record = try? JSONDecoder().decode(CrashRecord.self, from: data), record.defect == nil {
                next = record.seq + 1
            } else {
                torn += 1
                next = (point.acknowledged ?? 0) + 2
            }
        }
        #expect(torn > 0, "seed \(Self.seed): no torn write in \(kills) kills of an in-place writer")
        print("CrashSafety[naive control] seed \(Self.seed): first torn value after \(kills) kills")
    }
}
