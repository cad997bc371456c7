import Foundation
import Observation
import Testing
import CrossCuttingExample
import Strata
import StrataQueries
import StrataTesting

/// The composition root and the view models it builds. The tests run on the main actor, like a UI;
/// `@Observable` needs macOS 14 / iOS 17, hence the availability on each test.
@MainActor
@Suite("S3 CrossCutting: UIComposer and view models", .timeLimit(.minutes(1)))
struct ComposerTests {
    // MARK: Items screen

    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @Test func itemsScreen_showsWhatTheServiceLoadedAndTracksItWithEveryTracker() async {
        let (first, second) = (TrackerSpy(), TrackerSpy())
        let viewModel = UIComposer.itemsScreen(service: ItemServiceStub(), trackers: [first, second])

        await viewModel.load()

        #expect(viewModel.items == sampleItems)
        #expect(await first.events == [sampleItems])
        #expect(await second.events == [sampleItems])
    }

    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @Test func itemsScreen_sendsTheScreenItsSnapshotsInOrder_andLoadsOnceWhileALoadRuns() async throws {
        let service = HeldItemService()
        let query = QueryClient().query(["items"], chain: ClosureLoader { await service.loadItem() })
        let viewModel = ItemsViewModel(items: query)
        var snapshots = query.snapshots().makeAsyncIterator()   // an observer from here on

        let loading = Task { await viewModel.load() }
        await service.waitUntilStarted()
        query.refetch()   // joins the load that runs
        await service.answer(["late"])
        await loading.value

        var seen: [(items: [String]?, fetching: Bool)] = []
        while seen.count < 2, let snapshot = await snapshots.next() { seen.append((snapshot.value, snapshot.isFetching)) }
        // Its first snapshot is the query once it counts it: already loading.
        #expect(seen.map(\.items) == [nil, ["late"]])
        #expect(seen.map(\.fetching) == [true, false])
        #expect(viewModel.items == ["late"])
        #expect(await service.calls == 1)
    }

    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @Test func itemsScreen_isLoadingOnlyWhileTheServiceWorks() async {
        let service = HeldItemService()
        let tracker = TrackerSpy()
        let viewModel = UIComposer.itemsScreen(service: service, trackers: [tracker])
        #expect(!viewModel.isLoading)

        let loading = Task { await viewModel.load() }
        await service.waitUntilStarted()
        #expect(viewModel.isLoading)
        #expect(viewModel.items.isEmpty)
        #expect(await tracker.events.isEmpty, "nothing is tracked before the load ends")

        await service.answer(["late"])
        await loading.value

        #expect(!viewModel.isLoading)
        #expect(viewModel.items == ["late"])
        #expect(await tracker.events == [["late"]])
    }

    // MARK: Profile screen

    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @Test func profileScreen_showsAUserLoadedInTheBackground() async {
        let viewModel = UIComposer.profileScreen(loader: UserDataLoaderStub(completesOn: .background))

        viewModel.load()
        #expect(viewModel.state == .loading)
        await waitUntil(viewModel) { $0.state != .loading }

        #expect(viewModel.state == .loaded(alice))
    }

    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @Test func profileScreen_showsAFailure() async {
        let viewModel = UIComposer.profileScreen(
            loader: UserDataLoaderStub(result: .failure(TestError("no user")), completesOn: .background))

        viewModel.load()
        await waitUntil(viewModel) { $0.state != .loading }

        #expect(viewModel.state == .failed("no user"))
    }

    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @Test func profileScreen_withALoaderAnsweringOnMain_showsTheUserBeforeLoadReturns() {
        let viewModel = UIComposer.profileScreen(loader: UserDataLoaderStub(completesOn: .caller))

        viewModel.load()

        #expect(viewModel.state == .loaded(alice))
    }

    /// Suspends until `condition` holds, re-checking whenever the view model's state changes.
    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    func waitUntil(_ viewModel: UserProfileViewModel, _ condition: (UserProfileViewModel) -> Bool) async {
        while !condition(viewModel) {
            await withCheckedContinuation { continuation in
                withObservationTracking {
                    _ = viewModel.state
                } onChange: {
                    continuation.resume()
                }
            }
        }
    }
}
