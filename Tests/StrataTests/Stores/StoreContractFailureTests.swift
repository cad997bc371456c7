import Foundation
import Testing
@_spi(StrataInternals) import Strata
import StrataTesting

/// Each new contract case, run against a store that is broken in the one way the case looks for, must
/// report a violation of that case. A contract case that cannot fail would be a defect.
@Suite("Store contract catches broken stores")
struct StoreContractFailureTests {
    // MARK: faults

    static func faultyContract(_ flaw: FaultyStore.Flaw, hook: FaultyStore.HookFlaw = .none) -> StoreContract<FaultyStore> {
        StoreContract(
            keys: ("a", "b"), values: (itemA, itemB),
            faults: .init { store, operation, body in try await store.failing(operation, hook: hook, body) }
        ) {
            FaultyStore(flaw: flaw)
        }
    }

    @Test("a store without flaws passes every fault case", arguments: StoreContractCase.allCases.filter { $0.requirement == .faults })
    func faultlessStorePasses(_ contractCase: StoreContractCase) async throws {
        try await Self.faultyContract(.none).verify(contractCase)
    }

    @Test("a flawed failure is reported as a violation of its case", arguments: [
        (FaultyStore.Flaw.failedRetrieveDeletes, StoreContractCase.failedRetrieveHasNoSideEffects, "once the retrieve fault was lifted"),
        (.failedInsertDeletesPrevious, .failedInsertKeepsPreviousValue, "a failed insert must keep the previous entry"),
        (.failedDeleteStillDeletes, .failedDeleteKeepsValue, "a failed delete must keep the entry"),
        (.swallowsFaults, .failedRetrieveHasNoSideEffects, "returned nil instead of throwing a StoreError"),
        (.swallowsFaults, .failedInsertKeepsPreviousValue, "returned normally instead of throwing a StoreError"),
        (.swallowsFaults, .failedDeleteKeepsValue, "returned normally instead of throwing a StoreError"),
        (.throwsUntypedErrors, .failedRetrieveHasNoSideEffects, "which is not a StoreError"),
        (.throwsUntypedErrors, .failedInsertKeepsPreviousValue, "which is not a StoreError"),
        (.throwsUntypedErrors, .failedDeleteKeepsValue, "which is not a StoreError"),
        (.misnamesTheOperation, .failedInsertKeepsPreviousValue, "for operation 'open', expected 'insert'"),
        (.forgetsTheKey, .failedDeleteKeepsValue, "naming key nil, expected 'a'"),
    ])
    func flawedFailureIsAViolation(_ flaw: FaultyStore.Flaw, _ contractCase: StoreContractCase, _ expected: String) async throws {
        let violation = try await #require(throws: StoreContractError.self) {
            try await Self.faultyContract(flaw).verify(contractCase)
        }
        #expect(violation.contractCase == contractCase)
        #expect(violation.description.contains(expected), "\(violation)")
    }

    @Test("a faults hook that does not run the operation once is reported", arguments: [
        (FaultyStore.HookFlaw.skipsBody, "ran the insert 0 times"),
        (.runsBodyTwice, "ran the insert 2 times"),
    ])
    func flawedHookIsAViolation(_ hook: FaultyStore.HookFlaw, _ expected: String) async throws {
        let violation = try await #require(throws: StoreContractError.self) {
            try await Self.faultyContract(.none, hook: hook).verify(.failedInsertKeepsPreviousValue)
        }
        #expect(violation.description.contains(expected), "\(violation)")
    }

    // MARK: concurrency

    @Test("a store damaged by overlapping operations fails the concurrent case")
    func unsynchronisedStoreFailsConcurrentCase() async throws {
        let contract = StoreContract(keys: ("a", "b"), values: (itemA, itemB)) { UnsynchronisedStore() }
        let violation = try await #require(throws: StoreContractError.self) {
            try await contract.verify(.concurrentMixedOperationsLoseNothing)
        }
        #expect(violation.contractCase == .concurrentMixedOperationsLoseNothing)
        #expect(violation.description.contains("none of the entries inserted for that key"), "\(violation)")
    }

    // MARK: metadata and refresh

    static func refreshContract(_ flaw: RefreshFlawedStore.Flaw) -> StoreContract<RefreshFlawedStore> {
        StoreContract(keys: ("a", "b"), values: (itemA, itemB)) { RefreshFlawedStore(flaw: flaw) }
    }

    @Test("a store without refresh flaws passes the metadata and refresh cases", arguments: [
        StoreContractCase.storedAtAndValidatorsRoundTrip, .refreshOfAMissingKeyReturnsFalseAndStoresNothing,
        .refreshRestampsAndKeepsTheValue,
    ])
    func unflawedRefreshPasses(_ contractCase: StoreContractCase) async throws {
        try await Self.refreshContract(.none).verify(contractCase)
    }

    @Test("a flawed refresh or lost metadata is reported as a violation of its case", arguments: [
        (RefreshFlawedStore.Flaw.dropsMaxAge, StoreContractCase.storedAtAndValidatorsRoundTrip, "maxAge) must round-trip"),
        (.zeroMaxAgeReadsAsNil, .storedAtAndValidatorsRoundTrip, "a zero maxAge (no-cache) must round-trip as zero"),
        (.dropsMaxAge, .refreshRestampsAndKeepsTheValue, "retrieve after refresh"),
        (.claimsMissingKeys, .refreshOfAMissingKeyReturnsFalseAndStoresNothing, "refresh of a key never stored: expected false, got true"),
        (.revivesDeleted, .refreshOfAMissingKeyReturnsFalseAndStoresNothing, "refresh of a deleted key: expected false, got true"),
        (.keepsOldStamp, .refreshRestampsAndKeepsTheValue, "retrieve after refresh (new storedAt"),
        (.keepsOldValidators, .refreshRestampsAndKeepsTheValue, "retrieve after refresh (new storedAt"),
        (.mergesValidators, .refreshRestampsAndKeepsTheValue, "the old etag, lastModified and maxAge must be gone"),
        (.restampsEveryKey, .refreshRestampsAndKeepsTheValue, "retrieve of another key after a refresh"),
        (.replacesValue, .refreshRestampsAndKeepsTheValue, "the same value"),
        (.reportsFalse, .refreshRestampsAndKeepsTheValue, "refresh of a stored key: expected true, got false"),
    ])
    func flawedRefreshIsAViolation(_ flaw: RefreshFlawedStore.Flaw, _ contractCase: StoreContractCase, _ expected: String) async throws {
        let violation = try await #require(throws: StoreContractError.self) {
            try await Self.refreshContract(flaw).verify(contractCase)
        }
        #expect(violation.contractCase == contractCase)
        #expect(violation.description.contains(expected), "\(violation)")
    }

    // MARK: count limit

    @Test("a store that ignores its limit fails the eviction case")
    func unlimitedStoreFailsEviction() async throws {
        let contract = StoreContract(
            keys: ("a", "b"), values: (itemA, itemB),
            makeLimitedStore: { _ in MemoryStore<String, Item>() }
        ) { MemoryStore<String, Item>() }
        let violation = try await #require(throws: StoreContractError.self) {
            try await contract.verify(.evictsLeastRecentlyUsedFirst)
        }
        #expect(violation.contractCase == .evictsLeastRecentlyUsedFirst)
        #expect(violation.description.contains("it should have been evicted"), "\(violation)")
    }

    @Test("a first-in-first-out store passes eviction but fails recency")
    func fifoStoreFailsRecency() async throws {
        let contract = StoreContract(
            keys: ("a", "b"), values: (itemA, itemB),
            makeLimitedStore: { FIFOStore(countLimit: $0) }
        ) { FIFOStore(countLimit: .max) }
        try await contract.verify(.evictsLeastRecentlyUsedFirst)
        let violation = try await #require(throws: StoreContractError.self) {
            try await contract.verify(.retrieveRefreshesRecency)
        }
        #expect(violation.contractCase == .retrieveRefreshesRecency)
        #expect(violation.description.contains("reading 'a' just before"), "\(violation)")
    }

    @Test("eviction cases need a third key: derived for String keys, otherwise the spare key")
    func thirdKey() async throws {
        struct Name: Hashable, Sendable { var text: String }
        let withoutSpare = StoreContract<MemoryStore<Name, Item>>(
            keys: (Name(text: "a"), Name(text: "b")), values: (itemA, itemB),
            makeLimitedStore: { MemoryStore(countLimit: $0) }
        ) { MemoryStore() }
        let violation = try await #require(throws: StoreContractError.self) {
            try await withoutSpare.verify(.retrieveRefreshesRecency)
        }
        #expect(violation.description.contains("spareKey"))

        var withSpare = withoutSpare
        withSpare.spareKey = Name(text: "c")
        try await withSpare.verify(.retrieveRefreshesRecency)
        try await withSpare.verify(.evictsLeastRecentlyUsedFirst)
    }
}

/// A memory store whose operations fail while a fault is injected, with one chosen flaw in how it fails.
final class FaultyStore: Store, Sendable {
    enum Flaw: String, Sendable, CustomTestStringConvertible {
        case none, failedRetrieveDeletes, failedInsertDeletesPrevious, failedDeleteStillDeletes
        case swallowsFaults, throwsUntypedErrors, misnamesTheOperation, forgetsTheKey
        var testDescription: String { rawValue }
    }

    /// Flaws of the contract's `faults` hook rather than of the store.
    enum HookFlaw: String, Sendable, CustomTestStringConvertible {
        case none, skipsBody, runsBodyTwice
        var testDescription: String { rawValue }
    }

    struct Untyped: Error {}

    let flaw: Flaw
    private let entries = Locked<[String: CacheEntry<Item>]>([:])
    private let fault = Locked<StoreError.Operation?>(nil)

    init(flaw: Flaw) { self.flaw = flaw }

    func failing(_ operation: StoreError.Operation, hook: HookFlaw, _ body: @Sendable () async throws -> Void) async throws {
        fault.withLock { $0 = operation }
        defer { fault.withLock { $0 = nil } }
        switch hook {
        case .none: try await body()
        case .skipsBody: break
        case .runsBodyTwice: try await body(); try await body()
        }
    }

    /// The error of a failed `operation`, shaped by the flaw; `nil` when the flaw swallows it.
    private func failure(_ operation: StoreError.Operation, _ key: String) -> (any Error)? {
        guard fault.withLock({ $0 }) == operation else { return nil }
        switch flaw {
        case .swallowsFaults: return nil
        case .throwsUntypedErrors: return Untyped()
        case .misnamesTheOperation: return StoreError(store: "FaultyStore", operation: .open, key: key, reason: "injected")
        case .forgetsTheKey: return StoreError(store: "FaultyStore", operation: operation, key: nil, reason: "injected")
        default: return StoreError(store: "FaultyStore", operation: operation, key: key, reason: "injected fault")
        }
    }

    private var isFaulted: Bool { fault.withLock { $0 != nil } }

    func retrieve(_ key: String) async throws -> CacheEntry<Item>? {
        if let error = failure(.retrieve, key) {
            if flaw == .failedRetrieveDeletes { entries.withLock { $0[key] = nil } }
            throw error
        }
        if isFaulted, flaw == .swallowsFaults { return nil }
        return entries.withLock { $0[key] }
    }

    func insert(_ entry: CacheEntry<Item>, for key: String) async throws {
        if let error = failure(.insert, key) {
            if flaw == .failedInsertDeletesPrevious { entries.withLock { $0[key] = nil } }
            throw error
        }
        if isFaulted, flaw == .swallowsFaults { return }
        entries.withLock { $0[key] = entry }
    }

    func delete(_ key: String) async throws {
        if let error = failure(.delete, key) {
            if flaw == .failedDeleteStillDeletes { entries.withLock { $0[key] = nil } }
            throw error
        }
        if isFaulted, flaw == .swallowsFaults { return }
        entries.withLock { $0[key] = nil }
    }
}

/// Behaves like a dictionary shared between threads without a lock: once two operations overlap its
/// storage is damaged, and every later read returns a torn entry (the right value with another date).
/// Its first operation waits until a second one begins, so the overlap is certain, not left to timing.
final class UnsynchronisedStore: Store, Sendable {
    private struct State: Sendable {
        var entries: [String: CacheEntry<Item>] = [:]
        var inFlight = 0
        var started = 0
        var damaged = false
        var firstOperation: CheckedContinuation<Void, Never>?
    }

    private let state = Locked(State())

    private func begin() async {
        await withCheckedContinuation { (arrival: CheckedContinuation<Void, Never>) in
            let released: [CheckedContinuation<Void, Never>] = state.withLock { state in
                state.inFlight += 1
                state.started += 1
                if state.inFlight > 1 { state.damaged = true }
                if state.started == 1 {
                    state.firstOperation = arrival
                    return []
                }
                defer { state.firstOperation = nil }
                return [state.firstOperation, arrival].compactMap { $0 }
            }
            for continuation in released { continuation.resume() }
        }
    }

    private func end() { state.withLock { $0.inFlight -= 1 } }

    func retrieve(_ key: String) async throws -> CacheEntry<Item>? {
        await begin()
        defer { end() }
        return state.withLock { state in
            guard var entry = state.entries[key] else { return nil }
            if state.damaged { entry.storedAt = .distantPast }
            return entry
        }
    }

    func insert(_ entry: CacheEntry<Item>, for key: String) async throws {
        await begin()
        defer { end() }
        state.withLock { $0.entries[key] = entry }
    }

    func delete(_ key: String) async throws {
        await begin()
        defer { end() }
        state.withLock { $0.entries[key] = nil }
    }
}

/// Evicts in insertion order and ignores reads: right for "evicts the oldest", wrong for recency.
final class FIFOStore: Store, Sendable {
    private let countLimit: Int
    private let entries = Locked<[(key: String, entry: CacheEntry<Item>)]>([])

    init(countLimit: Int) { self.countLimit = countLimit }

    func retrieve(_ key: String) async throws -> CacheEntry<Item>? {
        entries.withLock { $0.first { $0.key == key }?.entry }
    }

    func insert(_ entry: CacheEntry<Item>, for key: String) async throws {
        entries.withLock { entries in
            if let index = entries.firstIndex(where: { $0.key == key }) {
                entries[index].entry = entry
            } else {
                entries.append((key, entry))
                if entries.count > countLimit { entries.removeFirst() }
            }
        }
    }

    func delete(_ key: String) async throws { entries.withLock { $0.removeAll { $0.key == key } } }
}

/// A memory store with one chosen flaw in how it keeps metadata or refreshes entries.
final class RefreshFlawedStore: Store, Sendable {
    enum Flaw: String, Sendable, CustomTestStringConvertible {
        case none
        /// Forgets `maxAge` on every write (a store whose schema has no column for it).
        case dropsMaxAge
        /// Reads a zero `maxAge` back as `nil` (zero stored as "no value").
        case zeroMaxAgeReadsAsNil
        /// Reports `true` for a key it has no entry for.
        case claimsMissingKeys
        /// Deletes softly, and a refresh brings a deleted entry back.
        case revivesDeleted
        /// Updates the validators but not `storedAt`.
        case keepsOldStamp
        /// Updates `storedAt` but not the validators.
        case keepsOldValidators
        /// Keeps old validators where the new ones are `nil`.
        case mergesValidators
        /// Re-stamps every entry, not just the key's.
        case restampsEveryKey
        /// Replaces the value with another one.
        case replacesValue
        /// Re-stamps but reports `false`.
        case reportsFalse
        var testDescription: String { rawValue }
    }

    private struct Entry: Sendable {
        var cached: CacheEntry<Item>
        var deleted = false
    }

    let flaw: Flaw
    private let entries = Locked<[String: Entry]>([:])

    init(flaw: Flaw) { self.flaw = flaw }

    func retrieve(_ key: String) async throws -> CacheEntry<Item>? {
        entries.withLock { entries in
            guard let entry = entries[key], !entry.deleted else { return nil }
            var cached = entry.cached
            if flaw == .zeroMaxAgeReadsAsNil, cached.validators.maxAge == .zero { cached.validators.maxAge = nil }
            return cached
        }
    }

    func insert(_ entry: CacheEntry<Item>, for key: String) async throws {
        var entry = entry
        if flaw == .dropsMaxAge { entry.validators.maxAge = nil }
        entries.withLock { $0[key] = Entry(cached: entry) }
    }

    func delete(_ key: String) async throws {
        entries.withLock { entries in
            if flaw == .revivesDeleted { entries[key]?.deleted = true } else { entries[key] = nil }
        }
    }

    func refresh(_ key: String, storedAt: Date, validators: CacheValidators) async throws -> Bool {
        var validators = validators
        if flaw == .dropsMaxAge { validators.maxAge = nil }
        return entries.withLock { entries in
            guard var entry = entries[key] else { return flaw == .claimsMissingKeys }
            if entry.deleted, flaw != .revivesDeleted { return false }
            entry.deleted = false
            if flaw != .keepsOldStamp { entry.cached.storedAt = storedAt }
            switch flaw {
            case .keepsOldValidators:
                break
            case .mergesValidators:
                let old = entry.cached.validators
                entry.cached.validators = CacheValidators(
                    etag: validators.etag ?? old.etag, lastModified: validators.lastModified ?? old.lastModified,
                    maxAge: validators.maxAge ?? old.maxAge)
            default:
                entry.cached.validators = validators
            }
            if flaw == .replacesValue { entry.cached.value = entry.cached.value == itemA ? itemB : itemA }
            entries[key] = entry
            if flaw == .restampsEveryKey {
                for other in entries.keys where other != key { entries[other]?.cached.storedAt = storedAt }
            }
            return flaw != .reportsFalse
        }
    }
}

extension FaultyStore {
    func removeAll() async throws { entries.withLock { $0 = [:] } }
}

extension UnsynchronisedStore {
    func removeAll() async throws {
        await begin()
        defer { end() }
        state.withLock { $0.entries = [:] }
    }
}

extension FIFOStore {
    func removeAll() async throws { entries.withLock { $0 = [] } }
}

extension RefreshFlawedStore {
    func removeAll() async throws { entries.withLock { $0 = [:] } }
}
