import Foundation
import Testing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

/// A decorator written as an app would write one: only `load(_:)`, so the default
/// `load(_:in:)` runs it with the context bound as the task's.
private struct OnlyLoad<Base: Loader>: Loader {
    let base: Base
    func load(_ input: Base.Input) async throws -> Base.Output { try await base.load(input) }
}

/// Records the `now` of the context it is handed and of the task's context, and serves 1.
private struct EnvironmentProbe: Loader {
    let seen = Locked<(passed: Date?, bound: Date?)>((nil, nil))
    func load(_ input: Void) async throws -> Int { try await load(input, in: .current) }
    func load(_ input: Void, in context: LoadContext) async throws -> Int {
        let passed = context.environment.now()
        let bound = LoadEnvironment.current.now()
        seen.withLock { $0 = (passed, bound) }
        return 1
    }
}

@Suite("LoadContext: what travels with a load")
struct LoadContextTests {
    let clock = ManualClock()

    @Test func operatorsPassTheEnvironment_withoutBindingIt() async throws {
        let probe = EnvironmentProbe()
        #expect(try await probe.named("n").environment(clock.environment()).load() == 1)
        let seen = probe.seen.withLock { $0 }
        #expect(seen.passed == clock.date)
        #expect(seen.bound != clock.date)
    }

    @Test func erasingALoader_keepsPassingTheContext() async throws {
        let probe = EnvironmentProbe()
        #expect(try await AnyLoader(probe).environment(clock.environment()).load() == 1)
        #expect(probe.seen.withLock { $0.passed } == clock.date)
        #expect(probe.seen.withLock { $0.bound } != clock.date)
    }

    @Test func aDecoratorOfYourOwn_inTheMiddle_stillCarriesProvenanceAndTime() async throws {
        let store = MemoryStore<String, Item>()
        try await store.insert(itemA, for: "feed", storedAt: clock.date)
        clock.advance(by: .seconds(90))
        let sut = OnlyLoad(base: store.loader(key: "feed", freshness: .maxAge(.seconds(60))))
            .fallingBack(to: OnlyLoad(base: store.loader(key: "feed").named("stale local")))
            .environment(clock.environment())
        let served = try await sut.loadServed()
        #expect(served.value == itemA)
        #expect(served.provenance.tier == "stale local")
        #expect(served.provenance.age == .seconds(90))
        // The first tier judged the entry with the environment's clock: 90 s old, refused.
        #expect(served.events.contains { if case .tierFailed = $0 { true } else { false } })
    }

    @Test func aLoaderOfYourOwn_recordsThroughTheTask() async throws {
        let custom = ClosureLoader<Void, Int>("custom") {
            LoadRecorder.record(.served(Provenance(origin: .remote, tier: LoadRecorder.tierName(default: "custom"))))
            return 3
        }
        let served = try await custom.named("mine").loadServed()
        #expect(served.value == 3)
        #expect(served.provenance.tier == "mine")
        #expect(served.provenance.origin == .remote)
    }

    /// `load()` asks the chain's immediate answer and then runs `load(_:in:)` (not `load(())`): a
    /// loader of your own, called outermost, is still reached through its `load(_:)`, once, in the
    /// environment its task has bound, and an error it throws is the caller's.
    @Test func loadOfASingleResource_reachesALoaderOfYourOwnOnce_inTheTasksEnvironment() async throws {
        let calls = Locked<[Date]>([])
        let custom = OnlyLoad(base: ClosureLoader<Void, Int>("custom") {
            calls.withLock { $0.append(LoadEnvironment.current.now()) }
            return calls.withLock { $0.count }
        })
        let value = try await clock.environment().bound { try await custom.load() }
        #expect(value == 1)
        #expect(calls.withLock { $0 } == [clock.date])

        struct Down: Error, Equatable { let reason: String }
        let failing = OnlyLoad(base: ClosureLoader<Void, Int>("failing") { throw Down(reason: "down") })
        let error = await #expect(throws: Down.self) { try await failing.load() }
        #expect(error == Down(reason: "down"))
    }

    @Test func aChildTaskOfALoaderOfYourOwn_inheritsTheEnvironment() async throws {
        let sut = ClosureLoader<Void, Date>("spawns") {
            await Task { LoadEnvironment.current.now() }.value
        }.environment(clock.environment())
        #expect(try await sut.load() == clock.date)
    }

    @Test func aChainLoadedInsideAClosure_joinsTheOuterLoad() async throws {
        let store = MemoryStore<String, Item>()
        try await store.insert(itemA, for: "feed", storedAt: clock.date)
        let inner = store.loader(key: "feed").named("inner store")
        let outer = ClosureLoader<Void, Item>("outer") { try await inner.load() }.environment(clock.environment())
        let served = try await outer.loadServed()
        #expect(served.provenance.tier == "inner store")
        #expect(served.provenance.age == .zero)
    }

    @Test func boundEnvironment_isTheCurrentOneInsideOnly() async throws {
        let inside = clock.environment().bound { LoadEnvironment.current.now() }
        #expect(inside == clock.date)
        let afterASuspension = await clock.environment().bound {
            await Task.yield()
            return LoadEnvironment.current.now()
        }
        #expect(afterASuspension == clock.date)
        #expect(LoadEnvironment.current.now() != clock.date)
    }

    @Test func theRecorderKeepsEveryEventInOrder() async throws {
        let recorder = LoadContext().recorder()
        let events: [LoadEvent] = [
            .tierFailed(tier: "a", error: TestError("x")), .retrying(tier: "b", attempt: 2, delay: .seconds(1), error: TestError("y")),
            .served(Provenance(origin: .memory, tier: "c")),
        ]
        #expect(recorder.summary.provenance == nil)
        recorder.deliver(events[0])
        #expect(recorder.summary.leftFirstTier)
        for event in events.dropFirst() { recorder.deliver(event) }
        #expect(recorder.events.map(\.kind) == ["tier_failed", "retrying", "served"])
        #expect(recorder.summary.provenance?.tier == "c")
        #expect(recorder.summary.leftFirstTier)
    }

    @Test func aSingleServedEvent_isAFirstTierAnswer() async throws {
        let recorder = LoadContext().recorder()
        recorder.deliver(.served(Provenance(origin: .disk, tier: "fresh local")))
        #expect(recorder.summary.provenance?.tier == "fresh local")
        #expect(!recorder.summary.leftFirstTier)
        #expect(recorder.events.count == 1)
    }
}
