import Foundation
import Strata

/// One behaviour every `Store` must have. Run them with ``StoreContract/verify(_:)``.
///
/// The first eleven are the classic store specs (Essential Feed's `FeedStoreSpecs`); the rest cover
/// key isolation, metadata, concurrency, corrupt entries and cross-instance visibility.
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
    case sideEffectsRunInCallOrder
    case concurrentInsertsLeaveOneCompleteValue
    case corruptEntryIsAMissAndIsRemoved
    case storeStaysUsableAfterCorruptEntry
    case secondInstanceSeesInsertedValue
    case secondInstanceSeesDeletion

    /// What a ``StoreContract`` must provide for this case to run.
    public enum Requirement: Sendable {
        /// ``StoreContract/reopen``: a second store object on the same location.
        case reopen
        /// ``StoreContract/corruption``: a way to damage a stored entry.
        case corruption
    }

    /// The hook this case needs, if any.
    public var requirement: Requirement? {
        switch self {
        case .corruptEntryIsAMissAndIsRemoved, .storeStaysUsableAfterCorruptEntry: .corruption
        case .secondInstanceSeesInsertedValue, .secondInstanceSeesDeletion: .reopen
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
public struct StoreContractViolation: Error, CustomStringConvertible {
    public var contractCase: StoreContractCase
    public var store: String
    public var message: String
    public var description: String { "\(store) violates \(contractCase): \(message)" }
}

/// Every case a store failed in ``StoreContract/verifyAll()``.
public struct StoreContractViolations: Error, CustomStringConvertible {
    public var violations: [StoreContractViolation]
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
/// one). Give ``reopen`` and ``corruption`` for persistent stores, and run
/// ``StoreContractCase/cases(with:)`` to include the cases that need them.
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

    public init(
        keys: (S.Key, S.Key), values: (S.Value, S.Value),
        reopen: (@Sendable (S) async throws -> S)? = nil,
        corruption: Corruption? = nil,
        makeStore: @escaping @Sendable () async throws -> S
    ) {
        precondition(keys.0 != keys.1, "the contract needs two distinct keys")
        precondition(values.0 != values.1, "the contract needs two distinct values")
        self.keys = keys
        self.values = values
        self.reopen = reopen
        self.corruption = corruption
        self.makeStore = makeStore
    }

    /// The cases this contract can run, given the hooks it has.
    public var applicableCases: [StoreContractCase] {
        var requirements: Set<StoreContractCase.Requirement> = []
        if reopen != nil { requirements.insert(.reopen) }
        if corruption != nil { requirements.insert(.corruption) }
        return StoreContractCase.cases(with: requirements)
    }

    /// Runs every applicable case, reporting all violations together (for XCTest, or a one-line check).
    public func verifyAll() async throws {
        var violations: [StoreContractViolation] = []
        for contractCase in applicableCases {
            do {
                try await verify(contractCase)
            } catch let violation as StoreContractViolation {
                violations.append(violation)
            } catch {
                violations.append(StoreContractViolation(contractCase: contractCase, store: "\(S.self)", message: "threw \(error)"))
            }
        }
        if !violations.isEmpty { throw StoreContractViolations(violations: violations) }
    }

    /// Runs one case; throws ``StoreContractViolation`` when the store does not behave as the case
    /// says (or when the case needs a hook this contract lacks).
    public func verify(_ contractCase: StoreContractCase) async throws {
        let store = try await makeStore()
        let check = Checker(contractCase: contractCase, store: describe(store))
        let (key, otherKey) = keys
        let (value, otherValue) = values
        let first = Cached(value: value, storedAt: Date(timeIntervalSinceReferenceDate: 800_000_000.123_456))
        let second = Cached(value: otherValue, storedAt: Date(timeIntervalSinceReferenceDate: 800_003_600.654_321))

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
            let annotated = Cached(
                value: value, storedAt: Date(timeIntervalSinceReferenceDate: 812_345_678.987_654_321),
                validators: CacheValidators(etag: "\"v1-ü\"", lastModified: "Wed, 21 Oct 2015 07:28:00 GMT"))
            try await store.insert(annotated, for: key)
            let read = try await store.retrieve(key)
            try check.same(read?.storedAt, annotated.storedAt, "storedAt must round-trip exactly")
            try check.same(read?.validators, annotated.validators, "validators must round-trip")

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
        }
    }

    private func describe(_ store: S) -> String {
        (store as? CustomStringConvertible)?.description ?? "\(S.self)"
    }

    private struct Checker {
        let contractCase: StoreContractCase
        let store: String

        func fail(_ message: String) -> StoreContractViolation {
            StoreContractViolation(contractCase: contractCase, store: store, message: message)
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
    }
}
