import Foundation
import Testing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

@Suite("named(_:)")
struct NamedTests {
    let clock = ManualClock()

    func store() async throws -> MemoryStore<String, Int> {
        let store = MemoryStore<String, Int>()
        try await store.insert(7, for: "k", storedAt: clock.date)
        return store
    }

    /// Reports what it was handed and what the task had bound, and serves 1.
    struct ContextProbe: Loader {
        let seen = Locked<(passed: String?, bound: String?)>((nil, nil))
        func load(_ input: Void) async throws -> Int { try await load(input, in: .current) }
        func load(_ input: Void, in context: LoadContext) async throws -> Int {
            seen.withLock { $0 = (context.tierName(default: "none"), LoadContext.current.tierName(default: "none")) }
            return 1
        }
    }

    @Test func theNameTravelsWithARecordedLoad_notAsATaskLocal() async throws {
        let probe = ContextProbe()
        #expect(try await probe.named("fresh local").loadServed().value == 1)
        #expect(probe.seen.withLock { $0.passed } == "fresh local")
        #expect(probe.seen.withLock { $0.bound } == "none")
    }

    @Test func withNobodyRecording_theContextPassesUnchanged() async throws {
        let probe = ContextProbe()
        #expect(try await probe.named("fresh local").load() == 1)
        #expect(probe.seen.withLock { $0.passed } == "none")
    }

    @Test func aStoresLoader_reportsTheName() async throws {
        let sut = try await store().loader(key: "k", freshness: .maxAge(.hours(1))).named("fresh local")
        let served = try await sut.environment(\.now, clock.wallClock).loadServed()
        #expect(served.value == 7)
        #expect(served.provenance.tier == "fresh local")
    }

    @Test func aLoaderOfYourOwn_seesTheNameThroughTheTask() async throws {
        let sut = ClosureLoader<Void, String>("mine") { LoadRecorder.tierName(default: "unnamed") }
        #expect(try await sut.named("local").loadServed().value == "local")
        #expect(try await sut.loadServed().value == "unnamed")
    }

    @Test(arguments: [true, false])
    func theInnermostNameWins(erased: Bool) async throws {
        let store = try await store()
        let inner = store.loader(key: "k").environment(\.now, clock.wallClock).named("inner")
        let erasedOrNot: any Loader<Void, Int> = erased ? AnyLoader(inner) : inner
        let sut = AnyLoader(erasedOrNot).named("outer").environment(\.now, clock.wallClock)
        #expect(try await sut.loadServed().provenance.tier == "inner")
    }

    @Test func withoutAName_aTierIsItsDescription() async throws {
        let sut = try await store().loader(key: "k").environment(\.now, clock.wallClock)
        #expect(try await sut.loadServed().provenance.tier == "MemoryStore [any age]")
    }
}

@Suite("named(_:): names in errors and provenance")
struct NamedProvenanceTests {
    @Test func named_namesTheTierInErrorsAndProvenance() async throws {
        let sut = StubLoader<Void, Int>(.failure(TestError("x"))).named("remote")
            .fallingBack(to: ClosureLoader { 1 }.originating(from: .bundled).named("defaults"))

        let served = try await sut.loadServed()
        #expect(served.provenance.tier == "defaults")
        #expect(served.provenance.origin == .bundled)
        #expect(sut.chainSummary == "remote → defaults")
    }

    @Test func named_isAPlainForwardWhenNotRecording() async throws {
        let spy = LoaderSpy<Int, Int>(.success(5))
        #expect(try await spy.named("x").load(1) == 5)
        #expect(spy.inputs == [1])
    }
}
