import Foundation
@_spi(StrataInternals) import Strata
import StrataOutbox

/// One behaviour every `OutboxStorage` must have. Run them with ``OutboxStorageContract/verify(_:)``.
///
/// The cases follow the storage contract in `OutboxStorage`'s documentation: every field of an entry
/// comes back as saved, a save replaces the entry with its id (and a repeated save keeps one), a
/// remove of a missing id succeeds, `entry(_:)` reads one entry back as `loadAll` would, nothing
/// saved concurrently is lost, a second storage object on the same location sees the first one's
/// saves (``Requirement/reopen``), and an entry that cannot be read back is set aside rather than
/// deleted (``Requirement/corruption``).
public enum OutboxStorageContractCase: String, CaseIterable, Sendable, CustomStringConvertible {
    /// A new storage loads no entries.
    case loadAllIsEmptyOnANewStorage
    /// Every field of an entry (pending and parked, with and without its optional fields, any payload
    /// bytes) comes back from `loadAll` exactly as saved.
    case everyFieldRoundTrips
    /// A save of an entry whose id is already stored replaces it, also when its key's revision
    /// changed (a conflict made it a new write), through `save`, `saveAttempt` and a batch; no other
    /// entry changes, and `remove` of the id then leaves nothing of it.
    case saveReplacesTheEntryWithItsID
    /// A save of the same entry twice (a save retried after its outcome was unknown) leaves one
    /// entry, as saved, through `loadAll` and `entry(_:)`.
    case savingTheSameEntryTwiceKeepsOne
    /// `entry(_:)` of a saved id returns it with every field as saved, and after a save of the same
    /// id the latest version; the other entries are unaffected.
    case entryReadsBackTheLatestVersion
    /// `entry(_:)` returns `nil` for an id never saved (on a new storage and beside other entries)
    /// and for a removed id.
    case entryOfAMissingIDIsNil
    /// `remove` deletes the entry with that id and no other.
    case removeDeletesOnlyThatEntry
    /// `remove` of an id never saved (or already removed) succeeds and changes nothing.
    case removeOfAMissingIDSucceeds
    /// Hundreds of entries saved one after the other all come back; removing half leaves the other half.
    case manyEntriesRoundTrip
    /// Many tasks saving distinct entries at once: every entry comes back, none lost or torn.
    case concurrentSavesLoseNothing
    /// `save(contentsOf:)` (the outbox's group commit) stores every entry of the batch, each
    /// exactly as saved, replacing one already stored and leaving the others alone; a batch of one
    /// and an empty batch work too.
    case savingABatchStoresEveryEntry
    /// `saveAttempt(_:)` replaces the entry as `save(_:)` does, and `removeDelivered(_:)` removes it
    /// as `remove(_:)` does (of a missing id too), each seen at once by `loadAll`, `entry(_:)` and
    /// `entries(inScope:)`; a `save(_:)` after an attempt is what reads back; and
    /// `saveAttempt(_:removingDelivered:)` does both in one call.
    case attemptsAndDeliveredRemovalsReadBack
    /// `saveNumbered(after:_:)` hands its closure a sequence above `after` and stores what the closure
    /// returns, numbered so; a closure returning `nil` stores nothing. On a storage shared by
    /// processes, every sequence it issues is above the ones issued before.
    case numberedSavesStoreWhatTheyNumber
    /// A second storage object on the same location sees the first one's saves, replacements and
    /// removals, and the first sees the second's.
    case secondInstanceSeesSavesAndRemovals
    /// An entry damaged in place is left out of `loadAll`, the others come back, the damaged one is
    /// still kept somewhere an operator can find it (set aside, not deleted), and the storage stays usable.
    case unreadableEntryIsSetAsideNotDeleted
    /// `entry(_:)` of an entry damaged in place returns `nil` and sets it aside as `loadAll` does;
    /// the other entries still read back, and the id can be saved again.
    case unreadableEntryReadByIDIsSetAside

    /// What an ``OutboxStorageContract`` must provide for this case to run.
    public enum Requirement: Sendable {
        /// ``OutboxStorageContract/reopen``: a second storage object on the same location.
        case reopen
        /// ``OutboxStorageContract/corruption``: a way to damage a stored entry.
        case corruption
    }

    /// The hook this case needs, if any.
    public var requirement: Requirement? {
        switch self {
        case .secondInstanceSeesSavesAndRemovals: .reopen
        case .unreadableEntryIsSetAsideNotDeleted, .unreadableEntryReadByIDIsSetAside: .corruption
        default: nil
        }
    }

    /// The cases every storage runs: those that need no hook.
    public static var universal: [OutboxStorageContractCase] { allCases.filter { $0.requirement == nil } }

    /// The cases a storage with the given hooks runs.
    public static func cases(with requirements: Set<Requirement>) -> [OutboxStorageContractCase] {
        allCases.filter { $0.requirement.map(requirements.contains) ?? true }
    }

    public var description: String { rawValue }
}

/// A behaviour of ``OutboxStorageContractCase`` that a storage does not have.
public struct OutboxStorageContractError: Error, CustomStringConvertible {
    /// The case that failed.
    public var contractCase: OutboxStorageContractCase
    /// The storage, as it describes itself.
    public var storage: String
    /// What it did instead.
    public var message: String
    public var description: String { "\(storage) violates \(contractCase): \(message)" }
}

/// Every case a storage failed in ``OutboxStorageContract/verifyAll()``.
public struct OutboxStorageContractVerificationError: Error, CustomStringConvertible {
    /// One violation per failed case.
    public var violations: [OutboxStorageContractError]
    public var description: String { violations.map(\.description).joined(separator: "\n") }
}

/// The outbox storage contract, runnable unchanged against any `OutboxStorage` — Strata's or your own.
///
/// ```swift
/// @Suite struct MyOutboxStorageTests {
///     static let contract = OutboxStorageContract { MyOutboxStorage(path: tempPath()) }
///
///     @Test(arguments: contract.applicableCases)
///     func contract(_ behaviour: OutboxStorageContractCase) async throws {
///         try await Self.contract.verify(behaviour)
///     }
/// }
/// ```
/// `makeStorage` must return an empty storage at a location of its own for every call (each case
/// makes one). Give ``reopen`` for persistent storages and ``corruption`` for storages that read bytes
/// back. Dates must come back exactly as saved: one of the contract's entries is due at a time with a
/// fraction of a millisecond, as a live `Date()` has (an outbox on a clock that stands still would
/// otherwise find a write read back from disk not yet due).
public struct OutboxStorageContract<S: OutboxStorage>: Sendable {
    /// Damages a stored entry, for ``OutboxStorageContractCase/unreadableEntryIsSetAsideNotDeleted``.
    public struct Corruption: Sendable {
        /// Replaces the stored bytes of the entry with `id` with something the storage cannot read
        /// (for a database: garbage in the column holding the encoded entry, written with raw SQL).
        public var corrupt: @Sendable (S, UUID) async throws -> Void
        /// Whether the damaged entry with `id` is still kept (a renamed file, a quarantine row).
        public var isSetAside: @Sendable (S, UUID) async throws -> Bool

        /// Creates the hook from a function that damages an entry and one that finds it set aside.
        public init(
            corrupt: @escaping @Sendable (S, UUID) async throws -> Void,
            isSetAside: @escaping @Sendable (S, UUID) async throws -> Bool
        ) {
            self.corrupt = corrupt
            self.isSetAside = isSetAside
        }
    }

    /// Makes a new, empty storage at a location of its own.
    public let makeStorage: @Sendable () async throws -> S
    /// Opens a second storage object on the same location as the given one.
    public var reopen: (@Sendable (S) async throws -> S)?
    /// How to damage an entry.
    public var corruption: Corruption?
    /// How many entries ``OutboxStorageContractCase/manyEntriesRoundTrip`` saves.
    public var manyEntries: Int
    /// How many tasks save at once in ``OutboxStorageContractCase/concurrentSavesLoseNothing``.
    public var concurrentSaves: Int

    /// Creates the contract.
    /// - Parameters:
    ///   - reopen: opens a second storage object on the same location (persistent storages).
    ///   - corruption: damages a stored entry (storages that read bytes back).
    ///   - manyEntries: how many entries the many-entries case saves (200 by default).
    ///   - concurrentSaves: how many saves run at once in the concurrency case (32 by default).
    ///   - makeStorage: makes a new, empty storage at a location of its own.
    public init(
        reopen: (@Sendable (S) async throws -> S)? = nil,
        corruption: Corruption? = nil,
        manyEntries: Int = 200,
        concurrentSaves: Int = 32,
        makeStorage: @escaping @Sendable () async throws -> S
    ) {
        precondition(manyEntries >= 2 && concurrentSaves >= 2, "the contract needs at least two entries per case")
        self.reopen = reopen
        self.corruption = corruption
        self.manyEntries = manyEntries
        self.concurrentSaves = concurrentSaves
        self.makeStorage = makeStorage
    }

    /// The cases this contract can run, given the hooks it has.
    public var applicableCases: [OutboxStorageContractCase] {
        var requirements: Set<OutboxStorageContractCase.Requirement> = []
        if reopen != nil { requirements.insert(.reopen) }
        if corruption != nil { requirements.insert(.corruption) }
        return OutboxStorageContractCase.cases(with: requirements)
    }

    /// Runs every applicable case, reporting all violations together (for XCTest, or a one-line check).
    public func verifyAll() async throws {
        var violations: [OutboxStorageContractError] = []
        for contractCase in applicableCases {
            do {
                try await verify(contractCase)
            } catch let violation as OutboxStorageContractError {
                violations.append(violation)
            } catch {
                violations.append(OutboxStorageContractError(contractCase: contractCase, storage: "\(S.self)", message: "threw \(error)"))
            }
        }
        if !violations.isEmpty { throw OutboxStorageContractVerificationError(violations: violations) }
    }

    /// Runs one case; throws ``OutboxStorageContractError`` when the storage does not behave as
    /// the case says (or when the case needs a hook this contract lacks).
    public func verify(_ contractCase: OutboxStorageContractCase) async throws {
        let storage = try await makeStorage()
        let check = Checker(contractCase: contractCase, storage: (storage as? CustomStringConvertible)?.description ?? "\(S.self)")
        let samples = Self.samples

        switch contractCase {
        case .loadAllIsEmptyOnANewStorage:
            try check.same(try await check.load(storage, "on a new storage"), [], "loadAll on a new storage")

        case .everyFieldRoundTrips:
            for sample in samples {
                try await check.save(storage, sample)
            }
            try check.same(try await check.load(storage, "after saving \(samples.count) entries"), samples, "loadAll after saves")

        case .saveReplacesTheEntryWithItsID:
            let (first, other) = (samples[0], samples[1])
            try await check.save(storage, first)
            try await check.save(storage, other)
            var changed = first
            changed.payload = Data("replaced".utf8)
            changed.attempts = 3
            changed.baseVersion = "\"v9\""
            changed.nextAttemptAt = Self.date(90_000.5)
            changed.lastFailure = OutboxFailure(class: .unreachable, message: "connection refused", at: Self.date(80_000.25))
            changed.state = .parked(DeadLetter(reason: .retentionExceeded, detail: "5 attempts", parkedAt: Self.date(80_000.75)))
            try await check.save(storage, changed)
            try check.same(try await check.load(storage, "after a replace"), [changed, other], "loadAll after a save of a stored id")
            try await check.save(storage, first)
            try check.same(try await check.load(storage, "after replacing back"), [first, other], "loadAll after replacing the entry back")
            // A new key revision is the same write: one entry, under its id.
            var revised = first
            revised.keyRevision += 1
            do { try await storage.saveAttempt(revised) } catch { throw check.fail("saveAttempt of a new key revision threw \(error)") }
            try check.same(try await check.load(storage, "after a new key revision"), [revised, other], "loadAll after a save with a new key revision")
            try check.same(try await check.entry(storage, first.id, "after a new key revision"), revised, "entry(_:) after a new key revision")
            revised.keyRevision += 1
            try await check.save(storage, revised, "of a second key revision")
            try await check.saveBatch(storage, [revised], "of the same key revision")
            try check.same(try await check.load(storage, "after a second key revision"), [revised, other], "loadAll after a second key revision")
            do { try await storage.remove(first.id) } catch { throw check.fail("remove threw \(error)") }
            try check.same(try await check.load(storage, "after removing a revised write"), [other], "loadAll after removing a write saved under a new key revision")

        case .savingTheSameEntryTwiceKeepsOne:
            let (entry, other) = (samples[4], samples[1])
            try await check.save(storage, other)
            try await check.save(storage, entry)
            try await check.save(storage, entry, "a second time, unchanged")
            try check.same(try await check.load(storage, "after saving an entry twice"), [entry, other], "loadAll after saving the same entry twice")
            try check.same(try await check.entry(storage, entry.id, "after saving it twice"), entry, "entry(_:) after saving the same entry twice")

        case .entryReadsBackTheLatestVersion:
            for sample in samples {
                try await check.save(storage, sample)
            }
            for sample in samples {
                try check.same(try await check.entry(storage, sample.id, "after saving it"), sample, "entry(_:) of a saved id")
            }
            let (first, other) = (samples[0], samples[1])
            var changed = first
            changed.attempts = 9
            changed.payload = Data("the latest version".utf8)
            changed.nextAttemptAt = Self.date(70_000.125)
            changed.lastFailure = OutboxFailure(class: .transient, message: "502 Bad Gateway", status: 502, at: Self.date(69_000.5))
            try await check.save(storage, changed)
            try check.same(try await check.entry(storage, first.id, "after a replace"), changed, "entry(_:) after a save of a stored id")
            try check.same(try await check.entry(storage, other.id, "after another id was replaced"), other, "entry(_:) of an entry beside a replaced one")
            try await check.save(storage, first)
            try check.same(try await check.entry(storage, first.id, "after replacing back"), first, "entry(_:) after replacing the entry back")

        case .entryOfAMissingIDIsNil:
            let (first, other) = (samples[0], samples[1])
            try check.same(try await check.entry(storage, first.id, "on a new storage"), nil, "entry(_:) of an unknown id on a new storage")
            try await check.save(storage, first)
            try await check.save(storage, other)
            try check.same(try await check.entry(storage, UUID(), "beside stored entries"), nil, "entry(_:) of an unknown id beside stored entries")
            try await check.remove(storage, first.id)
            try check.same(try await check.entry(storage, first.id, "after removing it"), nil, "entry(_:) of a removed id")
            try check.same(try await check.entry(storage, other.id, "after removing another"), other, "entry(_:) of an entry beside a removed one")
            try await check.remove(storage, other.id)
            try check.same(try await check.entry(storage, other.id, "after removing every entry"), nil, "entry(_:) of the last removed id")

        case .removeDeletesOnlyThatEntry:
            let (first, other) = (samples[0], samples[1])
            try await check.save(storage, first)
            try await check.save(storage, other)
            try await check.remove(storage, first.id)
            try check.same(try await check.load(storage, "after a remove"), [other], "loadAll after removing one of two entries")
            try await check.remove(storage, other.id)
            try check.same(try await check.load(storage, "after removing both"), [], "loadAll after removing every entry")
            try await check.save(storage, first)
            try check.same(try await check.load(storage, "after saving a removed id again"), [first], "loadAll after saving a removed entry again")

        case .removeOfAMissingIDSucceeds:
            try await check.remove(storage, UUID())
            try check.same(try await check.load(storage, "after removing a missing id"), [], "loadAll after removing a missing id from a new storage")
            let kept = samples[0]
            try await check.save(storage, kept)
            try await check.remove(storage, UUID())
            try await check.remove(storage, samples[1].id)
            try check.same(try await check.load(storage, "after removing missing ids"), [kept], "loadAll after removing ids that are not stored")
            try await check.remove(storage, kept.id)
            try await check.remove(storage, kept.id)
            try check.same(try await check.load(storage, "after removing an id twice"), [], "loadAll after removing an entry twice")

        case .manyEntriesRoundTrip:
            let entries = (0..<manyEntries).map { Self.entry(number: $0) }
            for entry in entries {
                try await check.save(storage, entry)
            }
            try check.same(try await check.load(storage, "after \(entries.count) saves"), entries, "loadAll of \(entries.count) entries")
            for entry in entries where entry.sequence.isMultiple(of: 2) {
                try await check.remove(storage, entry.id)
            }
            let odd = entries.filter { !$0.sequence.isMultiple(of: 2) }
            try check.same(try await check.load(storage, "after removing half"), odd, "loadAll after removing every other entry")

        case .concurrentSavesLoseNothing:
            let entries = (0..<concurrentSaves).map { Self.entry(number: 1_000 + $0) }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for entry in entries {
                    group.addTask { try await check.save(storage, entry, "while \(entries.count) saves run at once") }
                }
                try await group.waitForAll()
            }
            try check.same(
                try await check.load(storage, "after \(entries.count) concurrent saves"), entries,
                "loadAll after \(entries.count) concurrent saves of distinct entries")

        case .savingABatchStoresEveryEntry:
            let (stored, untouched) = (samples[0], samples[1])
            try await check.save(storage, stored)
            try await check.save(storage, untouched)
            var replaced = stored
            replaced.attempts = 4
            replaced.payload = Data("replaced in a batch".utf8)
            let batch = [replaced] + (0..<concurrentSaves).map { Self.entry(number: 2_000 + $0) }
            try await check.saveBatch(storage, batch, "of \(batch.count) entries, one of them already stored")
            try check.same(
                try await check.load(storage, "after a batch"), (batch + [untouched]).sorted { $0.id.uuidString < $1.id.uuidString },
                "loadAll after a batch of \(batch.count) entries")
            try check.same(try await check.entry(storage, replaced.id, "after a batch replaced it"), replaced, "entry(_:) of an entry a batch replaced")
            let single = Self.entry(number: 3_000)
            try await check.saveBatch(storage, [single], "of one entry")
            try await check.saveBatch(storage, [], "of no entry")
            try check.same(try await check.entry(storage, single.id, "after a batch of one"), single, "entry(_:) after a batch of one")
            try check.same(
                try await check.load(storage, "after a batch of one and an empty batch"), batch + [untouched, single],
                "loadAll after a batch of one and an empty batch")

        case .attemptsAndDeliveredRemovalsReadBack:
            let (first, other) = (samples[0], samples[1])
            try await check.save(storage, first)
            try await check.save(storage, other)
            var attempted = first
            attempted.attempts += 1
            attempted.nextAttemptAt = Self.date(95_000.375)
            do { try await storage.saveAttempt(attempted) } catch { throw check.fail("saveAttempt threw \(error)") }
            try check.same(try await check.entry(storage, first.id, "after saveAttempt"), attempted, "entry(_:) after saveAttempt")
            try check.same(try await check.load(storage, "after saveAttempt"), [attempted, other], "loadAll after saveAttempt")
            let inScope: [OutboxEntry]
            do { inScope = try await storage.entries(inScope: first.scope) } catch { throw check.fail("entries(inScope:) threw \(error)") }
            try check.same(inScope.filter { $0.id == first.id }, [attempted], "entries(inScope:) after saveAttempt")
            // A save after an attempt (the write parked, or rewritten) is the version read back.
            var saved = attempted
            saved.attempts += 1
            saved.payload = Data("saved after an attempt".utf8)
            try await check.save(storage, saved, "after an attempt")
            try check.same(try await check.entry(storage, first.id, "after a save that followed an attempt"), saved, "entry(_:) after a save that followed an attempt")
            try check.same(try await check.load(storage, "after a save that followed an attempt"), [saved, other], "loadAll after a save that followed an attempt")
            // The delivered write removed with the next write's attempt.
            var next = other
            next.attempts += 1
            do {
                try await storage.saveAttempt(next, removingDelivered: [first.id, UUID()])
            } catch {
                throw check.fail("saveAttempt(_:removingDelivered:) threw \(error)")
            }
            try check.same(try await check.entry(storage, first.id, "after saveAttempt(_:removingDelivered:)"), nil, "entry(_:) of the write it removed")
            try check.same(try await check.entry(storage, other.id, "after saveAttempt(_:removingDelivered:)"), next, "entry(_:) of the write whose attempt it saved")
            try check.same(try await check.load(storage, "after saveAttempt(_:removingDelivered:)"), [next], "loadAll after saveAttempt(_:removingDelivered:)")
            do { try await storage.removeDelivered(other.id) } catch { throw check.fail("removeDelivered threw \(error)") }
            do { try await storage.removeDelivered(UUID()) } catch { throw check.fail("removeDelivered of a missing id threw \(error)") }
            try check.same(try await check.entry(storage, other.id, "after removeDelivered"), nil, "entry(_:) after removeDelivered")
            try check.same(try await check.load(storage, "after removeDelivered"), [], "loadAll after removeDelivered")

        case .numberedSavesStoreWhatTheyNumber:
            let numbers = Locked(4_000)
            let number = { @Sendable (sequence: UInt64) -> OutboxEntry in
                var entry = Self.entry(number: numbers.withLock { value in
                    value += 1
                    return value
                })
                entry.sequence = sequence
                return entry
            }
            let first: OutboxEntry?
            do { first = try await storage.saveNumbered(after: 10, number) } catch { throw check.fail("saveNumbered threw \(error)") }
            guard let first, first.sequence > 10 else { throw check.fail("saveNumbered(after: 10) saved \(String(describing: first))") }
            let skipped: OutboxEntry?
            do { skipped = try await storage.saveNumbered(after: first.sequence) { _ in nil } } catch { throw check.fail("saveNumbered storing nothing threw \(error)") }
            try check.same(skipped, nil, "saveNumbered whose closure returned nil")
            let second: OutboxEntry?
            do { second = try await storage.saveNumbered(after: first.sequence, number) } catch { throw check.fail("a second saveNumbered threw \(error)") }
            guard let second, second.sequence > first.sequence else { throw check.fail("a second saveNumbered saved \(String(describing: second))") }
            try check.same(try await check.load(storage, "after two numbered saves"), [first, second], "loadAll after numbered saves")
            if storage.isSharedByProcesses, let issued = try await storage.lastSequenceIssued(), issued < second.sequence {
                throw check.fail("lastSequenceIssued \(issued) is below the sequence a numbered save used, \(second.sequence)")
            }

        case .secondInstanceSeesSavesAndRemovals:
            let reopen = try check.hook(reopen, "reopen")
            let other = try await reopen(storage)
            let (first, second) = (samples[0], samples[1])
            try await check.save(storage, first)
            try check.same(try await check.load(other, "through a second instance"), [first], "loadAll through a second instance")
            var replaced = first
            replaced.attempts = 7
            replaced.payload = Data([0, 1, 2])
            try await check.save(other, replaced)
            try await check.save(other, second)
            try check.same(
                try await check.load(storage, "after the second instance saved"), [replaced, second],
                "loadAll through the first instance after the second one replaced an entry and saved another")
            try await check.remove(other, first.id)
            try check.same(
                try await check.load(storage, "after the second instance removed one"), [second],
                "loadAll through the first instance after the second one removed an entry")

        case .unreadableEntryIsSetAsideNotDeleted:
            let corruption = try check.hook(corruption, "corruption")
            let (damaged, intact) = (samples[0], samples[1])
            try await check.save(storage, damaged)
            try await check.save(storage, intact)
            try await corruption.corrupt(storage, damaged.id)
            try check.same(try await check.load(storage, "with one damaged entry"), [intact], "loadAll with one damaged entry (the intact one must come back)")
            try check.that(
                try await corruption.isSetAside(storage, damaged.id),
                "the damaged entry is not kept anywhere after loadAll: it must be set aside, never deleted")
            try check.same(try await check.load(storage, "a second time after a damaged entry"), [intact], "loadAll after the damaged entry was set aside")
            var again = damaged
            again.attempts = 1
            try await check.save(storage, again)
            try check.same(try await check.load(storage, "after saving the damaged id again"), [again, intact], "loadAll after saving the damaged entry's id again")

        case .unreadableEntryReadByIDIsSetAside:
            let corruption = try check.hook(corruption, "corruption")
            let (damaged, intact) = (samples[0], samples[1])
            try await check.save(storage, damaged)
            try await check.save(storage, intact)
            try await corruption.corrupt(storage, damaged.id)
            try check.same(try await check.entry(storage, damaged.id, "of a damaged entry"), nil, "entry(_:) of a damaged entry")
            try check.that(
                try await corruption.isSetAside(storage, damaged.id),
                "the damaged entry is not kept anywhere after entry(_:) read it: it must be set aside, never deleted")
            try check.same(try await check.entry(storage, intact.id, "beside a damaged entry"), intact, "entry(_:) of an intact entry beside a damaged one")
            try check.same(try await check.load(storage, "after entry(_:) set a damaged entry aside"), [intact], "loadAll after entry(_:) set the damaged entry aside")
            var again = damaged
            again.attempts = 2
            try await check.save(storage, again)
            try check.same(try await check.entry(storage, damaged.id, "after saving the damaged id again"), again, "entry(_:) after saving the damaged entry's id again")
        }
    }

    // MARK: Entries

    static func date(_ seconds: Double) -> Date { Date(timeIntervalSince1970: 1_767_225_600 + seconds) }

    /// Entries that exercise every field: pending and parked, optional fields present and absent,
    /// binary payloads, non-ASCII text.
    static var samples: [OutboxEntry] {
        let bytes = Data((0...255).map { UInt8($0) })
        let full = OutboxEntry(
            id: UUID(uuidString: "0194F3A2-7B10-7C3D-8E4F-A1B2C3D4E5F6")!, sequence: 41, scope: "post/42 — ü",
            kind: "http", payload: bytes, host: "api.example.com", baseVersion: "\"etag-ü\"", createdAt: date(1.25),
            attempts: 4, nextAttemptAt: Date(timeIntervalSinceReferenceDate: 786_000_600.123_456_789),
            lastFailure: OutboxFailure(class: .transient, message: "503 Service Unavailable", status: 503, at: date(300.75)),
            state: .parked(DeadLetter(reason: .rejected, detail: "422: title is empty", status: 422, body: Data(#"{"error":"empty"}"#.utf8), parkedAt: date(301.5))))
        // Retried from the dead letters: back in the queue, with a queuedAt later than its createdAt.
        var requeued = OutboxEntry(
            id: UUID(uuidString: "0194F3A2-7B10-7C3D-8E4F-000000000004")!, sequence: full.sequence + 1,
            scope: full.scope, kind: full.kind, payload: full.payload, host: full.host, baseVersion: full.baseVersion,
            createdAt: full.createdAt, attempts: full.attempts, nextAttemptAt: full.nextAttemptAt, lastFailure: full.lastFailure)
        requeued.queuedAt = date(900.25)
        let minimal = OutboxEntry(
            id: UUID(uuidString: "0194F3A2-7B10-7C3D-8E4F-000000000002")!, sequence: 0, scope: "", kind: "note",
            payload: Data(), createdAt: date(0))
        let bare = OutboxEntry(
            id: UUID(uuidString: "0194F3A2-7B10-7C3D-8E4F-000000000003")!, sequence: UInt64(Int64.max), scope: "s",
            kind: "k", payload: Data("{}".utf8), createdAt: date(2.5),
            lastFailure: OutboxFailure(class: .unreachable, message: "no route", at: date(3)),
            state: .parked(DeadLetter(reason: .unknownKind, detail: "no handler for k", parkedAt: date(4.125))))
        return [
            OutboxEntry(
                id: UUID(uuidString: "0194F3A2-7B10-7C3D-8E4F-000000000001")!, sequence: 1, scope: "posts", kind: "http",
                payload: Data(#"{"title":"hello"}"#.utf8), host: "api.example.com", createdAt: date(0.5)),
            minimal, bare, requeued,
            full,
        ]
    }

    /// A distinct entry per `number`.
    static func entry(number: Int) -> OutboxEntry {
        var id = UUID(uuidString: "0194F3A2-7B10-7C3D-8E4F-000000000000")!.uuid
        id.12 = UInt8(truncatingIfNeeded: number >> 24)
        id.13 = UInt8(truncatingIfNeeded: number >> 16)
        id.14 = UInt8(truncatingIfNeeded: number >> 8)
        id.15 = UInt8(truncatingIfNeeded: number)
        return OutboxEntry(
            id: UUID(uuid: id), sequence: UInt64(number), scope: "scope-\(number % 7)", kind: "write",
            payload: Data("payload \(number)".utf8), host: number.isMultiple(of: 3) ? "api.example.com" : nil,
            createdAt: date(Double(number) * 0.25), attempts: number % 5)
    }

    // MARK: Checking

    private struct Checker: Sendable {
        let contractCase: OutboxStorageContractCase
        let storage: String

        func fail(_ message: String) -> OutboxStorageContractError {
            OutboxStorageContractError(contractCase: contractCase, storage: storage, message: message)
        }

        func that(_ condition: Bool, _ message: @autoclosure () -> String) throws {
            if !condition { throw fail(message()) }
        }

        func hook<T>(_ hook: T?, _ name: String) throws -> T {
            guard let hook else { throw fail("this case needs the contract's `\(name)` hook, which was not given") }
            return hook
        }

        func save(_ storage: S, _ entry: OutboxEntry, _ context: String = "") async throws {
            do { try await storage.save(entry) } catch { throw fail("save of \(entry.id) \(context) threw \(error)") }
        }

        func saveBatch(_ storage: S, _ entries: [OutboxEntry], _ context: String) async throws {
            do { try await storage.save(contentsOf: entries) } catch { throw fail("save(contentsOf:) \(context) threw \(error)") }
        }

        func remove(_ storage: S, _ id: UUID) async throws {
            do { try await storage.remove(id) } catch { throw fail("remove of \(id) threw \(error)") }
        }

        /// `loadAll`, sorted by id so results compare regardless of the storage's order.
        func load(_ storage: S, _ context: String) async throws -> [OutboxEntry] {
            do {
                return try await storage.loadAll().sorted { $0.id.uuidString < $1.id.uuidString }
            } catch {
                throw fail("loadAll \(context) threw \(error)")
            }
        }

        /// `entry(_:)`.
        func entry(_ storage: S, _ id: UUID, _ context: String) async throws -> OutboxEntry? {
            do {
                return try await storage.entry(id)
            } catch {
                throw fail("entry(\(id)) \(context) threw \(error)")
            }
        }

        /// Compares one entry read by id with the one expected (`nil`: none), naming the first field that differs.
        func same(_ actual: OutboxEntry?, _ expected: OutboxEntry?, _ what: String) throws {
            switch (actual, expected) {
            case (nil, nil):
                return
            case (let read?, nil):
                throw fail("\(what): expected nil, got entry \(read.id)")
            case (nil, let saved?):
                throw fail("\(what): expected entry \(saved.id), got nil")
            case (let read?, let saved?):
                if read == saved { return }
                if read.id != saved.id { throw fail("\(what): expected entry \(saved.id), got entry \(read.id)") }
                throw fail("\(what): entry \(saved.id) came back with \(Self.difference(read, saved))")
            }
        }

        /// Compares entries as sets keyed by id, naming the first field that differs.
        func same(_ actual: [OutboxEntry], _ expected: [OutboxEntry], _ what: String) throws {
            let expected = expected.sorted { $0.id.uuidString < $1.id.uuidString }
            if actual == expected { return }
            let actualIDs = actual.map(\.id), expectedIDs = expected.map(\.id)
            if actualIDs != expectedIDs {
                let missing = Set(expectedIDs).subtracting(actualIDs), extra = Set(actualIDs).subtracting(expectedIDs)
                let duplicates = actualIDs.count - Set(actualIDs).count
                throw fail(
                    "\(what): expected \(expected.count) entries, got \(actual.count)"
                        + (missing.isEmpty ? "" : "; missing \(missing.map(\.uuidString).sorted())")
                        + (extra.isEmpty ? "" : "; unexpected \(extra.map(\.uuidString).sorted())")
                        + (duplicates == 0 ? "" : "; \(duplicates) duplicates"))
            }
            for (read, saved) in zip(actual, expected) where read != saved {
                throw fail("\(what): entry \(saved.id) came back with \(Self.difference(read, saved))")
            }
        }

        /// The fields in which `read` differs from `saved`, in words.
        static func difference(_ read: OutboxEntry, _ saved: OutboxEntry) -> String {
            var fields: [String] = []
            func compare<T: Equatable>(_ name: String, _ path: KeyPath<OutboxEntry, T>) {
                if read[keyPath: path] != saved[keyPath: path] {
                    fields.append("\(name) \(read[keyPath: path]) instead of \(saved[keyPath: path])")
                }
            }
            compare("sequence", \.sequence)
            compare("scope", \.scope)
            compare("kind", \.kind)
            compare("payload", \.payload)
            compare("host", \.host)
            compare("baseVersion", \.baseVersion)
            compare("createdAt", \.createdAt)
            compare("queuedAt", \.queuedAt)
            compare("attempts", \.attempts)
            compare("nextAttemptAt", \.nextAttemptAt)
            compare("lastFailure", \.lastFailure)
            compare("state", \.state)
            return fields.isEmpty ? "a difference in no named field" : fields.joined(separator: "; ")
        }
    }
}
