import Testing
import CrossCuttingExample
import Strata
import StrataTesting

@Suite("S3 CrossCutting: AnalyticsDecorator and trackers")
struct AnalyticsDecoratorTests {
    @Test func loadItem_returnsTheDecorateesItemsUnchanged() async {
        let sut = AnalyticsDecorator(decoratee: ItemServiceStub(), tracker: TrackerSpy())

        #expect(await sut.loadItem() == sampleItems)
    }

    @Test func loadItem_tracksExactlyWhatWasLoaded_oncePerLoad() async {
        let tracker = TrackerSpy()
        let service = ItemServiceStub()
        let sut = AnalyticsDecorator(decoratee: service, tracker: tracker)

        _ = await sut.loadItem()
        _ = await sut.loadItem()

        #expect(await tracker.events == [sampleItems, sampleItems])
        #expect(await service.loadCount == 2)
    }

    @Test func loadItem_tracksAfterLoadingAndBeforeReturning() async {
        let journal = Journal()
        let sut = AnalyticsDecorator(
            decoratee: JournalingService(journal: journal, items: ["a"]),
            tracker: JournalingTracker(journal: journal, name: "tracker"))

        _ = await sut.loadItem()
        await journal.write("returned")

        #expect(await journal.entries == ["load", "tracker [\"a\"]", "returned"])
    }

    @Test func anEmptyLoad_isTrackedAsAnEmptyList() async {
        let tracker = TrackerSpy()
        let sut = AnalyticsDecorator(decoratee: ItemServiceStub(items: []), tracker: tracker)

        #expect(await sut.loadItem().isEmpty)
        #expect(await tracker.events == [[]])
    }

    @Test func compositeTracker_forwardsEveryEventToEachTrackerInOrder() async {
        let journal = Journal()
        let sut = CompositeTracker([
            JournalingTracker(journal: journal, name: "first"),
            JournalingTracker(journal: journal, name: "second"),
        ])

        await sut.track(values: ["x"])
        await sut.track(values: ["y"])

        #expect(await journal.entries == ["first [\"x\"]", "second [\"x\"]", "first [\"y\"]", "second [\"y\"]"])
    }

    @Test func compositeTracker_behindTheDecorator_letsEveryTrackerSeeTheLoad() async {
        let (first, second) = (TrackerSpy(), InMemoryTracker())
        let sut = AnalyticsDecorator(decoratee: ItemServiceStub(), tracker: CompositeTracker([first, second]))

        _ = await sut.loadItem()

        #expect(await first.events == [sampleItems])
        #expect(await second.events == [sampleItems])
    }

    @Test func compositeTracker_withNoTrackers_acceptsEventsAndDoesNothing() async {
        let sut = AnalyticsDecorator(decoratee: ItemServiceStub(), tracker: CompositeTracker([]))

        #expect(await sut.loadItem() == sampleItems)
    }

    @Test func trackedLoader_tracksEverySuccessfulLoadAndReturnsItUnchanged() async throws {
        let tracker = TrackerSpy()
        let sut = ClosureLoader { sampleItems }.tracked(by: tracker)

        #expect(try await sut.load() == sampleItems)
        #expect(await tracker.events == [sampleItems])
    }

    @Test func trackedLoader_mapsAnyOutputToTheValuesItTracks() async throws {
        let tracker = TrackerSpy()
        let sut = ClosureLoader { (id: Int) in id * 10 }.tracked(by: tracker) { ["\($0)"] }

        #expect(try await sut.load(4) == 40)
        #expect(await tracker.events == [["40"]])
    }

    @Test func trackedLoader_describesItselfAfterItsBase() {
        #expect(ClosureLoader("items") { sampleItems }.tracked(by: TrackerSpy()).description == "items + tracked")
    }

    @Test func trackedLoader_whenTheLoadFails_tracksNothingAndRethrows() async throws {
        let tracker = TrackerSpy()
        let sut = LoaderSpy<Void, [String]>(.failure(TestError("offline"))).tracked(by: tracker)

        await #expect(throws: TestError("offline")) { try await sut.load() }
        #expect(await tracker.events.isEmpty)
    }
}
