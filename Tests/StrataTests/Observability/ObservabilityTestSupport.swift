import Foundation
import InMemoryTracing
import Logging
import MetricsTestKit
import Testing
import Tracing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

/// A chain with a retry, a failing cache tier and a serving tier, so every observer has something to see.
func observedChain(clock: ManualClock, cacheAge: Duration? = nil) -> some Loader<Void, Int> {
    let store = MemoryStore<String, Int>()
    let remote = LoaderSpy<Void, Int>(
        .failure(HTTPError.status(code: 503, url: URL(string: "https://user:secret@api.example.com/feed?token=abc")!, headerFields: [:], body: Data())),
        .success(42), name: "remote")
    return store.loader(key: "k", freshness: .maxAge(.seconds(60))).environment(\.now, clock.wallClock).named("fresh local")
        .fallingBack(to: remote.originating(from: .remote).retrying(.constant(attempts: 2, delay: .zero)).environment(\.clock, clock).named("remote"))
}
