import Foundation
@testable @_spi(StrataInternals) import Strata
@testable import StrataOutbox
import StrataTesting
import Testing

/// The group commit's decisions, event by event, with no tasks.
@Suite("GroupCommitMachine")
struct GroupCommitMachineTests {
    static func ids(_ count: Int) -> [UUID] { (0..<count).map { _ in UUID() } }

    @Test("a write with nothing in flight is saved alone, at once; those that come meanwhile wait for the next batch")
    func aloneThenBatched() {
        var machine = GroupCommitMachine(maxBatch: 8)
        let (a, b, c) = (UUID(), UUID(), UUID())
        #expect(machine.submit(a) == .saveAlone)
        #expect(machine.submit(b) == .wait)
        #expect(machine.submit(c) == .wait)
        #expect(machine.inFlight == [a])
        #expect(machine.finished() == [b, c], "the writes that came while A was saved are saved together, oldest first")
        #expect(machine.pending.isEmpty)
        #expect(machine.finished() == nil)
        #expect(machine.inFlight == nil)
        #expect(machine.submit(UUID()) == .saveAlone, "once nothing is in flight, the next write is saved alone again")
    }

    @Test("a batch holds at most maxBatch writes; the rest go into the batch after it", arguments: [1, 3, 256])
    func batchesAreBounded(maxBatch: Int) {
        var machine = GroupCommitMachine(maxBatch: maxBatch)
        let first = UUID()
        _ = machine.submit(first)
        let waiting = Self.ids(2 * maxBatch + 1)
        for id in waiting { #expect(machine.submit(id) == .wait) }
        var saved: [UUID] = []
        while let batch = machine.finished() {
            #expect(batch.count <= maxBatch)
            saved += batch
        }
        #expect(saved == waiting, "every write in exactly one batch, in the order they came")
    }

    @Test("a cancelled caller leaves while its batch waits, and stays while its batch is being saved")
    func withdrawal() {
        var machine = GroupCommitMachine(maxBatch: 8)
        let (a, b, c) = (UUID(), UUID(), UUID())
        _ = machine.submit(a)
        _ = machine.submit(b)
        _ = machine.submit(c)
        #expect(machine.withdraw(a) == false, "A is being saved: its caller waits for the outcome")
        #expect(machine.withdraw(b) == true)
        #expect(machine.withdraw(b) == false, "withdrawn once")
        #expect(machine.finished() == [c])
        #expect(machine.withdraw(c) == false, "C's batch has started")
    }

    /// Seeds per run: 1,000 by default (CI); `STRATA_INTERLEAVING_SEEDS=20000` for a longer search.
    static let seeds = ProcessInfo.processInfo.environment["STRATA_INTERLEAVING_SEEDS"].flatMap { UInt64($0) } ?? 1_000

    @Test("seeded interleavings of submits, cancellations and batch ends keep every invariant after every step")
    func seededInterleavings() async {
        for seed in 0..<Self.seeds {
            if seed % 100 == 0 { await Task.yield() }
            var random = SplitMix64(seed: seed)
            let maxBatch = Int(random.next() % 5) + 1
            var machine = GroupCommitMachine(maxBatch: maxBatch)
            var submitted: [UUID] = [], withdrawn: Set<UUID> = [], saved: [UUID] = []
            for step in 0..<60 {
                switch random.next() % 4 {
                case 0, 1:
                    let id = UUID()
                    submitted.append(id)
                    let submission = machine.submit(id)
                    if submission == .saveAlone { saved.append(id) }
                case 2:
                    guard let id = submitted.randomElement(using: &random) else { continue }
                    let wasPending = machine.pending.contains(id)
                    #expect(machine.withdraw(id) == wasPending, "seed \(seed), step \(step): only a pending write leaves")
                    if wasPending { withdrawn.insert(id) }
                default:
                    guard machine.inFlight != nil else { continue }
                    if let batch = machine.finished() { saved += batch }
                }
                Self.checkInvariants(machine, maxBatch: maxBatch, seed: seed, step: step)
            }
            while machine.inFlight != nil {
                if let batch = machine.finished() { saved += batch }
                Self.checkInvariants(machine, maxBatch: maxBatch, seed: seed, step: -1)
            }
            #expect(Set(saved).count == saved.count, "seed \(seed): a write saved twice")
            #expect(Set(saved) == Set(submitted).subtracting(withdrawn), "seed \(seed): a write lost or withdrawn and saved")
            #expect(saved == submitted.filter { !withdrawn.contains($0) }, "seed \(seed): batches out of the order the writes came")
        }
    }

    static func checkInvariants(_ machine: GroupCommitMachine, maxBatch: Int, seed: UInt64, step: Int) {
        let inFlight = machine.inFlight ?? []
        #expect(Set(inFlight).isDisjoint(with: machine.pending), "seed \(seed), step \(step): a write in flight and pending")
        #expect(machine.pending.isEmpty || machine.inFlight != nil, "seed \(seed), step \(step): writes pending with nothing in flight")
        #expect(inFlight.count <= maxBatch, "seed \(seed), step \(step): a batch over maxBatch")
        #expect(Set(machine.pending).count == machine.pending.count, "seed \(seed), step \(step): a write pending twice")
    }
}

/// A real storage (files or SQLite) whose first save can be held, and which records every save
/// call: how many writes each commit carried.
final class BatchRecordingStorage<Base: OutboxStorage>: OutboxStorage {
    let base: Base
    let gate = Gate()
    private let record = Locked<(holdNext: Bool, commits: [Int], failBatches: Bool)>((false, [], false))

    init(_ base: Base) { self.base = base }

    func holdNextSave() { record.withLock { $0.holdNext = true } }
    func failBatches() { record.withLock { $0.failBatches = true } }
    /// The size of each commit, in order (a single save counts as 1).
    var commits: [Int] { record.withLock { $0.commits } }

    func loadAll() async throws -> [OutboxEntry] { try await base.loadAll() }
    func entry(_ id: UUID) async throws -> OutboxEntry? { try await base.entry(id) }
    func remove(_ id: UUID) async throws { try await base.remove(id) }

    func save(_ entry: OutboxEntry) async throws {
        let hold = record.withLock { state -> Bool in
            defer { state.holdNext = false }
            return state.holdNext
        }
        if hold { await gate.wait() }
        try await base.save(entry)
        record.withLock { $0.commits.append(1) }
    }

    func save(contentsOf entries: [OutboxEntry]) async throws {
        if record.withLock({ $0.failBatches }) { throw TestError("the batch's transaction failed before its commit") }
        try await base.save(contentsOf: entries)
        record.withLock { $0.commits.append(entries.count) }
    }
}

/// The outbox's group commit with real files: a burst of `enqueue` calls behind a save in flight
/// becomes one commit, each call returns only when its write is stored, and a cancelled or failed
/// call is answered exactly.
@Suite("Outbox group commit")
struct OutboxGroupCommitTests {
    static func outbox<S: OutboxStorage>(_ storage: S) -> Outbox {
        let outbox = Outbox(storage: storage, name: "group-commit")
        outbox.connectivityChanged(isOnline: false)
        return outbox
    }

    /// An outbox over recorded real files whose first write ("first") is being saved, held at the
    /// storage's gate: what is queued now waits for the next batch.
    static func withFirstSaveHeld(
        failingBatches: Bool = false,
        _ body: (BatchRecordingStorage<FileOutboxStorage>, Outbox, Task<OutboxEntry, any Error>) async throws -> Void
    ) async throws {
        let directory = try TemporaryDirectory(prefix: "strata-group-commit")
        defer { directory.remove() }
        let storage = BatchRecordingStorage(FileOutboxStorage(directory: directory.appending("outbox")))
        let outbox = Self.outbox(storage)
        _ = try await outbox.entries()
        storage.holdNextSave()
        if failingBatches { storage.failBatches() }
        let first = Task { try await outbox.enqueue(kind: "post", scope: "s", payload: Data("first".utf8)) }
        await storage.gate.waitForWaiters()
        try await body(storage, outbox, first)
    }

    @Test("writes queued while a save is in flight are committed together, each stored when its call returns")
    func aBurstIsOneCommit() async throws {
        try await Self.withFirstSaveHeld { storage, outbox, first in
            let burst = 20
            let calls = (0..<burst).map { index in
                Task { try await outbox.enqueue(kind: "post", scope: "s\(index % 3)", payload: Data("burst \(index)".utf8)) }
            }
            try await outbox.groupCommit.waitUntilPending(burst)
            storage.gate.open()
            _ = try await first.value
            var queued: [OutboxEntry] = []
            for call in calls { queued.append(try await call.value) }
            #expect(storage.commits == [1, burst], "the first save alone, then the burst in one commit")
            let stored = try await storage.base.loadAll()
            #expect(Set(stored.map(\.id)) == Set(queued.map(\.id) + [try await first.value.id]))
            #expect(try await outbox.entries().count == burst + 1)
            #expect(outbox.groupCommit.pendingCount == 0)
        }
    }

    @Test("a call cancelled while its batch waits is not queued and nothing of it is stored; the others are")
    func cancelledWhilePending() async throws {
        try await Self.withFirstSaveHeld { storage, outbox, first in
            let cancelled = Task { try await outbox.enqueue(kind: "post", scope: "s", payload: Data("cancelled".utf8)) }
            let kept = Task { try await outbox.enqueue(kind: "post", scope: "s", payload: Data("kept".utf8)) }
            try await outbox.groupCommit.waitUntilPending(2)
            cancelled.cancel()
            await #expect(throws: OutboxError.self) { _ = try await cancelled.value }
            storage.gate.open()
            _ = try await first.value
            let keptEntry = try await kept.value
            let payloads = Set(try await storage.base.loadAll().map { String(decoding: $0.payload, as: UTF8.self) })
            #expect(payloads == ["first", "kept"])
            #expect(try await outbox.entry(keptEntry.id) != nil)
            #expect(storage.commits == [1, 1])
        }
    }

    @Test("a batch that fails is answered write by write from a read-back: not queued, nothing stored, the scope free")
    func aFailedBatchIsSettledExactly() async throws {
        try await Self.withFirstSaveHeld(failingBatches: true) { storage, outbox, first in
            let failing = (0..<3).map { index in
                Task { try await outbox.enqueue(kind: "post", scope: "s", payload: Data("failing \(index)".utf8)) }
            }
            try await outbox.groupCommit.waitUntilPending(3)
            storage.gate.open()
            _ = try await first.value
            for call in failing {
                do {
                    _ = try await call.value
                    Issue.record("a write of the failed batch was reported queued")
                } catch let error as OutboxError {
                    guard case .storage = error else { Issue.record("expected not queued (.storage), got \(error)"); continue }
                }
            }
            #expect(try await storage.base.loadAll().count == 1)
            #expect(try await outbox.entries().count == 1, "only the first write is queued")
            let after = try await outbox.enqueue(kind: "post", scope: "s", payload: Data("after".utf8))
            #expect(try await outbox.entry(after.id) != nil, "the scope is not held by the failed writes")
        }
    }

    @Test("100 concurrent enqueues into a real file outbox: all stored, order in the scope as acknowledged")
    func concurrentEnqueuesIntoFiles() async throws {
        let directory = try TemporaryDirectory(prefix: "strata-group-commit")
        defer { directory.remove() }
        let storage = BatchRecordingStorage(FileOutboxStorage(directory: directory.appending("outbox")))
        let outbox = Self.outbox(storage)
        let queued = try await withThrowingTaskGroup(of: OutboxEntry.self) { group in
            for index in 0..<100 {
                group.addTask { try await outbox.enqueue(kind: "post", scope: "s", payload: Data("\(index)".utf8)) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(storage.commits.reduce(0, +) == 100)
        let reopened = Self.outbox(FileOutboxStorage(directory: directory.appending("outbox")))
        let entries = try await reopened.entries()
        #expect(Set(entries.map(\.id)) == Set(queued.map(\.id)))
        #expect(entries.map(\.sequence) == entries.map(\.sequence).sorted())
        #expect(Set(entries.map(\.sequence)).count == 100, "every write has its own sequence")
    }
}

/// A file storage (shared by processes) that records which of its calls queued writes go through.
final class NumberingRecordingStorage: OutboxStorage {
    let base: FileOutboxStorage
    let gate = Gate()
    private let record = Locked<(holdNext: Bool, calls: [String])>((false, []))
    /// The next numbered save stores its write and then throws; reads back by id fail while set.
    let faults = Locked<(storeThenThrow: Bool, failReadBack: Bool)>((false, false))

    init(directory: URL) { base = FileOutboxStorage(directory: directory) }

    func holdNextNumberedSave() { record.withLock { $0.holdNext = true } }
    var calls: [String] { record.withLock { $0.calls } }
    private func note(_ call: String) { record.withLock { $0.calls.append(call) } }

    var isSharedByProcesses: Bool { true }
    func loadAll() async throws -> [OutboxEntry] { try await base.loadAll() }
    func entry(_ id: UUID) async throws -> OutboxEntry? {
        if faults.withLock({ $0.failReadBack }) { throw TestError("the read-back failed too") }
        return try await base.entry(id)
    }
    func remove(_ id: UUID) async throws { try await base.remove(id) }
    func lastSequenceIssued() async throws -> UInt64? { try await base.lastSequenceIssued() }
    func claim(scope: String, for claimant: OutboxClaimant, until expiresAt: Date, now: Date) async throws -> OutboxClaimOutcome {
        try await base.claim(scope: scope, for: claimant, until: expiresAt, now: now)
    }
    func release(scope: String, for claimant: OutboxClaimant) async throws { try await base.release(scope: scope, for: claimant) }
    func entries(inScope scope: String) async throws -> [OutboxEntry] { try await base.entries(inScope: scope) }

    func save(_ entry: OutboxEntry) async throws {
        note("save")
        try await base.save(entry)
    }

    func save(contentsOf entries: [OutboxEntry]) async throws {
        note("batch of \(entries.count)")
        try await base.save(contentsOf: entries)
    }

    func nextSequence(after: UInt64) async throws -> UInt64 {
        note("nextSequence")
        return try await base.nextSequence(after: after)
    }

    func saveNumbered(after: UInt64, _ entry: @escaping @Sendable (UInt64) -> OutboxEntry?) async throws -> OutboxEntry? {
        note("saveNumbered")
        let hold = record.withLock { state -> Bool in
            defer { state.holdNext = false }
            return state.holdNext
        }
        if hold { await gate.wait() }
        let saved = try await base.saveNumbered(after: after, entry)
        if faults.withLock({ state -> Bool in
            defer { state.storeThenThrow = false }
            return state.storeThenThrow
        }) {
            throw TestError("the connection dropped after the commit was sent")
        }
        return saved
    }
}

@Suite("Outbox numbered saves", .timeLimit(.minutes(1)))
struct OutboxNumberedSaveTests {
    /// An offline outbox over a `NumberingRecordingStorage` in `directory`, its (empty) storage read.
    static func offlineOutbox(in directory: TemporaryDirectory) async throws -> (NumberingRecordingStorage, Outbox) {
        let storage = NumberingRecordingStorage(directory: directory.appending("outbox"))
        let outbox = Outbox(storage: storage, name: "numbered")
        outbox.connectivityChanged(isOnline: false)
        _ = try await outbox.entries()
        return (storage, outbox)
    }

    @Test("a numbered save whose outcome stays unknown is settled by enqueueing its id again: queued once, and the scope goes on")
    func anUnknownOutcomeIsSettledByARetry() async throws {
        let directory = try TemporaryDirectory(prefix: "strata-numbered")
        defer { directory.remove() }
        let (storage, outbox) = try await Self.offlineOutbox(in: directory)
        let id = UUID()
        storage.faults.withLock { $0 = (storeThenThrow: true, failReadBack: true) }
        await #expect {
            try await outbox.enqueue(kind: "post", scope: "s", payload: Data("x".utf8), id: id)
        } throws: { error in
            guard case OutboxError.outcomeUnknown(id: id, underlying: _) = error else { return false }
            return true
        }
        storage.faults.withLock { $0.failReadBack = false }
        let settled = try await outbox.enqueue(kind: "post", scope: "s", payload: Data("x".utf8), id: id)
        #expect(settled.id == id)
        #expect(try await outbox.entry(id) == settled)
        let after = try await outbox.enqueue(kind: "post", scope: "s", payload: Data("after".utf8))
        #expect(try await outbox.entries().map(\.id) == [id, after.id], "queued once, and the scope's order kept")
        #expect(try await storage.base.loadAll().count == 2)
    }

    @Test("on a storage shared by processes, a write queued with nothing else saving is numbered and saved in one storage call; writes queued behind it are numbered apart and committed together")
    func numberedAloneThenBatched() async throws {
        let directory = try TemporaryDirectory(prefix: "strata-numbered")
        defer { directory.remove() }
        let (storage, outbox) = try await Self.offlineOutbox(in: directory)
        let alone = try await outbox.enqueue(kind: "post", scope: "s", payload: Data("alone".utf8))
        #expect(storage.calls == ["saveNumbered"])
        storage.holdNextNumberedSave()
        let held = Task { try await outbox.enqueue(kind: "post", scope: "s", payload: Data("held".utf8)) }
        await storage.gate.waitForWaiters()
        let behind = (0..<3).map { index in Task { try await outbox.enqueue(kind: "post", scope: "s", payload: Data("behind \(index)".utf8)) } }
        try await outbox.groupCommit.waitUntilPending(3)
        storage.gate.open()
        let heldEntry = try await held.value
        var behindEntries: [OutboxEntry] = []
        for call in behind { behindEntries.append(try await call.value) }
        #expect(storage.calls == ["saveNumbered", "saveNumbered", "nextSequence", "nextSequence", "nextSequence", "batch of 3"])
        // The held write takes its number inside its storage call (after the gate); the three
        // behind it were numbered while it waited. None of these calls had returned when another
        // began, so any order among them keeps the promise; the write acknowledged first goes first.
        let later = [heldEntry] + behindEntries
        #expect(later.allSatisfy { $0.sequence > alone.sequence }, "numbered after the write acknowledged before they began")
        #expect(Set(later.map(\.sequence)).count == 4)
        let stored = try await FileOutboxStorage(directory: directory.appending("outbox")).loadAll().sorted(by: Outbox.deliveryOrder)
        #expect(stored.map(\.id) == ([alone] + later.sorted(by: Outbox.deliveryOrder)).map(\.id))
        #expect(try await outbox.entries().map(\.id) == stored.map(\.id), "the outbox's queue order is the storage's")
    }
}

/// The files' batch write (`POSIXFile.writeAtomically(_:in:mode:chunk:)`): every file lands, in
/// chunks; a failure part-way leaves each target whole, old or new, and no temporary file.
@Suite("POSIXFile batch write")
struct POSIXFileBatchWriteTests {
    static func files(_ count: Int, in directory: URL) -> [(data: Data, path: String, temporaryPath: String)] {
        (0..<count).map { index in
            (Data("file \(index)".utf8), directory.appendingPathComponent("\(index).entry").path,
             directory.appendingPathComponent(".tmp-\(index)").path)
        }
    }

    @Test("a batch larger than a chunk writes every file, and leaves no temporary file", arguments: [1, 3, 70])
    func everyFileLands(count: Int) throws {
        let directory = try TemporaryDirectory(prefix: "strata-batch-write")
        defer { directory.remove() }
        let files = Self.files(count, in: directory.url)
        try POSIXFile.writeAtomically(files, in: directory.url.path, mode: 0o600, chunk: 32)
        for file in files { #expect(try POSIXFile.read(file.path)?.data == file.data) }
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.url.path)
        #expect(names.filter { $0.hasPrefix(".tmp-") }.isEmpty)
        #expect(names.count == count)
    }

    @Test("a rename that fails part-way: the files before it are in place, the rest untouched, no temporary file left")
    func aFailedRenameLeavesEachTargetWhole() throws {
        let directory = try TemporaryDirectory(prefix: "strata-batch-write")
        defer { directory.remove() }
        let files = Self.files(5, in: directory.url)
        // The third target is a directory with a file in it: renaming a file over it fails.
        try FileManager.default.createDirectory(atPath: files[2].path, withIntermediateDirectories: false)
        _ = FileManager.default.createFile(atPath: files[2].path + "/keep", contents: Data("kept".utf8))
        #expect(throws: POSIXFile.Failure.self) {
            try POSIXFile.writeAtomically(files, in: directory.url.path, mode: 0o600, chunk: 2)
        }
        #expect(try POSIXFile.read(files[0].path)?.data == files[0].data)
        #expect(try POSIXFile.read(files[1].path)?.data == files[1].data)
        #expect(FileManager.default.fileExists(atPath: files[2].path + "/keep"))
        #expect(try POSIXFile.read(files[3].path) == nil)
        #expect(try POSIXFile.read(files[4].path) == nil)
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.url.path)
        #expect(names.filter { $0.hasPrefix(".tmp-") }.isEmpty, "temporary files left: \(names)")
    }
}
