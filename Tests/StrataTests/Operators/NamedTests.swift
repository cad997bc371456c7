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

    @Test func aStoresLoader_carriesTheName_soALoadBindsNothing() async throws {
        let sut = try await store().loader(key: "k", freshness: .maxAge(.hours(1))).named("fresh local")
        #expect(sut.baseCarriesName)
        #expect(sut.base.tierName == "fresh local")
        let served = try await sut.environment(\.now, clock.wallClock).loadServed()
        #expect(served.value == 7)
        #expect(served.provenance.tier == "fresh local")
    }

    @Test func aLoaderThatCannotCarryIt_getsTheNameForEveryTierBeneath() async throws {
        let sut = try await store().loader(key: "k").environment(\.now, clock.wallClock).named("local")
        #expect(!sut.baseCarriesName)
        #expect(try await sut.loadServed().provenance.tier == "local")
    }

    @Test(arguments: [true, false])
    func theInnermostNameWins(carried: Bool) async throws {
        let store = try await store()
        let inner: any Loader<Void, Int> = carried
            ? store.loader(key: "k").named("inner")
            : store.loader(key: "k").environment(\.now, clock.wallClock).named("inner")
        let sut = AnyLoader(inner).named("outer").environment(\.now, clock.wallClock)
        #expect(try await sut.loadServed().provenance.tier == "inner")
    }

    @Test func withoutAName_aTierIsItsDescription() async throws {
        let sut = try await store().loader(key: "k").environment(\.now, clock.wallClock)
        #expect(try await sut.loadServed().provenance.tier == "MemoryStore [any age]")
    }
}
