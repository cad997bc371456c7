import Foundation
import Logging
import Testing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

@Suite("chain descriptions")
struct ChainDescriptionTests {
    @Test func aProductionChainPrintsAsATreeOuterToInner() throws {
        let clock = ManualClock()
        let store = MemoryStore<String, Int>()
        let remote = StubLoader<Void, Int>(.success(1), name: "HTTP GET https://api.example.com/feed")
        let breaker = CircuitBreaker(name: "api", clock: clock)
        let chain = store.loader(key: "feed", freshness: .maxAge(.seconds(300))).named("fresh local")
            .fallingBack(to: remote
                .timingOut(after: .seconds(5)).environment(\.clock, clock)
                .retrying(.exponential(attempts: 3)).environment(\.clock, clock)
                .guarded(by: breaker)
                .writingThrough(in: store, key: "feed"))
            .fallingBack(to: store.loader(key: "feed", freshness: .any).named("stale local"))
            .coalesced()
            .logged(to: Logger(label: "app.feed"))

        #expect("\(chain)" == """
            logged(app.feed, info)
            └── coalesced
                └── fallingBack
                    ├── named "fresh local"
                    │   └── MemoryStore [max age 5m 0s]
                    ├── writingThrough(MemoryStore)
                    │   └── guarded(by: api, 50% of ≥10 in 30s, break 30s)
                    │       └── retrying(3 attempts, 200ms ×2.0 ≤ 30s)
                    │           └── timingOut(after: 5s)
                    │               └── HTTP GET https://api.example.com/feed
                    └── named "stale local"
                        └── MemoryStore [any age]
            """)
        #expect(chain.chainSummary == "fresh local → HTTP GET https://api.example.com/feed + retrying(3 attempts, 200ms ×2.0 ≤ 30s) + writingThrough(MemoryStore) → stale local")
    }

    @Test func erasureKeepsTheTree() {
        let chain = StubLoader<Void, Int>(.success(1), name: "a").fallingBack(to: StubLoader(.success(1), name: "b"))
        #expect(chain.eraseToAnyLoader().description == chain.description)
    }

    @Test func aLoaderOfYourOwnAppearsAsALeafOrDescribesItsChildren() {
        struct Audited<Base: Loader>: Loader, LoaderDescribing {
            let base: Base
            func load(_ input: Base.Input) async throws -> Base.Output { try await base.load(input) }
            var loaderNode: LoaderNode { LoaderNode(label: "audited", children: [base.chainNode]) }
        }
        let sut = Audited(base: StubLoader<Void, Int>(.success(1), name: "leaf"))
        #expect("\(sut)" == "audited\n└── leaf")
        #expect(sut.chainSummary == "leaf")
    }
}
