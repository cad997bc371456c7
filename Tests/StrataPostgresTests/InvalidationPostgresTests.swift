#if Postgres
import Foundation
import Logging
import PostgresNIO
@_spi(StrataInternals) import Strata
@testable import StrataPostgres
import StrataFixtures
import StrataTesting
import Testing

/// Tags, invalidation by tag, key prefix or all, as expire or remove, across the fleet, and caches
/// sharing one database that never clear each other: on the real server.
@Suite("invalidate(_:as:) over PostgreSQL", .enabled(if: TestServer.isAvailable, TestServer.skipReason), .timeLimit(.minutes(2)))
struct InvalidationPostgresTests {
    typealias Node = TieredStore<MemoryStore<String, Item>, PostgresStore<Item>>

    /// A store whose rows carry the tags `item:<id>` and `name:<name>`.
    func taggedStore(table: String) throws -> PostgresStore<Item> {
        let store = try TestScope.store(Item.self, table: table)
        store.tagEntries { _, item in ["item:\(item.id)", "name:\(item.name)"] }
        return store
    }

    func node(_ name: String, table: String) async throws -> Node {
        let shared = try taggedStore(table: table)
        let backplane = try PostgresBackplane(announcingFor: shared, node: name, logger: quietLogger)
        TestScope.onExit { await backplane.shutdown() }
        let tiered = TieredStore(memory: MemoryStore(), shared: shared, backplane: backplane, environment: LoadEnvironment(logger: quietLogger))
        try await backplane.waitUntilListening()
        try await tiered.waitForBackplaneEvents(atLeast: 1)
        return tiered
    }

    static let storedAt = Date(timeIntervalSinceReferenceDate: 800_000_000.5)

    @Test("expire by tag keeps the value and its store time, makes it stale for every policy but .any; others keep their lifetime",
          arguments: [CacheSelection.tag("name:a"), .keyPrefix("feed/"), .all])
    func expire_keepsTheValue_butEndsItsLifetime(selection: CacheSelection) async throws {
        try await TestScope.run {
            let store = try taggedStore(table: TestScope.table())
            let lifetime = CacheValidators(etag: "\"1\"", maxAge: .seconds(600))
            try await store.insert(itemA, for: "feed/a", storedAt: Self.storedAt, validators: lifetime)
            try await store.insert(itemB, for: "other/b", storedAt: Self.storedAt, validators: lifetime)

            let expired = try await store.invalidate(selection, as: .expire)
            #expect(expired == (selection == .all ? 2 : 1))
            let a = try #require(try await store.retrieve("feed/a"))
            #expect(a.value == itemA && a.storedAt == Self.storedAt && a.validators.etag == "\"1\"")
            #expect(a.isExpired && a.validators.maxAge == .zero)
            #expect(try await store.retrieve("other/b")?.isExpired == (selection == .all))

            // Stale for a max-age policy at once, still there for `.any` and a stale fallback.
            let now = Self.storedAt.addingTimeInterval(1)
            let environment = LoadEnvironment(now: { now }, logger: quietLogger)
            await #expect(throws: CacheLoadError.self) {
                try await store.loader(key: "feed/a", freshness: .maxAge(.hours(1))).environment(environment).load()
            }
            #expect(try await store.loader(key: "feed/a", freshness: .any).environment(environment).load() == itemA)
            let failing = ClosureLoader<Void, Item>("offline") { throw URLError(.notConnectedToInternet) }
            #expect(try await failing.servingStaleOnError(in: store, key: "feed/a", maxStale: .hours(1))
                .environment(environment).load() == itemA)
        }
    }

    @Test("remove by tag, by prefix or all deletes exactly the rows it names",
          arguments: [(CacheSelection.tag("item:2"), ["a"]), (.keyPrefix("b"), ["a"]), (.tag("absent"), ["a", "b"]), (.all, [])])
    func remove_deletesTheSelectedRows(selection: CacheSelection, left: [String]) async throws {
        try await TestScope.run {
            let store = try taggedStore(table: TestScope.table())
            try await store.insert(itemA, for: "a", storedAt: Self.storedAt)
            try await store.insert(itemB, for: "b", storedAt: Self.storedAt)
            let removed = try await store.invalidate(selection, as: .remove)
            #expect(removed == 2 - left.count)
            var remaining: [String] = []
            for key in ["a", "b"] where try await store.retrieve(key) != nil { remaining.append(key) }
            #expect(remaining == left)
        }
    }

    @Test("a write replaces the row's tags with the new value's; a store without a tagger writes none")
    func aWrite_replacesTheTags() async throws {
        try await TestScope.run {
            let table = TestScope.table()
            let store = try taggedStore(table: table)
            try await store.insert(itemA, for: "k", storedAt: Self.storedAt)
            try await store.insert(itemB, for: "k", storedAt: Self.storedAt)
            #expect(try await store.invalidate(.tag("item:1"), as: .remove) == 0, "the old value's tag is gone")
            #expect(try await store.invalidate(.tag("item:2"), as: .expire) == 1)
            let untagged = try TestScope.store(Item.self, table: table)
            try await untagged.insert(itemB, for: "k", storedAt: Self.storedAt)
            #expect(try await store.invalidate(.tag("item:2"), as: .remove) == 0)
        }
    }

    @Test("an invalidation on node A empties node B's memory tier; B reads the expired row from the shared tier")
    func anInvalidation_reachesTheOtherNodes() async throws {
        try await TestScope.run {
            let table = TestScope.table()
            let a = try await node("a", table: table)
            let b = try await node("b", table: table)
            try await b.insert(itemA, for: "feed", storedAt: Self.storedAt, validators: CacheValidators(maxAge: .seconds(600)))
            try await a.waitForBackplaneEvents(atLeast: 2)  // listening, B's set
            #expect(try await a.retrieve("feed")?.value == itemA)
            #expect(a.memory.immediateEntry(for: "feed") != nil)

            #expect(try await a.invalidate(.tag("name:a"), as: .expire) == 1)
            #expect(a.memory.immediateEntry(for: "feed") == nil, "the invalidating node empties its own memory")
            try await b.waitForBackplaneEvents(atLeast: 3)  // listening, own set, A's invalidation
            #expect(b.memory.immediateEntry(for: "feed") == nil)
            #expect(b.backplaneStatistics.invalidations == 1)
            #expect(try await b.retrieve("feed")?.isExpired == true)

            #expect(try await b.invalidate(.keyPrefix("fe"), as: .remove) == 1)
            try await a.waitForBackplaneEvents(atLeast: 4)  // listening, B's set, own invalidation, B's
            #expect(a.backplaneStatistics.invalidations == 1)
            #expect(a.backplaneStatistics.ownChangesIgnored == 1)
            #expect(try await a.retrieve("feed") == nil)
        }
    }

    @Test("the invalidation notice carries the tag or prefix and the mode, never a value")
    func theInvalidationNotice_isSlim() throws {
        let notice = PostgresChangeNotice(key: nil, action: .expire, at: Self.storedAt, sender: "n1")
        var tagged = notice
        tagged.tag = "user:42"
        #expect(PostgresChangeNotice.parse(tagged.payload(logger: quietLogger))?.event
            == .invalidated(CacheInvalidation(selection: .tag("user:42"), mode: .expire, at: Self.storedAt, sender: "n1")))
        var prefixed = PostgresChangeNotice(key: nil, action: .remove, at: Self.storedAt, sender: "n1")
        prefixed.prefix = "GET /items/"
        #expect(PostgresChangeNotice.parse(prefixed.payload(logger: quietLogger))?.event
            == .invalidated(CacheInvalidation(selection: .keyPrefix("GET /items/"), mode: .remove, at: Self.storedAt, sender: "n1")))
        #expect(PostgresChangeNotice.parse(notice.payload(logger: quietLogger))?.event
            == .invalidated(CacheInvalidation(selection: .all, mode: .expire, at: Self.storedAt, sender: "n1")))
        // A tag too long to travel becomes "every entry changed".
        var huge = notice
        huge.tag = String(repeating: "t", count: 9_000)
        #expect(PostgresChangeNotice.parse(huge.payload(logger: quietLogger))?.event == .changedAll(at: Self.storedAt, sender: "n1", instance: nil))
    }

    @Test("two caches in one database are namespaces: clearing one neither touches nor tells the other")
    func cachesSharingADatabase_neverClearEachOther() async throws {
        try await TestScope.run {
            let feeds = try await node("feeds", table: TestScope.table())
            let users = try await node("users", table: TestScope.table())
            let usersElsewhere = try await node("users-2", table: users.shared.table)
            try await feeds.insert(itemA, for: "k", storedAt: Self.storedAt)
            try await users.insert(itemB, for: "k", storedAt: Self.storedAt)
            try await usersElsewhere.waitForBackplaneEvents(atLeast: 2)  // listening, users' set
            #expect(try await usersElsewhere.retrieve("k")?.value == itemB)

            #expect(try await feeds.invalidate(.all, as: .remove) == 1)
            #expect(try await feeds.retrieve("k") == nil)
            #expect(try await users.shared.retrieve("k")?.value == itemB, "the other table is untouched")
            // The other namespace heard nothing: its next event is its own namespace's write.
            try await users.insert(itemA, for: "k2", storedAt: Self.storedAt)
            try await usersElsewhere.waitForBackplaneEvents(atLeast: 3)
            #expect(usersElsewhere.backplaneStatistics.invalidations == 0)
            #expect(usersElsewhere.backplaneStatistics.copiesDropped == 0)
            #expect(usersElsewhere.memory.immediateEntry(for: "k")?.value == itemB)
        }
    }
}
#endif
