#if SQLite
import Foundation
@_spi(StrataInternals) import Strata
import StrataSQLite
import StrataTesting
import Testing

/// `SQLiteStore`'s methods are `@concurrent`: a main-actor caller (a view model) never blocks the main
/// actor on SQLite or on the codec, whichever target's settings the store was compiled with.
@Suite("SQLiteStore: caller isolation")
@MainActor
struct SQLiteCallerIsolationTests {
    @Test("a main-actor caller's insert and read encode, decode and query off the main actor, and return to it")
    func storeWorkLeavesTheMainActor() async throws {
        let directory = try TemporaryDirectory(prefix: "strata-sqlite-isolation")
        defer { directory.remove() }
        let codec = ThreadNotingCodec<Item>()
        let store = try SQLiteStore<Item>(path: directory.appending("cache.sqlite").path, codec: codec, logger: quietLogger)

        let (read, returned) = try await store.roundTripFromTheMainActor(itemA, key: "a", storedAt: referenceDate)
        #expect(read == itemA)
        #expect(returned)
        #expect(codec.threads.notes == [false, false], "encode, then decode")
    }
}
#endif
