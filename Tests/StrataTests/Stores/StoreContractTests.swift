import Foundation
import Testing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

/// Every Strata store runs the same contract, unchanged.
@Suite("Store contract")
struct StoreContractTests {
    static let memory = StoreContract(
        keys: ("a", "b"), values: (itemA, itemB),
        makeLimitedStore: { countLimit in MemoryStore<String, Item>(countLimit: countLimit) }
    ) {
        MemoryStore<String, Item>()
    }

    @Test("MemoryStore", arguments: memory.applicableCases)
    func memoryStore(_ behaviour: StoreContractCase) async throws {
        try await Self.memory.verify(behaviour)
    }

    /// Each case gets a directory of its own; `directories` keeps them alive for the case and removes
    /// them when the suite instance goes away.
    static let fileCorruption = StoreContract<FileStore<Item>>.Corruption(
        corrupt: { store, key in try Data("garbage".utf8).write(to: store.fileURL(for: key)) },
        isStored: { store, key in FileManager.default.fileExists(atPath: store.fileURL(for: key).path) })

    static let file = StoreContract<FileStore<Item>>(
        keys: ("feed", "../../etc/passwd"), values: (itemA, itemB),
        reopen: { store in FileStore(directory: store.directory) },
        corruption: fileCorruption,
        faults: .init { store, _, body in try await UnusableDirectory.while(store.directory, body) },
        makeLimitedStore: { countLimit in
            FileStore(directory: try TemporaryDirectory.scoped(), countLimit: countLimit, logger: quietLogger)
        }
    ) {
        FileStore<Item>(directory: try TemporaryDirectory.scoped(), logger: quietLogger)
    }

    @Test("FileStore", arguments: file.applicableCases)
    func fileStore(_ behaviour: StoreContractCase) async throws {
        try await TemporaryDirectory.withScope {
            try await Self.file.verify(behaviour)
        }
    }

    /// The whole contract again with limits on every store, so every case runs through the index.
    static let limitedFile = StoreContract<FileStore<Item>>(
        keys: ("feed", "../../etc/passwd"), values: (itemA, itemB),
        reopen: { store in
            FileStore(directory: store.directory, countLimit: store.countLimit, byteLimit: store.byteLimit, logger: quietLogger)
        },
        corruption: fileCorruption,
        faults: .init { store, _, body in try await UnusableDirectory.while(store.directory, body) },
        makeLimitedStore: { countLimit in
            FileStore(directory: try TemporaryDirectory.scoped(), countLimit: countLimit, byteLimit: 1 << 20, logger: quietLogger)
        }
    ) {
        FileStore<Item>(directory: try TemporaryDirectory.scoped(), countLimit: 100, byteLimit: 1 << 20, logger: quietLogger)
    }

    @Test("FileStore with limits", arguments: limitedFile.applicableCases)
    func limitedFileStore(_ behaviour: StoreContractCase) async throws {
        try await TemporaryDirectory.withScope {
            try await Self.limitedFile.verify(behaviour)
        }
    }

    static let userDefaults = StoreContract<UserDefaultsStore<Item>>(
        keys: ("feed", "posts/1"), values: (itemA, itemB),
        reopen: { store in UserDefaultsStore(suiteName: store.suiteName) },
        corruption: .init(
            corrupt: { store, key in UserDefaults(suiteName: store.suiteName)!.set(Data([0, 1, 2]), forKey: store.keyPrefix + key) },
            isStored: { store, key in UserDefaults(suiteName: store.suiteName)!.object(forKey: store.keyPrefix + key) != nil })
    ) {
        UserDefaultsStore<Item>(suiteName: UserDefaultsSuite.scoped())
    }

    @Test("UserDefaultsStore", arguments: userDefaults.applicableCases)
    func userDefaultsStore(_ behaviour: StoreContractCase) async throws {
        try await UserDefaultsSuite.withScope {
            try await Self.userDefaults.verify(behaviour)
        }
    }

    @Test("a store that breaks the contract fails it, naming the case")
    func brokenStoreFailsTheContract() async throws {
        let contract = StoreContract(keys: ("a", "b"), values: (itemA, itemB)) { ForgetfulStore() }
        let violation = try await #require(throws: StoreContractError.self) {
            try await contract.verify(.insertOverridesPreviouslyInsertedValue)
        }
        #expect(violation.contractCase == .insertOverridesPreviouslyInsertedValue)
        #expect(violation.description.contains("second insert"))
        // The cases it does satisfy pass.
        try await contract.verify(.retrieveDeliversEmptyOnEmptyStore)
    }

    @Test("a case that needs a missing hook fails instead of passing silently")
    func missingHookFails() async throws {
        await #expect(throws: StoreContractError.self) {
            try await Self.memory.verify(.secondInstanceSeesInsertedValue)
        }
        await #expect(throws: StoreContractError.self) {
            try await Self.userDefaults.verify(.failedInsertKeepsPreviousValue)
        }
        await #expect(throws: StoreContractError.self) {
            try await Self.userDefaults.verify(.evictsLeastRecentlyUsedFirst)
        }
        #expect(Self.memory.applicableCases == StoreContractCase.universal + [.evictsLeastRecentlyUsedFirst, .retrieveRefreshesRecency, .removeAllRestartsTheLimits])
        #expect(Self.file.applicableCases == StoreContractCase.allCases)
        #expect(Self.limitedFile.applicableCases == StoreContractCase.allCases)
        #expect(Self.userDefaults.applicableCases == StoreContractCase.allCases.filter { ![.faults, .countLimit].contains($0.requirement) })
    }

    @Test("every new case has a requirement or is universal", arguments: [
        (StoreContractCase.failedRetrieveHasNoSideEffects, StoreContractCase.Requirement?.some(.faults)),
        (.failedInsertKeepsPreviousValue, .faults), (.failedDeleteKeepsValue, .faults),
        (.concurrentMixedOperationsLoseNothing, nil),
        (.evictsLeastRecentlyUsedFirst, .countLimit), (.retrieveRefreshesRecency, .countLimit), (.removeAllRestartsTheLimits, .countLimit),
    ])
    func requirements(_ contractCase: StoreContractCase, _ requirement: StoreContractCase.Requirement?) {
        #expect(contractCase.requirement == requirement)
    }
}

/// Makes a directory unusable for real, even for root (which ignores permissions): the directory is
/// moved aside and a symbolic link pointing at itself takes its place, so every open, rename and
/// unlink inside it fails with `ELOOP`. The directory is put back afterwards.
enum UnusableDirectory {
    static func `while`(_ directory: URL, _ body: @Sendable () async throws -> Void) async throws {
        let path = directory.path
        let aside = path + ".aside"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        try FileManager.default.moveItem(atPath: path, toPath: aside)
        try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: directory.lastPathComponent)
        defer {
            try? FileManager.default.removeItem(atPath: path)
            try? FileManager.default.moveItem(atPath: aside, toPath: path)
        }
        try await body()
    }
}

/// Keeps only the first value ever inserted for a key: breaks "insert overrides".
final class ForgetfulStore: Store, Sendable {
    private let entries = Locked<[String: CacheEntry<Item>]>([:])
    func retrieve(_ key: String) async throws -> CacheEntry<Item>? { entries.withLock { $0[key] } }
    func insert(_ entry: CacheEntry<Item>, for key: String) async throws {
        entries.withLock { if $0[key] == nil { $0[key] = entry } }
    }
    func delete(_ key: String) async throws { entries.withLock { $0[key] = nil } }
}

extension TemporaryDirectory {
    @TaskLocal static var scope: Locked<[TemporaryDirectory]>?

    /// A new directory that lives until the enclosing ``withScope(_:)`` ends.
    static func scoped() throws -> URL {
        let directory = try TemporaryDirectory()
        scope?.withLock { $0.append(directory) }
        return directory.url
    }

    /// Runs `body`; every directory made by ``scoped()`` inside it is removed afterwards.
    static func withScope(_ body: () async throws -> Void) async throws {
        let directories = Locked<[TemporaryDirectory]>([])
        defer { directories.withLock { $0.forEach { $0.remove() }; $0 = [] } }
        try await $scope.withValue(directories) { try await body() }
    }
}

/// Defaults suites of their own for each test, removed afterwards.
enum UserDefaultsSuite {
    @TaskLocal static var scope: Locked<[String]>?

    static func scoped() -> String {
        let name = "strata.tests.\(UUID().uuidString)"
        scope?.withLock { $0.append(name) }
        return name
    }

    static func withScope(_ body: () async throws -> Void) async throws {
        let names = Locked<[String]>([])
        defer {
            for name in names.withLock({ $0 }) {
                UserDefaults(suiteName: name)?.removePersistentDomain(forName: name)
            }
        }
        try await $scope.withValue(names) { try await body() }
    }
}

@Suite("StoreContract.verifyAll")
struct VerifyAllTests {
    @Test func reportsEveryFailingCaseByName() async throws {
        let contract = StoreContract(keys: ("a", "b"), values: (itemA, itemB)) { ForgetfulStore() }
        let error = try await #require(throws: StoreContractVerificationError.self, "a forgetful store must fail the contract") {
            try await contract.verifyAll()
        }
        #expect(error.violations.map(\.contractCase).contains(.insertOverridesPreviouslyInsertedValue))
        #expect(!error.violations.map(\.contractCase).contains(.retrieveDeliversEmptyOnEmptyStore))
    }

    @Test func passesForAConformingStore() async throws {
        try await StoreContractTests.memory.verifyAll()
    }
}

extension ForgetfulStore {
    func removeAll() async throws { entries.withLock { $0 = [:] } }
}
