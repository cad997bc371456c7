import Foundation
@_spi(StrataInternals) import Strata

/// One behaviour every `Store` must have. Run them with ``StoreContract/verify(_:)``.
///
/// The first eleven are the classic store specs (Essential Feed's `FeedStoreSpecs`); the rest cover
/// key isolation, metadata, refresh (re-stamping after a 304), concurrency, corrupt entries, cross-instance visibility, failures that
/// must leave the stored data alone (``Requirement/faults``) and least-recently-used eviction
/// (``Requirement/countLimit``).
public enum StoreContractCase: String, CaseIterable, Sendable, CustomStringConvertible {
    case retrieveDeliversEmptyOnEmptyStore
    case retrieveHasNoSideEffectsOnEmptyStore
    case retrieveDeliversFoundValueOnNonEmptyStore
    case retrieveHasNoSideEffectsOnNonEmptyStore
    case insertDeliversNoErrorOnEmptyStore
    case insertDeliversNoErrorOnNonEmptyStore
    case insertOverridesPreviouslyInsertedValue
    case deleteDeliversNoErrorOnEmptyStore
    case deleteHasNoSideEffectsOnEmptyStore
    case deleteDeliversNoErrorOnNonEmptyStore
    case deleteEmptiesPreviouslyInsertedValue
    case keysAreIsolated
    case storedAtAndValidatorsRoundTrip
    /// `refresh` of a key with no entry (never stored, or deleted) returns `false` and stores nothing.
    case refreshOfAMissingKeyReturnsFalseAndStoresNothing
    /// `refresh` replaces an entry's `storedAt` and every validator (`etag`, `lastModified`, `maxAge`),
    /// keeps its value, and leaves other keys alone.
    case refreshRestampsAndKeepsTheValue
    /// After `removeAll` no key is retrievable, and a new insert is stored and read back.
    case removeAllEmptiesTheStoreAndKeepsItUsable
    case sideEffectsRunInCallOrder
    case concurrentInsertsLeaveOneCompleteValue
    case corruptEntryIsAMissAndIsRemoved
    case storeStaysUsableAfterCorruptEntry
    case secondInstanceSeesInsertedValue
    case secondInstanceSeesDeletion
    /// A retrieve that fails (under an injected fault) throws a `StoreError` and leaves the entry intact.
    case failedRetrieveHasNoSideEffects
    /// An insert that fails (under an injected fault) throws a `StoreError` and keeps the previous entry.
    case failedInsertKeepsPreviousValue
    /// A delete that fails (under an injected fault) throws a `StoreError` and keeps the entry.
    case failedDeleteKeepsValue
    /// Many tasks interleave inserts, retrieves and deletes on overlapping keys: every retrieve returns
    /// nothing or one complete entry inserted for that key, a task reads its own write of a key nobody
    /// deletes, and afterwards the store is consistent and usable.
    case concurrentMixedOperationsLoseNothing
    /// A store limited to two entries evicts the least recently used one when a third is inserted, and
    /// replacing an entry at the limit evicts nothing.
    case evictsLeastRecentlyUsedFirst
    /// A retrieve makes its entry the most recently used, so the next eviction takes another one.
    case retrieveRefreshesRecency
    /// After `removeAll` a store limited to two entries holds two new ones again (its limits count
    /// from zero), and a third still evicts the least recently used.
    case removeAllRestartsTheLimits

    /// What a ``StoreContract`` must provide for this case to run.
    public enum Requirement: Sendable {
        /// ``StoreContract/reopen``: a second store object on the same location.
        case reopen
        /// ``StoreContract/corruption``: a way to damage a stored entry.
        case corruption
        /// ``StoreContract/faults``: a way to make one kind of operation fail for real.
        case faults
        /// ``StoreContract/makeLimitedStore``: a store with a count limit and LRU eviction.
        case countLimit
    }

    /// The hook this case needs, if any.
    public var requirement: Requirement? {
        switch self {
        case .corruptEntryIsAMissAndIsRemoved, .storeStaysUsableAfterCorruptEntry: .corruption
        case .secondInstanceSeesInsertedValue, .secondInstanceSeesDeletion: .reopen
        case .failedRetrieveHasNoSideEffects, .failedInsertKeepsPreviousValue, .failedDeleteKeepsValue: .faults
        case .evictsLeastRecentlyUsedFirst, .retrieveRefreshesRecency, .removeAllRestartsTheLimits: .countLimit
        default: nil
        }
    }

    /// The cases every store runs: those that need no hook.
    public static var universal: [StoreContractCase] { allCases.filter { $0.requirement == nil } }

    /// The cases a store with the given hooks runs.
    public static func cases(with requirements: Set<Requirement>) -> [StoreContractCase] {
        allCases.filter { $0.requirement.map(requirements.contains) ?? true }
    }

    public var description: String { rawValue }
}

/// A behaviour of ``StoreContractCase`` that a store does not have.
public struct StoreContractError: Error, CustomStringConvertible {
    public var contractCase: StoreContractCase
    public var store: String
    public var message: String
    public var description: String { "\(store) violates \(contractCase): \(message)" }
}

/// Every case a store failed in ``StoreContract/verifyAll()``.
public struct StoreContractVerificationError: Error, CustomStringConvertible {
    public var violations: [StoreContractError]
    public var description: String { violations.map(\.description).joined(separator: "\n") }
}

/// The store contract, runnable unchanged against any `Store` — Strata's or your own.
///
/// ```swift
/// @Suite struct MyStoreTests {
///     static let contract = StoreContract(keys: ("a", "b"), values: (1, 2)) { MyStore(path: tempPath()) }
///
///     @Test(arguments: StoreContractCase.universal)
///     func contract(_ behaviour: StoreContractCase) async throws {
///         try await Self.contract.verify(behaviour)
///     }
/// }
/// ```
/// `makeStore` must return an empty store at a location of its own for every call (each case makes
/// one). Give ``reopen`` and ``corruption`` for persistent stores, ``faults`` for stores whose
/// operations can fail (files, databases) and ``makeLimitedStore`` for stores with a count limit, and
/// run ``applicableCases`` (or ``StoreContractCase/cases(with:)``) to include the cases that need them.
public struct StoreContract<S: Store>: Sendable where S.Value: Equatable {
    /// Damages stored entries, for the corrupt-entry cases.
    public struct Corruption: Sendable {
        /// Replaces the stored bytes of `key`'s entry with something the store cannot read.
        public var corrupt: @Sendable (S, S.Key) async throws -> Void
        /// Whether anything is still stored for `key` (a file, a row, a defaults key).
        public var isStored: @Sendable (S, S.Key) async throws -> Bool

        public init(
            corrupt: @escaping @Sendable (S, S.Key) async throws -> Void,
            isStored: @escaping @Sendable (S, S.Key) async throws -> Bool
        ) {
            self.corrupt = corrupt
            self.isStored = isStored
        }
    }

    /// Makes one kind of operation fail on a store while a body runs, then restores the store.
    ///
    /// Inject a real fault, not a mock: for a database, rename its table away from a second connection
    /// and back; for files, make the path unusable. The store must then throw a `StoreError` for that
    /// operation, and once the fault is lifted every entry must be exactly as before.
    public struct Faults: Sendable {
        /// Makes `operation` fail on `store` while `body` runs, then restores the store. It must run
        /// `body` exactly once and rethrow what `body` throws.
        public var inject: @Sendable (
            _ store: S, _ operation: StoreError.Operation, _ body: @Sendable () async throws -> Void
        ) async throws -> Void

        /// Creates the hook from a function that makes `operation` fail on `store` while `body` runs.
        public init(
            inject: @escaping @Sendable (
                _ store: S, _ operation: StoreError.Operation, _ body: @Sendable () async throws -> Void
            ) async throws -> Void
        ) {
            self.inject = inject
        }
    }

    /// Two distinct keys.
    public let keys: (S.Key, S.Key)
    /// Two distinct values.
    public let values: (S.Value, S.Value)
    /// Makes a new, empty store at a location of its own.
    public let makeStore: @Sendable () async throws -> S
    /// Opens a second store object on the same location as the given one.
    public var reopen: (@Sendable (S) async throws -> S)?
    /// How to damage an entry.
    public var corruption: Corruption?
    /// How to make operations fail, for the failed-operation cases.
    public var faults: Faults?
    /// Builds an empty store holding at most `countLimit` entries (least recently used evicted first).
    public var makeLimitedStore: (@Sendable (_ countLimit: Int) async throws -> S)?
    /// A third key, distinct from ``keys``, for the eviction cases (which need three keys in a store
    /// limited to two). When `nil`, one is derived for `String` keys (`keys.0` + `"#3"`) and `Int` keys.
    public var spareKey: S.Key?

    /// Creates a contract over two distinct keys and two distinct values.
    /// - Parameters:
    ///   - keys: two distinct keys.
    ///   - values: two distinct values.
    ///   - reopen: opens a second store object on the same location (persistent stores).
    ///   - corruption: damages a stored entry (stores that read bytes back).
    ///   - faults: makes one kind of operation fail for real (stores whose operations can fail).
    ///   - makeLimitedStore: builds an empty store with a count limit (stores with LRU eviction).
    ///   - spareKey: a third distinct key for the eviction cases, when it cannot be derived.
    ///   - makeStore: makes a new, empty store at a location of its own.
    public init(
        keys: (S.Key, S.Key), values: (S.Value, S.Value),
        reopen: (@Sendable (S) async throws -> S)? = nil,
        corruption: Corruption? = nil,
        faults: Faults? = nil,
        makeLimitedStore: (@Sendable (_ countLimit: Int) async throws -> S)? = nil,
        spareKey: S.Key? = nil,
        makeStore: @escaping @Sendable () async throws -> S
    ) {
        precondition(keys.0 != keys.1, "the contract needs two distinct keys")
        precondition(values.0 != values.1, "the contract needs two distinct values")
        precondition(spareKey.map { $0 != keys.0 && $0 != keys.1 } ?? true, "the spare key must differ from both keys")
        self.keys = keys
        self.values = values
        self.reopen = reopen
        self.corruption = corruption
        self.faults = faults
        self.makeLimitedStore = makeLimitedStore
        self.spareKey = spareKey
        self.makeStore = makeStore
    }

    /// The cases this contract can run, given the hooks it has.
    public var applicableCases: [StoreContractCase] {
        var requirements: Set<StoreContractCase.Requirement> = []
        if reopen != nil { requirements.insert(.reopen) }
        if corruption != nil { requirements.insert(.corruption) }
        if faults != nil { requirements.insert(.faults) }
        if makeLimitedStore != nil { requirements.insert(.countLimit) }
        return StoreContractCase.cases(with: requirements)
    }

    /// ``spareKey``, or one derived from ``keys`` for `String` and `Int` keys.
    private var thirdKey: S.Key? {
        if let spareKey { return spareKey }
        let candidates: [Any] = ["\(keys.0)#3", "\(keys.0)#3#3", 0, 1, 2]
        return candidates.lazy.compactMap { $0 as? S.Key }.first { $0 != keys.0 && $0 != keys.1 }
    }

    /// Runs every applicable case, reporting all violations together (for XCTest, or a one-line check).
    public func verifyAll() async throws {
        var violations: [StoreContractError] = []
        for contractCase in applicableCases {
            do {
                try await verify(contractCase)
            } catch let violation as StoreContractError {
                violations.append(violation)
            } catch {
                violations.append(StoreContractError(contractCase: contractCase, store: "\(S.self)", message: "threw \(error)"))
            }
        }
        if !violations.isEmpty { throw StoreContractVerificationError(violations: violations) }
    }

    /// Runs one case; throws ``StoreContractError`` when the store does not behave as the case
    /// says (or when the case needs a hook this contract lacks).
    public func verify(_ contractCase: StoreContractCase) async throws {
        if contractCase.requirement == .countLimit { return try await verifyEviction(contractCase) }
        let store = try await makeStore()
        let check = Checker(contractCase: contractCase, store: describe(store))
        let (key, otherKey) = keys
        let (value, otherValue) = values
        let first = CacheEntry(value: value, storedAt: Date(timeIntervalSinceReferenceDate: 800_000_000.123_456))
        let second = CacheEntry(value: otherValue, storedAt: Date(timeIntervalSinceReferenceDate: 800_003_600.654_321))

        switch contractCase {
        case .retrieveDeliversEmptyOnEmptyStore:
            try check.same(try await store.retrieve(key), nil, "retrieve on an empty store")

        case .retrieveHasNoSideEffectsOnEmptyStore:
            try check.same(try await store.retrieve(key), nil, "first retrieve on an empty store")
            try check.same(try await store.retrieve(key), nil, "second retrieve on an empty store")

        case .retrieveDeliversFoundValueOnNonEmptyStore:
            try await store.insert(first, for: key)
            try check.same(try await store.retrieve(key), first, "retrieve after insert")

        case .retrieveHasNoSideEffectsOnNonEmptyStore:
            try await store.insert(first, for: key)
            try check.same(try await store.retrieve(key), first, "first retrieve after insert")
            try check.same(try await store.retrieve(key), first, "second retrieve after insert")

        case .insertDeliversNoErrorOnEmptyStore:
            try await check.noError("insert into an empty store") { try await store.insert(first, for: key) }

        case .insertDeliversNoErrorOnNonEmptyStore:
            try await store.insert(first, for: key)
            try await check.noError("insert over an existing entry") { try await store.insert(second, for: key) }

        case .insertOverridesPreviouslyInsertedValue:
            try await store.insert(first, for: key)
            try await store.insert(second, for: key)
            try check.same(try await store.retrieve(key), second, "retrieve after a second insert")

        case .deleteDeliversNoErrorOnEmptyStore:
            try await check.noError("delete on an empty store") { try await store.delete(key) }

        case .deleteHasNoSideEffectsOnEmptyStore:
            try await store.delete(key)
            try check.same(try await store.retrieve(key), nil, "retrieve after delete on an empty store")

        case .deleteDeliversNoErrorOnNonEmptyStore:
            try await store.insert(first, for: key)
            try await check.noError("delete of an existing entry") { try await store.delete(key) }

        case .deleteEmptiesPreviouslyInsertedValue:
            try await store.insert(first, for: key)
            try await store.delete(key)
            try check.same(try await store.retrieve(key), nil, "retrieve after delete")

        case .keysAreIsolated:
            try await store.insert(first, for: key)
            try await store.insert(second, for: otherKey)
            try check.same(try await store.retrieve(key), first, "retrieve of the first key")
            try check.same(try await store.retrieve(otherKey), second, "retrieve of the second key")
            try await store.delete(key)
            try check.same(try await store.retrieve(key), nil, "retrieve of a deleted key")
            try check.same(try await store.retrieve(otherKey), second, "retrieve of the other key after a delete")

        case .storedAtAndValidatorsRoundTrip:
            let annotated = CacheEntry(
                value: value, storedAt: Date(timeIntervalSinceReferenceDate: 812_345_678.987_654_321),
                validators: CacheValidators(
                    etag: "\"v1-ü\"", lastModified: "Wed, 21 Oct 2015 07:28:00 GMT", maxAge: .milliseconds(86_400_250)))
            try await store.insert(annotated, for: key)
            let read = try await store.retrieve(key)
            try check.same(read?.storedAt, annotated.storedAt, "storedAt must round-trip exactly")
            try check.same(read?.validators, annotated.validators, "validators (etag, lastModified, maxAge) must round-trip")
            let zero = CacheEntry(value: value, storedAt: annotated.storedAt, validators: CacheValidators(maxAge: .zero))
            try await store.insert(zero, for: key)
            try check.same(try await store.retrieve(key)?.validators, zero.validators, "a zero maxAge (no-cache) must round-trip as zero, not as nil")

        case .refreshOfAMissingKeyReturnsFalseAndStoresNothing:
            let stamp = Date(timeIntervalSinceReferenceDate: 800_007_200.5)
            let validators = CacheValidators(etag: "\"missing\"", lastModified: nil, maxAge: .seconds(60))
            try check.same(
                try await store.refresh(key, storedAt: stamp, validators: validators), false,
                "refresh of a key never stored")
            try check.same(try await store.retrieve(key), nil, "retrieve after refreshing a key never stored")
            try await store.insert(second, for: otherKey)
            try await store.insert(first, for: key)
            try await store.delete(key)
            try check.same(
                try await store.refresh(key, storedAt: stamp, validators: validators), false,
                "refresh of a deleted key")
            try check.same(try await store.retrieve(key), nil, "retrieve after refreshing a deleted key (it must stay deleted)")
            try check.same(try await store.retrieve(otherKey), second, "retrieve of another key after refreshes of a missing key")

        case .refreshRestampsAndKeepsTheValue:
            let stored = CacheEntry(
                value: value, storedAt: Date(timeIntervalSinceReferenceDate: 800_000_000.25),
                validators: CacheValidators(etag: "\"v1\"", lastModified: "Wed, 21 Oct 2015 07:28:00 GMT", maxAge: .seconds(60)))
            try await store.insert(stored, for: key)
            try await store.insert(second, for: otherKey)
            let revalidated = CacheEntry(
                value: value, storedAt: Date(timeIntervalSinceReferenceDate: 800_086_400.75),
                validators: CacheValidators(etag: "\"v2-ü\"", lastModified: "Thu, 22 Oct 2015 08:00:00 GMT", maxAge: .milliseconds(2_500)))
            try check.same(
                try await store.refresh(key, storedAt: revalidated.storedAt, validators: revalidated.validators), true,
                "refresh of a stored key")
            try check.same(
                try await store.retrieve(key), revalidated,
                "retrieve after refresh (new storedAt and validators, the same value)")
            try check.same(try await store.retrieve(otherKey), second, "retrieve of another key after a refresh")
            let cleared = CacheEntry(value: value, storedAt: Date(timeIntervalSinceReferenceDate: 800_172_800.5), validators: .none)
            try check.same(
                try await store.refresh(key, storedAt: cleared.storedAt, validators: .none), true,
                "a second refresh of a stored key")
            try check.same(
                try await store.retrieve(key), cleared,
                "retrieve after a refresh without validators (the old etag, lastModified and maxAge must be gone)")

        case .removeAllEmptiesTheStoreAndKeepsItUsable:
            try await store.insert(first, for: key)
            try await store.insert(second, for: otherKey)
            try await check.noError("removeAll on a store holding two entries") { try await store.removeAll() }
            try check.same(try await store.retrieve(key), nil, "retrieve of the first key after removeAll")
            try check.same(try await store.retrieve(otherKey), nil, "retrieve of the second key after removeAll")
            try await check.noError("removeAll on an empty store") { try await store.removeAll() }
            try await store.insert(second, for: key)
            try check.same(try await store.retrieve(key), second, "retrieve of an entry inserted after removeAll")

        case .sideEffectsRunInCallOrder:
            try await store.insert(first, for: key)
            try await store.delete(key)
            try await store.insert(second, for: key)
            try await store.delete(otherKey)
            try check.same(try await store.retrieve(key), second, "insert, delete, insert: the last insert wins")

        case .concurrentInsertsLeaveOneCompleteValue:
            try await withThrowingTaskGroup(of: Void.self) { group in
                for round in 0..<40 {
                    let entry = round.isMultiple(of: 2) ? first : second
                    group.addTask { try await store.insert(entry, for: key) }
                }
                try await group.waitForAll()
            }
            let read = try await store.retrieve(key)
            try check.that(read == first || read == second, "after 40 concurrent inserts the entry is one of the inserted ones, got \(String(describing: read))")

        case .corruptEntryIsAMissAndIsRemoved:
            let corruption = try check.hook(corruption, "corruption")
            try await store.insert(first, for: key)
            try await corruption.corrupt(store, key)
            try check.same(try await store.retrieve(key), nil, "retrieve of a corrupt entry")
            try check.that(try await !corruption.isStored(store, key), "the corrupt entry is still stored after retrieve")

        case .storeStaysUsableAfterCorruptEntry:
            let corruption = try check.hook(corruption, "corruption")
            try await store.insert(first, for: key)
            try await store.insert(second, for: otherKey)
            try await corruption.corrupt(store, key)
            _ = try await store.retrieve(key)
            try check.same(try await store.retrieve(otherKey), second, "another key after a corrupt entry")
            try await store.insert(second, for: key)
            try check.same(try await store.retrieve(key), second, "insert after a corrupt entry")

        case .secondInstanceSeesInsertedValue:
            let reopen = try check.hook(reopen, "reopen")
            let other = try await reopen(store)
            try await store.insert(first, for: key)
            try check.same(try await other.retrieve(key), first, "retrieve through a second instance")
            try await other.insert(second, for: key)
            try check.same(try await store.retrieve(key), second, "retrieve of the second instance's write")

        case .secondInstanceSeesDeletion:
            let reopen = try check.hook(reopen, "reopen")
            let other = try await reopen(store)
            try await store.insert(first, for: key)
            _ = try await other.retrieve(key)
            try await other.delete(key)
            try check.same(try await store.retrieve(key), nil, "retrieve after the second instance deleted")

        case .failedRetrieveHasNoSideEffects:
            let faults = try check.hook(faults, "faults")
            try await store.insert(first, for: key)
            try await check.failsUnderFault(faults, store: store, operation: .retrieve, key: key) {
                try await store.retrieve(key).map { "returned \($0)" } ?? "returned nil"
            }
            try check.same(try await store.retrieve(key), first, "retrieve once the retrieve fault was lifted (the failed retrieve must not touch the entry)")

        case .failedInsertKeepsPreviousValue:
            let faults = try check.hook(faults, "faults")
            try await store.insert(first, for: key)
            try await check.failsUnderFault(faults, store: store, operation: .insert, key: key) {
                try await store.insert(second, for: key)
                return "returned normally"
            }
            try check.same(try await store.retrieve(key), first, "retrieve once the insert fault was lifted (a failed insert must keep the previous entry)")

        case .failedDeleteKeepsValue:
            let faults = try check.hook(faults, "faults")
            try await store.insert(first, for: key)
            try await check.failsUnderFault(faults, store: store, operation: .delete, key: key) {
                try await store.delete(key)
                return "returned normally"
            }
            try check.same(try await store.retrieve(key), first, "retrieve once the delete fault was lifted (a failed delete must keep the entry)")

        case .concurrentMixedOperationsLoseNothing:
            try await verifyConcurrentMixedOperations(on: store, check: check)

        case .evictsLeastRecentlyUsedFirst, .retrieveRefreshesRecency, .removeAllRestartsTheLimits:
            preconditionFailure("handled by verifyEviction")
        }
    }

    /// Tasks that each insert, retrieve and delete on two keys at once: `keys.0` is churned (inserted and
    /// deleted), `keys.1` is only ever inserted, so it must never read as missing once written.
    private func verifyConcurrentMixedOperations(on store: S, check: Checker) async throws {
        let (churnedKey, keptKey) = keys
        let (value, otherValue) = values
        func entry(_ value: S.Value, _ offset: Double, _ tag: String) -> CacheEntry<S.Value> {
            CacheEntry(
                value: value, storedAt: Date(timeIntervalSinceReferenceDate: 800_000_000 + offset),
                validators: CacheValidators(etag: "\"\(tag)\"", lastModified: nil))
        }
        // Every entry differs from the others in value or metadata, so a torn mix of two is recognisable.
        let churned = [entry(value, 1.25, "churned-1"), entry(otherValue, 2.5, "churned-2")]
        let kept = [entry(value, 3.75, "kept-1"), entry(otherValue, 5.125, "kept-2")]
        let tasks = 24

        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<tasks {
                group.addTask {
                    let context = "in task \(task) of \(tasks) running at once"
                    try await check.noError("insert of '\(churnedKey)' \(context)") {
                        try await store.insert(churned[task % 2], for: churnedKey)
                    }
                    try await check.noError("insert of '\(keptKey)' \(context)") {
                        try await store.insert(kept[task % 2], for: keptKey)
                    }
                    try await check.read(store, keptKey, among: kept, mayBeMissing: false, "right after this task inserted it \(context)")
                    try await check.read(store, churnedKey, among: churned, mayBeMissing: true, context)
                    switch task % 3 {
                    case 0:
                        try await check.noError("delete of '\(churnedKey)' \(context)") { try await store.delete(churnedKey) }
                    case 1:
                        try await check.noError("insert of '\(churnedKey)' \(context)") {
                            try await store.insert(churned[(task + 1) % 2], for: churnedKey)
                        }
                    default:
                        try await check.read(store, churnedKey, among: churned, mayBeMissing: true, context)
                    }
                    try await check.read(store, churnedKey, among: churned, mayBeMissing: true, context)
                    try await check.read(store, keptKey, among: kept, mayBeMissing: false, context)
                }
            }
            try await group.waitForAll()
        }

        let settled = try await check.read(store, churnedKey, among: churned, mayBeMissing: true, "after all tasks finished")
        try check.same(try await store.retrieve(churnedKey), settled, "a second retrieve of '\(churnedKey)' after all tasks finished")
        try await check.read(store, keptKey, among: kept, mayBeMissing: false, "after all tasks finished")
        let final = entry(value, 7.875, "final")
        try await store.insert(final, for: churnedKey)
        try check.same(try await store.retrieve(churnedKey), final, "retrieve of '\(churnedKey)' inserted after the concurrent operations")
        try await store.delete(keptKey)
        try check.same(try await store.retrieve(keptKey), nil, "retrieve of '\(keptKey)' deleted after the concurrent operations")
        try check.same(try await store.retrieve(churnedKey), final, "retrieve of '\(churnedKey)' after '\(keptKey)' was deleted")
    }

    /// The count-limit cases: three keys in a store limited to two entries.
    private func verifyEviction(_ contractCase: StoreContractCase) async throws {
        let makeLimitedStore = try Checker(contractCase: contractCase, store: "\(S.self)").hook(makeLimitedStore, "makeLimitedStore")
        let store = try await makeLimitedStore(2)
        let check = Checker(contractCase: contractCase, store: describe(store))
        guard let c = thirdKey else {
            throw check.fail("this case needs a third key; give the contract's `spareKey` (it is derived only for String and Int keys)")
        }
        let (a, b) = keys
        let (value, otherValue) = values
        let first = CacheEntry(value: value, storedAt: Date(timeIntervalSinceReferenceDate: 800_000_000.5))
        let second = CacheEntry(value: otherValue, storedAt: Date(timeIntervalSinceReferenceDate: 800_000_001.5))
        let third = CacheEntry(value: value, storedAt: Date(timeIntervalSinceReferenceDate: 800_000_002.5), validators: CacheValidators(etag: "\"third\""))

        switch contractCase {
        case .evictsLeastRecentlyUsedFirst:
            try await store.insert(first, for: a)
            try await store.insert(second, for: b)
            try await store.insert(third, for: c)
            try check.same(try await store.retrieve(a), nil, "retrieve of '\(a)', the least recently used of three entries inserted into a store limited to 2 (it should have been evicted)")
            try check.same(try await store.retrieve(b), second, "retrieve of '\(b)', one of the two most recently inserted entries")
            try check.same(try await store.retrieve(c), third, "retrieve of '\(c)', the most recently inserted entry")
            let replacement = CacheEntry(value: otherValue, storedAt: Date(timeIntervalSinceReferenceDate: 800_000_003.5))
            try await store.insert(replacement, for: c)
            try check.same(try await store.retrieve(b), second, "retrieve of '\(b)' after '\(c)' was replaced in a full store (replacing an entry must not evict another)")
            try check.same(try await store.retrieve(c), replacement, "retrieve of '\(c)' after it was replaced in a full store")

        case .retrieveRefreshesRecency:
            try await store.insert(first, for: a)
            try await store.insert(second, for: b)
            try check.same(try await store.retrieve(a), first, "retrieve of '\(a)' in a full store")
            try await store.insert(third, for: c)
            try check.same(try await store.retrieve(a), first, "retrieve of '\(a)' after '\(c)' was inserted into a store limited to 2 (reading '\(a)' just before should have made '\(b)' the least recently used)")
            try check.same(try await store.retrieve(b), nil, "retrieve of '\(b)', least recently used once '\(a)' was read (it should have been evicted when '\(c)' was inserted)")
            try check.same(try await store.retrieve(c), third, "retrieve of '\(c)', the most recently inserted entry")

        case .removeAllRestartsTheLimits:
            try await store.insert(first, for: a)
            try await store.insert(second, for: b)
            try await store.removeAll()
            try await store.insert(first, for: c)
            try await store.insert(second, for: a)
            try check.same(try await store.retrieve(c), first, "retrieve of '\(c)', one of two entries inserted after removeAll into a store limited to 2 (entries removed by removeAll must not count against the limit)")
            try check.same(try await store.retrieve(a), second, "retrieve of '\(a)', the other of two entries inserted after removeAll")
            try check.same(try await store.retrieve(b), nil, "retrieve of '\(b)', removed by removeAll")
            try await store.insert(third, for: b)
            try check.same(try await store.retrieve(c), nil, "retrieve of '\(c)', least recently used when a third entry was inserted after removeAll (it should have been evicted)")
            try check.same(try await store.retrieve(a), second, "retrieve of '\(a)' after the third insert")
            try check.same(try await store.retrieve(b), third, "retrieve of '\(b)', the most recently inserted entry")

        default:
            preconditionFailure("\(contractCase) is not a count-limit case")
        }
    }

    private func describe(_ store: S) -> String {
        (store as? CustomStringConvertible)?.description ?? "\(S.self)"
    }

    private struct Checker {
        let contractCase: StoreContractCase
        let store: String

        func fail(_ message: String) -> StoreContractError {
            StoreContractError(contractCase: contractCase, store: store, message: message)
        }

        func that(_ condition: Bool, _ message: @autoclosure () -> String) throws {
            if !condition { throw fail(message()) }
        }

        func same<T: Equatable>(_ actual: T?, _ expected: T?, _ what: String) throws {
            if actual != expected {
                throw fail("\(what): expected \(expected.map { "\($0)" } ?? "nil"), got \(actual.map { "\($0)" } ?? "nil")")
            }
        }

        func noError(_ what: String, _ body: () async throws -> Void) async throws {
            do { try await body() } catch { throw fail("\(what) threw \(error)") }
        }

        func hook<T>(_ hook: T?, _ name: String) throws -> T {
            guard let hook else { throw fail("this case needs the contract's `\(name)` hook, which was not given") }
            return hook
        }

        /// Retrieves `key` and checks it is one of `allowed` (or missing, when that is allowed).
        @discardableResult
        func read(
            _ store: S, _ key: S.Key, among allowed: [CacheEntry<S.Value>], mayBeMissing: Bool, _ context: String
        ) async throws -> CacheEntry<S.Value>? {
            let read: CacheEntry<S.Value>?
            do {
                read = try await store.retrieve(key)
            } catch {
                throw fail("retrieve of '\(key)' \(context) threw \(error)")
            }
            guard let read else {
                if mayBeMissing { return nil }
                throw fail("retrieve of '\(key)' \(context) returned nil, but no task deletes that key: an insert was lost")
            }
            guard allowed.contains(read) else {
                throw fail("retrieve of '\(key)' \(context) returned \(read), which is none of the entries inserted for that key (a torn, stale or other key's entry)")
            }
            return read
        }

        /// Runs `operation` under the fault for `kind`; it must throw a `StoreError` for that operation
        /// and key. `operation` describes what it returned when it did not throw.
        func failsUnderFault(
            _ faults: Faults, store: S, operation kind: StoreError.Operation, key: S.Key,
            _ operation: @escaping @Sendable () async throws -> String
        ) async throws {
            let outcome = Locked(FaultOutcome())
            do {
                try await faults.inject(store, kind) {
                    let result: FaultOutcome.Result
                    do {
                        result = .returned(try await operation())
                    } catch let error as StoreError {
                        result = .storeError(error)
                    } catch {
                        result = .otherError("\(type(of: error)): \(error)")
                    }
                    outcome.withLock { $0.runs += 1; $0.result = result }
                }
            } catch {
                throw fail("the `faults` hook threw \(error) around \(kind) (it must run the operation once and restore the store)")
            }
            let (runs, result) = outcome.withLock { ($0.runs, $0.result) }
            let what = "\(kind) of '\(key)' under an injected \(kind) fault"
            guard runs == 1, let result else {
                throw fail("the `faults` hook ran the \(kind) \(runs) times; it must run it exactly once")
            }
            switch result {
            case .returned(let description):
                throw fail("\(what) \(description) instead of throwing a StoreError")
            case .otherError(let description):
                throw fail("\(what) threw \(description), which is not a StoreError")
            case .storeError(let error):
                try that(error.operation == kind, "\(what) threw a StoreError for operation '\(error.operation.rawValue)', expected '\(kind.rawValue)': \(error)")
                try that(error.key == "\(key)", "\(what) threw a StoreError naming key \(error.key.map { "'\($0)'" } ?? "nil"), expected '\(key)': \(error)")
                try that(!error.reason.isEmpty, "\(what) threw a StoreError with no reason: \(error)")
            }
        }
    }

    /// What the operation did while its fault was injected.
    private struct FaultOutcome: Sendable {
        enum Result: Sendable {
            case returned(String)
            case storeError(StoreError)
            case otherError(String)
        }

        var runs = 0
        var result: Result?
    }
}
