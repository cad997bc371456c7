import Foundation
import Strata
import StrataTesting
import Testing

/// An app type named like the module. In this file `Strata` means this struct, so any public API
/// that could only be reached as `Strata.something` (a free function the caller had to qualify)
/// would not compile here: chains, their trees and the helpers are members of the types they are about.
private struct Strata {}

@Suite("A user type named Strata")
struct TypeNamedStrataTests {
    @Test func everyOperatorAndHelperIsReachableWithoutTheModuleName() async throws {
        _ = Strata()
        let store = MemoryStore<String, Int>()
        let breaker = CircuitBreaker(name: "api", clock: ManualClock())
        let remote = StubLoader<Void, Int>(.success(7))
        let chain = store.loader(key: "n", freshness: .maxAge(.hours(1))).named("fresh")
            .fallingBack(
                to: remote.timingOut(after: .seconds(5)).environment(\.clock, ManualClock())
                    .retrying(.constant(attempts: 2, delay: .zero)).environment(\.clock, ManualClock())
                    .guarded(by: breaker)
                    .writingThrough(in: store, key: "n")
                    .named("remote"))
            .fallingBack(to: remote.servingStaleOnError(in: store, key: "n", maxStale: .days(7)))
            .coalesced()
        #expect(try await chain.load() == 7)
        #expect(chain.chainSummary == "fresh → remote → stub + servingStaleOnError(MemoryStore, max age 7d 0h)")
        #expect(chain.chainNode.children.count == 1)
        #expect(store.storeDescription.contains("MemoryStore"))
        #expect(Duration.hours(2).formattedAge == "2h 0m")
        #expect(Redaction.redactingSecrets(in: "GET /feed?token=abcdefgh") == "GET /feed?token=***")
        #expect(Redaction.redactedString(for: URL(string: "https://u:p@example.com/a?k=v")!) == "https://example.com/a?k=***")
    }
}
