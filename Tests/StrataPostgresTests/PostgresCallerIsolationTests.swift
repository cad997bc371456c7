#if Postgres
import Foundation
@_spi(StrataInternals) import Strata
import StrataPostgres
import StrataTesting
import Testing

/// `PostgresStore`'s methods are `@concurrent`: a main-actor caller never encodes or decodes on the
/// main actor, whichever target's settings the store was compiled with.
@Suite("PostgresStore: caller isolation", .enabled(if: TestServer.isAvailable, TestServer.skipReason), .timeLimit(.minutes(2)))
@MainActor
struct PostgresCallerIsolationTests {
    @Test("a main-actor caller's insert and read encode and decode off the main actor, and return to it")
    func storeWorkLeavesTheMainActor() async throws {
        try await TestScope.run {
            let codec = ThreadNotingCodec<Item>()
            let store = try PostgresStore<Item>(
                configuration: TestServer.configuration(), codec: codec,
                options: PostgresStoreOptions(table: TestScope.table(), connectTimeout: TestServer.connectTimeout, logger: quietLogger))
            TestScope.onExit { await store.shutdown() }

            let (read, returned) = try await store.roundTripFromTheMainActor(itemA, key: "a", storedAt: referenceDate)
            #expect(read == itemA)
            #expect(returned)
            #expect(codec.threads.notes == [false, false], "encode, then decode")
        }
    }
}
#endif
