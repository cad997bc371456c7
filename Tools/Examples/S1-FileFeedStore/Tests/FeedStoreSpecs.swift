import FeedCachingExample
import FileFeedStoreExample
import Foundation
import Testing

/// One behaviour of the S1 contract. Each store's tests run every case it can (see
/// ``FeedStoreSpecs/applicableCases``), so a case can never be skipped silently.
enum FeedStoreSpec: String, CaseIterable, Sendable, CustomStringConvertible {
    case load_onAnEmptyStore_deliversAnEmptyFeed
    case load_onAnEmptyStore_hasNoSideEffects
    case load_afterSave_deliversTheSavedFeed
    case load_onANonEmptyStore_hasNoSideEffects
    case save_onANonEmptyStore_replacesThePreviousFeed
    case delete_afterSave_leavesTheStoreEmpty
    case delete_onAnEmptyStore_succeedsAndLeavesItEmpty
    case sideEffects_issuedOneAfterAnother_completeInThatOrder
    case concurrentSavesAndLoads_neverExposeATornFeed
    case secondInstance_seesTheFirstInstancesSave
    case secondInstance_seesTheFirstInstancesDelete
    case load_ofCorruptData_deliversAnEmptyFeed
    case save_overCorruptData_replacesIt

    /// What a store's specs must provide for a case to run.
    enum Requirement: Sendable {
        /// A second store object on the same location (persistent stores).
        case reopen
        /// A way to damage the stored data (stores with bytes to damage).
        case corruption
    }

    var requirement: Requirement? {
        switch self {
        case .secondInstance_seesTheFirstInstancesSave, .secondInstance_seesTheFirstInstancesDelete: .reopen
        case .load_ofCorruptData_deliversAnEmptyFeed, .save_overCorruptData_replacesIt: .corruption
        default: nil
        }
    }

    /// The cases for a store with the given hooks.
    static func cases(with requirements: Set<Requirement>) -> [FeedStoreSpec] {
        allCases.filter { $0.requirement.map(requirements.contains) ?? true }
    }

    var description: String { rawValue }
}

/// The S1 contract, written once against the ``FeedStore`` protocol only, so any store — a JSON file,
/// Strata's stores, Core Data or SQLite — passes the same specs.
///
/// ```swift
/// @Test(arguments: FeedStoreSpec.cases(with: [.reopen, .corruption]))
/// func myStore(_ spec: FeedStoreSpec) async throws {
///     try await FeedStoreSpecs(makeSUT: { MyStore(url) }, reopen: { _ in MyStore(url) }, corrupt: { … }).verify(spec)
/// }
/// ```
struct FeedStoreSpecs<S: FeedStore> {
    /// Makes a new, empty store at a location of its own.
    var makeSUT: () async throws -> S
    /// Opens a second store object on the same location as the given one.
    var reopen: ((S) async throws -> S)?
    /// Replaces the stored feed's bytes with something the store cannot read.
    var corrupt: ((S) async throws -> Void)?

    /// The cases these specs can run, given their hooks.
    var applicableCases: [FeedStoreSpec] {
        var requirements: Set<FeedStoreSpec.Requirement> = []
        if reopen != nil { requirements.insert(.reopen) }
        if corrupt != nil { requirements.insert(.corruption) }
        return FeedStoreSpec.cases(with: requirements)
    }

    /// Runs one case.
    func verify(_ spec: FeedStoreSpec) async throws {
        switch spec {
        case .load_onAnEmptyStore_deliversAnEmptyFeed: try await loadOnAnEmptyStoreDeliversAnEmptyFeed()
        case .load_onAnEmptyStore_hasNoSideEffects: try await loadOnAnEmptyStoreHasNoSideEffects()
        case .load_afterSave_deliversTheSavedFeed: try await loadAfterSaveDeliversTheSavedFeed()
        case .load_onANonEmptyStore_hasNoSideEffects: try await loadOnANonEmptyStoreHasNoSideEffects()
        case .save_onANonEmptyStore_replacesThePreviousFeed: try await saveOnANonEmptyStoreReplacesThePreviousFeed()
        case .delete_afterSave_leavesTheStoreEmpty: try await deleteAfterSaveLeavesTheStoreEmpty()
        case .delete_onAnEmptyStore_succeedsAndLeavesItEmpty: try await deleteOnAnEmptyStoreSucceedsAndLeavesItEmpty()
        case .sideEffects_issuedOneAfterAnother_completeInThatOrder: try await sideEffectsIssuedOneAfterAnotherCompleteInThatOrder()
        case .concurrentSavesAndLoads_neverExposeATornFeed: try await concurrentSavesAndLoadsNeverExposeATornFeed()
        case .secondInstance_seesTheFirstInstancesSave: try await secondInstanceSeesTheFirstInstancesSave()
        case .secondInstance_seesTheFirstInstancesDelete: try await secondInstanceSeesTheFirstInstancesDelete()
        case .load_ofCorruptData_deliversAnEmptyFeed: try await loadOfCorruptDataDeliversAnEmptyFeed()
        case .save_overCorruptData_replacesIt: try await saveOverCorruptDataReplacesIt()
        }
    }

    // MARK: The specs, one function per behaviour

    func loadOnAnEmptyStoreDeliversAnEmptyFeed() async throws {
        let sut = try await makeSUT()

        #expect(try await sut.load() == [])
    }

    func loadOnAnEmptyStoreHasNoSideEffects() async throws {
        let sut = try await makeSUT()

        #expect(try await sut.load() == [])
        #expect(try await sut.load() == [])
    }

    func loadAfterSaveDeliversTheSavedFeed() async throws {
        let sut = try await makeSUT()
        let feed = uniqueFeed()

        try await sut.save(feed)

        #expect(try await sut.load() == feed)
    }

    func loadOnANonEmptyStoreHasNoSideEffects() async throws {
        let sut = try await makeSUT()
        let feed = uniqueFeed()
        try await sut.save(feed)

        #expect(try await sut.load() == feed)
        #expect(try await sut.load() == feed)
    }

    func saveOnANonEmptyStoreReplacesThePreviousFeed() async throws {
        let sut = try await makeSUT()
        let latest = uniqueFeed()

        try await sut.save(uniqueFeed())
        try await sut.save(latest)

        #expect(try await sut.load() == latest)
    }

    func deleteAfterSaveLeavesTheStoreEmpty() async throws {
        let sut = try await makeSUT()
        try await sut.save(uniqueFeed())

        try await sut.delete()

        #expect(try await sut.load() == [])
    }

    func deleteOnAnEmptyStoreSucceedsAndLeavesItEmpty() async throws {
        let sut = try await makeSUT()

        try await sut.delete()

        #expect(try await sut.load() == [])
    }

    func sideEffectsIssuedOneAfterAnotherCompleteInThatOrder() async throws {
        let sut = try await makeSUT()
        let first = uniqueFeed()
        let last = uniqueFeed()

        try await sut.save(first)
        try await sut.delete()
        try await sut.save(last)
        #expect(try await sut.load() == last, "save, delete, save: the last save wins")

        try await sut.save(first)
        try await sut.delete()
        #expect(try await sut.load() == [], "save, delete: the delete wins")
    }

    /// Saves of two different feeds race with loads (through a second instance too, when there is
    /// one): every load sees one whole feed, never a mix, a partial feed or an error.
    func concurrentSavesAndLoadsNeverExposeATornFeed() async throws {
        let sut = try await makeSUT()
        let other = try await reopen?(sut) ?? sut
        let small = uniqueFeed(count: 3)
        let large = uniqueFeed(count: 1_000)
        try await sut.save(small)

        let seen = try await withThrowingTaskGroup(of: [FeedItem]?.self) { group in
            for round in 0..<60 {
                let store = round.isMultiple(of: 2) ? sut : other
                group.addTask { try await store.save(round.isMultiple(of: 4) ? large : small); return nil }
                group.addTask { try await (round.isMultiple(of: 2) ? other : sut).load() }
            }
            var loads: [[FeedItem]] = []
            for try await feed in group { if let feed { loads.append(feed) } }
            return loads
        }

        #expect(seen.count == 60)
        for feed in seen {
            #expect(feed == small || feed == large, "a load saw \(feed.count) items, not one of the saved feeds")
        }
        let final = try await sut.load()
        #expect(final == small || final == large)
    }

    func secondInstanceSeesTheFirstInstancesSave() async throws {
        let sut = try await makeSUT()
        let reopen = try #require(reopen, "this case needs the `reopen` hook")
        let other = try await reopen(sut)
        let first = uniqueFeed()
        let second = uniqueFeed()

        try await sut.save(first)
        #expect(try await other.load() == first)

        try await other.save(second)
        #expect(try await sut.load() == second)
    }

    func secondInstanceSeesTheFirstInstancesDelete() async throws {
        let sut = try await makeSUT()
        let reopen = try #require(reopen, "this case needs the `reopen` hook")
        let other = try await reopen(sut)
        try await sut.save(uniqueFeed())
        _ = try await other.load()

        try await other.delete()

        #expect(try await sut.load() == [])
    }

    /// Documented choice: unreadable data is a cache miss (`[]`), never an error or a crash.
    func loadOfCorruptDataDeliversAnEmptyFeed() async throws {
        let sut = try await makeSUT()
        let corrupt = try #require(corrupt, "this case needs the `corrupt` hook")
        try await sut.save(uniqueFeed())

        try await corrupt(sut)

        #expect(try await sut.load() == [])
        #expect(try await sut.load() == [])
    }

    func saveOverCorruptDataReplacesIt() async throws {
        let sut = try await makeSUT()
        let corrupt = try #require(corrupt, "this case needs the `corrupt` hook")
        let feed = uniqueFeed()
        try await sut.save(uniqueFeed())
        try await corrupt(sut)

        try await sut.save(feed)

        #expect(try await sut.load() == feed)
    }
}
