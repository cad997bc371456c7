import Foundation
import Testing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

/// Unit tests of the revalidating HTTP cache tier against a scripted client, a spied MemoryStore
/// and an injected wall clock. The real-server tests are in StrataIntegrationTests.
@Suite("revalidated(in:key:freshness:honorsCacheControl:decode:)")
struct RevalidatedTests {
    let url = URL(string: "https://api.example.com/items/1")!
    let etag = "\"v1\""
    let lastModified = "Wed, 31 Dec 2025 23:00:00 GMT"
    let clock = ManualClock(startDate: referenceDate)

    func makeSUT(
        policy: FreshnessPolicy = .maxAge(.seconds(60)), honorsCacheControl: Bool = true,
        responses: [Result<HTTPReply, any Error>], headers: [String: String] = [:]
    ) -> (sut: EnvironmentLoader<RevalidatedLoader<Void, StoreSpy<MemoryStore<String, Item>>>>, client: ScriptedHTTPClient, store: StoreSpy<MemoryStore<String, Item>>) {
        let client = ScriptedHTTPClient(responses)
        let store = StoreSpy(MemoryStore<String, Item>())
        let sut = HTTPLoader(url: url, headerFields: fields(headers), transport: client)
            .revalidated(in: store, key: "item", freshness: policy, honorsCacheControl: honorsCacheControl, decoding: Item.self).environment(LoadEnvironment(now: clock.wallClock, logger: quietLogger))
        return (sut, client, store)
    }

    func ok(_ item: Item, headers: [String: String] = [:], status: Int = 200) -> Result<HTTPReply, any Error> {
        .success(HTTPReply(url: url, statusCode: status, headers: headers, body: try! JSONEncoder().encode(item)))
    }

    func notModified(headers: [String: String] = [:]) -> Result<HTTPReply, any Error> {
        .success(HTTPReply(url: url, statusCode: 304, headers: headers))
    }

    /// Stores `item` as if fetched `age` ago with `validators`, then clears the spy's record of it.
    func seed(_ store: StoreSpy<MemoryStore<String, Item>>, _ item: Item = itemA, age: Duration, validators: CacheValidators) async throws {
        try await store.base.insert(item, for: "item", storedAt: clock.date - age / .seconds(1), validators: validators)
    }

    // MARK: fresh entries

    @Test func freshEntry_isServedFromTheStoreWithoutARequest() async throws {
        let (sut, client, store) = makeSUT(responses: [])
        try await seed(store, age: .seconds(30), validators: .init(etag: etag))

        let served = try await sut.loadServed()

        #expect(served.value == itemA)
        #expect(client.requests.isEmpty)
        #expect(served.provenance.origin == .memory)
        #expect(served.provenance.age == .seconds(30))
        #expect(served.provenance.storedAt == clock.date - 30)
        #expect(store.messages == [.retrieve("item")])
    }

    @Test func aFreshEntryStoredBeforeTheLoadRevalidatesFrom_isAskedAbout_notServed() async throws {
        let (sut, client, store) = makeSUT(responses: [notModified()])
        try await seed(store, age: .seconds(30), validators: .init(etag: etag))
        var context = LoadContext()
        context.revalidatingSince = clock.date
        let served = try await sut.loadServed((), in: context)
        #expect(served.value == itemA)
        #expect(client.requests.count == 1)
        #expect(served.provenance.origin == .remote)
    }

    @Test(arguments: [true, false])
    func serverMaxAge_shortensThePolicy_onlyWhenHonoured(honours: Bool) async throws {
        let (sut, client, store) = makeSUT(policy: .maxAge(.seconds(60)), honorsCacheControl: honours, responses: [notModified()])
        try await seed(store, age: .seconds(45), validators: .init(etag: etag, maxAge: .seconds(30)))

        let served = try await sut.loadServed()

        #expect(served.value == itemA)
        #expect(client.requests.count == (honours ? 1 : 0))
        #expect(served.provenance.origin == (honours ? .remote : .memory))
    }

    @Test func serverMaxAge_neverExtendsThePolicy() async throws {
        let (sut, client, store) = makeSUT(policy: .maxAge(.seconds(60)), responses: [notModified()])
        try await seed(store, age: .seconds(90), validators: .init(etag: etag, maxAge: .seconds(300)))

        _ = try await sut.load()

        #expect(client.requests.count == 1)
    }

    @Test func entryYoungerThanBoth_isFresh_andOneAsOldAsTheServerMaxAgeIsNot() async throws {
        let (sut, client, store) = makeSUT(policy: .maxAge(.seconds(60)), responses: [notModified()])
        try await seed(store, age: .seconds(29), validators: .init(etag: etag, maxAge: .seconds(30)))
        _ = try await sut.load()
        #expect(client.requests.isEmpty)

        clock.advance(by: .seconds(1))
        _ = try await sut.load()
        #expect(client.requests.count == 1, "an entry exactly max-age old is stale")
    }

    // MARK: conditional requests

    @Test(arguments: [
        (CacheValidators(etag: "\"v1\""), ["If-None-Match": "\"v1\""]),
        (CacheValidators(lastModified: "Wed, 31 Dec 2025 23:00:00 GMT"), ["If-Modified-Since": "Wed, 31 Dec 2025 23:00:00 GMT"]),
        (CacheValidators(etag: "W/\"weak\"", lastModified: "Wed, 31 Dec 2025 23:00:00 GMT"),
         ["If-None-Match": "W/\"weak\"", "If-Modified-Since": "Wed, 31 Dec 2025 23:00:00 GMT"]),
        (CacheValidators.none, [:]),
    ])
    func staleEntry_sendsExactlyTheConditionalHeadersItsValidatorsAllow(validators: CacheValidators, expected: [String: String]) async throws {
        let (sut, client, store) = makeSUT(responses: [ok(itemB)], headers: ["Accept": "application/json"])
        try await seed(store, age: .seconds(120), validators: validators)

        _ = try await sut.load()

        let request = try #require(client.requests.first)
        #expect(request.headers == expected.merging(["Accept": "application/json"]) { a, _ in a })
        #expect(request.method == "GET")
        #expect(request.url == url)
    }

    @Test func emptyStore_sendsAnUnconditionalRequest() async throws {
        let (sut, client, _) = makeSUT(responses: [ok(itemA)])
        _ = try await sut.load()
        #expect(try #require(client.requests.first).headers.isEmpty)
    }

    @Test func conditionalHeadersOfTheBaseRequest_areReplacedWhateverTheirCase() async throws {
        let (sut, client, store) = makeSUT(responses: [notModified()], headers: ["if-none-match": "\"old\"", "IF-MODIFIED-SINCE": "x"])
        try await seed(store, age: .seconds(120), validators: .init(etag: etag, lastModified: lastModified))

        _ = try await sut.load()

        #expect(try #require(client.requests.first).headers == ["If-None-Match": etag, "If-Modified-Since": lastModified])
    }

    // MARK: 304

    @Test func notModified_restampsTheEntryWithoutRewritingIt_andServesTheCachedValue() async throws {
        let (sut, _, store) = makeSUT(responses: [notModified()])
        try await seed(store, age: .seconds(120), validators: .init(etag: etag, lastModified: lastModified, maxAge: .seconds(10)))

        let served = try await sut.loadServed()

        #expect(served.value == itemA)
        #expect(store.messages == [
            .retrieve("item"),
            .refresh("item", storedAt: clock.date, validators: .init(etag: etag, lastModified: lastModified, maxAge: .seconds(10))),
        ])
        #expect(try await store.base.retrieve("item") == CacheEntry(
            value: itemA, storedAt: clock.date, validators: .init(etag: etag, lastModified: lastModified, maxAge: .seconds(10))))
        #expect(served.provenance.origin == .remote)
        #expect(served.provenance.age == .zero)
        #expect(served.provenance.storedAt == nil)
        #expect(served.events.contains { if case .revalidated(_, key: "item") = $0 { true } else { false } })
        #expect(!served.events.contains { if case .cacheWritten = $0 { true } else { false } })
    }

    @Test func notModified_doesNotReencodeTheValue() async throws {
        let costs = Locked(0)
        let memory = MemoryStore<String, Item>(cost: { _ in costs.withLock { $0 += 1 }; return 1 })
        let client = ScriptedHTTPClient([notModified()])
        let sut = HTTPLoader(url: url, transport: client)
            .revalidated(in: memory, key: "item", freshness: .maxAge(.seconds(60))) { response in
                try JSONDecoder().decode(Item.self, from: response.body)
            }.environment(LoadEnvironment(now: clock.wallClock, logger: quietLogger))
        try await memory.insert(itemA, for: "item", storedAt: clock.date - 120, validators: .init(etag: etag))
        #expect(costs.withLock { $0 } == 1)

        #expect(try await sut.load() == itemA)

        #expect(costs.withLock { $0 } == 1, "a 304 re-stamps in place: the value is not inserted (or measured) again")
        #expect(try await memory.retrieve("item")?.storedAt == clock.date)
    }

    @Test func notModified_takesNewValidatorsAndFreshnessFromThe304_andKeepsTheRest() async throws {
        let (sut, _, store) = makeSUT(responses: [notModified(headers: ["etag": "\"v2\"", "Cache-Control": "max-age=90"])])
        try await seed(store, age: .seconds(120), validators: .init(etag: etag, lastModified: lastModified, maxAge: .seconds(10)))

        _ = try await sut.load()

        #expect(try await store.base.retrieve("item")?.validators == .init(etag: "\"v2\"", lastModified: lastModified, maxAge: .seconds(90)))
    }

    @Test func notModifiedWithNoStore_servesTheCachedValueAndLeavesTheEntryAlone() async throws {
        let (sut, _, store) = makeSUT(responses: [notModified(headers: ["Cache-Control": "no-store"])])
        try await seed(store, age: .seconds(120), validators: .init(etag: etag))

        #expect(try await sut.load() == itemA)

        #expect(store.messages == [.retrieve("item")])
        #expect(try await store.base.retrieve("item")?.storedAt == clock.date - 120)
    }

    @Test func notModified_toAnUnconditionalRequest_isAStatusError() async throws {
        let (sut, _, store) = makeSUT(responses: [notModified()])
        try await seed(store, age: .seconds(120), validators: .none)

        await #expect {
            try await sut.load()
        } throws: { error in
            (error as? HTTPError)?.statusCode == 304
        }
        #expect(store.messages == [.retrieve("item")])
    }

    @Test func notModified_whenTheEntryVanishedMeanwhile_servesTheValueAndStoresNothing() async throws {
        let client = ScriptedHTTPClient([notModified()])
        let store = DeletingOnRefreshStore()
        let sut = HTTPLoader(url: url, transport: client)
            .revalidated(in: store, key: "item", freshness: .maxAge(.seconds(60)), decoding: Item.self).environment(LoadEnvironment(now: clock.wallClock, logger: quietLogger))
        try await store.insert(itemA, for: "item", storedAt: clock.date - 120, validators: .init(etag: etag))

        let served = try await sut.loadServed()

        #expect(served.value == itemA)
        #expect(try await store.retrieve("item") == nil)
        #expect(!served.events.contains { if case .revalidated = $0 { true } else { false } })
    }

    @Test func failedRestamp_neverFailsTheLoad() async throws {
        let (sut, _, store) = makeSUT(responses: [notModified()])
        try await seed(store, age: .seconds(120), validators: .init(etag: etag))
        store.faults.refresh = TestError("disk full")

        let served = try await sut.loadServed()

        #expect(served.value == itemA)
        #expect(served.events.contains { if case .cacheWriteFailed(_, "item", let error) = $0 { "\(error)" == "disk full" } else { false } })
        #expect(try await store.base.retrieve("item")?.storedAt == clock.date - 120, "the previous entry is kept")
    }

    // MARK: 200

    @Test func ok_decodesStoresValueAndValidators_andReportsRemote() async throws {
        let (sut, _, store) = makeSUT(responses: [ok(itemB, headers: [
            "ETag": "\"v2\"", "last-modified": lastModified, "Cache-Control": "public, max-age=300",
        ])])
        try await seed(store, age: .seconds(120), validators: .init(etag: etag))

        let served = try await sut.loadServed()

        #expect(served.value == itemB)
        #expect(try await store.base.retrieve("item") == CacheEntry(
            value: itemB, storedAt: clock.date, validators: .init(etag: "\"v2\"", lastModified: lastModified, maxAge: .seconds(300))))
        #expect(served.provenance.origin == .remote)
        #expect(served.provenance.age == .zero)
        #expect(served.events.contains { if case .cacheWritten(_, "item") = $0 { true } else { false } })
    }

    @Test(arguments: [true, false])
    func ok_withNoStore_writesNothingAndLeavesTheEntryAlone_whenHonoured(honours: Bool) async throws {
        let (sut, _, store) = makeSUT(honorsCacheControl: honours, responses: [ok(itemB, headers: ["Cache-Control": "private, No-Store"])])
        try await seed(store, age: .seconds(120), validators: .init(etag: etag))

        #expect(try await sut.load() == itemB)

        let entry = try await store.base.retrieve("item")
        #expect(entry?.value == (honours ? itemA : itemB))
        #expect(entry?.storedAt == (honours ? clock.date - 120 : clock.date))
    }

    @Test(arguments: [true, false])
    func ok_withNoCache_isRevalidatedOnEveryLoad_whenHonoured(honours: Bool) async throws {
        let (sut, client, _) = makeSUT(honorsCacheControl: honours, responses: [
            ok(itemA, headers: ["ETag": etag, "Cache-Control": "no-cache"]), notModified(),
        ])
        _ = try await sut.load()
        clock.advance(by: .seconds(1))
        #expect(try await sut.load() == itemA)

        #expect(client.requests.count == (honours ? 2 : 1))
        if honours { #expect(client.requests.last?.headers["If-None-Match"] == etag) }
    }

    @Test func partialContent_isServedButNotStored() async throws {
        let (sut, _, store) = makeSUT(responses: [ok(itemB, status: 206)])
        #expect(try await sut.load() == itemB)
        #expect(try await store.base.retrieve("item") == nil)
    }

    @Test(arguments: [
        (["Cache-Control": "max-age=60"], Duration?.some(.seconds(60))),
        (["Cache-Control": "max-age=60", "Age": "20"], .some(.seconds(40))),
        (["Cache-Control": "max-age=60", "Age": "90"], .some(.zero)),
        (["Cache-Control": "max-age=60", "Age": "x"], .some(.seconds(60))),
        (["Cache-Control": "max-age=60", "Expires": "Thu, 01 Jan 2026 01:00:00 GMT"], .some(.seconds(60))),
        (["Expires": "Thu, 01 Jan 2026 01:00:00 GMT"], .some(.seconds(3_600))),
        (["Expires": "Thu, 01 Jan 2026 01:00:00 GMT", "Date": "Thu, 01 Jan 2026 00:30:00 GMT"], .some(.seconds(1_800))),
        (["Expires": "Wed, 31 Dec 2025 00:00:00 GMT"], .some(.zero)),
        (["Expires": "0"], .some(.zero)),
        (["Cache-Control": "no-cache, max-age=600"], .some(.zero)),
        (["Cache-Control": "s-maxage=600"], nil),
        (["Cache-Control": "max-age=abc", "Expires": "Thu, 01 Jan 2026 00:10:00 GMT"], .some(.seconds(600))),
        ([:], nil),
    ])
    func freshnessLifetime_fromMaxAgeExpiresDateAndAge(headers: [String: String], expected: Duration?) {
        let response = fields(headers)
        #expect(response.freshnessLifetime(receivedAt: referenceDate) == expected)
    }

    // MARK: failures

    @Test(arguments: [400, 404, 500, 503])
    func errorStatus_isTheTypedErrorAndTheEntryIsUntouched(status: Int) async throws {
        let (sut, _, store) = makeSUT(responses: [.success(HTTPReply(url: url, statusCode: status, body: Data("nope".utf8)))])
        try await seed(store, age: .seconds(120), validators: .init(etag: etag))

        await #expect {
            try await sut.load()
        } throws: { error in
            guard case HTTPError.status(status, url, _, let body) = error else { return false }
            return body == Data("nope".utf8)
        }
        #expect(store.messages == [.retrieve("item")])
        #expect(try await store.base.retrieve("item")?.storedAt == clock.date - 120)
    }

    @Test func transportFailure_passesThroughTyped() async throws {
        let (sut, _, store) = makeSUT(responses: [.failure(HTTPError.transport(url: url, reason: "could not connect", underlying: nil))])
        try await seed(store, age: .seconds(120), validators: .init(etag: etag))

        await #expect {
            try await sut.load()
        } throws: { error in
            guard case HTTPError.transport(url, "could not connect", _) = error else { return false }
            return true
        }
        #expect(store.messages == [.retrieve("item")])
    }

    @Test func undecodableBody_isADecodingErrorWithTheURL_andNothingIsWritten() async throws {
        let (sut, _, store) = makeSUT(responses: [.success(HTTPReply(url: url, statusCode: 200, body: Data("{\"id\":1}".utf8)))])

        let error = await #expect(throws: HTTPError.self) { try await sut.loadServed() }

        guard case .decoding(url, "Item", _)? = error else {
            Issue.record("expected a decoding error, got \(String(describing: error))")
            return
        }
        #expect(store.messages == [.retrieve("item")])
    }

    @Test func aStaleCopyIsServedByAFallbackAfterAnError() async throws {
        let (sut, _, store) = makeSUT(responses: [.success(HTTPReply(url: url, statusCode: 503))])
        try await seed(store, age: .seconds(120), validators: .init(etag: etag))
        let chain = sut.named("remote").fallingBack(to: store.loader(key: "item", freshness: .any).environment(\.now, clock.wallClock).named("stale"))

        let served = try await chain.loadServed()

        #expect(served.value == itemA)
        #expect(served.provenance.tier == "stale")
        #expect(served.provenance.age == .seconds(120))
    }

    @Test func failedWrite_neverFailsTheLoad() async throws {
        let (sut, _, store) = makeSUT(responses: [ok(itemB, headers: ["ETag": "\"v2\""])])
        try await seed(store, age: .seconds(120), validators: .init(etag: etag))
        store.faults.insert = TestError("read-only")

        let served = try await sut.loadServed()

        #expect(served.value == itemB)
        #expect(served.events.contains { if case .cacheWriteFailed(_, "item", _) = $0 { true } else { false } })
        #expect(try await store.base.retrieve("item")?.value == itemA)
    }

    @Test func failedRead_isAMiss_andTheRequestIsUnconditional() async throws {
        let (sut, client, store) = makeSUT(responses: [ok(itemB)])
        try await seed(store, age: .seconds(1), validators: .init(etag: etag))
        store.faults.retrieve = TestError("unreadable")

        #expect(try await sut.load() == itemB)
        #expect(try #require(client.requests.first).headers.isEmpty)
    }

    @Test func cancelledWhileTheRequestRuns_throwsCancellation_andWritesNothing() async throws {
        let client = ScriptedHTTPClient([ok(itemB)], cancelsCallerOnSend: true)
        let store = StoreSpy(MemoryStore<String, Item>())
        let sut = HTTPLoader(url: url, transport: client)
            .revalidated(in: store, key: "item", freshness: .maxAge(.seconds(60)), decoding: Item.self).environment(LoadEnvironment(now: clock.wallClock, logger: quietLogger))

        let task = Task { try await sut.load() }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(store.messages == [.retrieve("item")])
    }

    // MARK: forms

    @Test func keyedForm_storesUnderTheKeyFromTheInput() async throws {
        let client = ScriptedHTTPClient([ok(itemA, headers: ["ETag": etag]), notModified()])
        let store = MemoryStore<String, Item>()
        let sut = HTTPLoader.get(transport: client) { (id: Int) in URL(string: "https://api.example.com/items/\(id)")! }
            .revalidated(in: store, freshness: .maxAge(.zero), decoding: Item.self) { id in "item-\(id)" }.environment(LoadEnvironment(now: clock.wallClock, logger: quietLogger))

        #expect(try await sut.load(1) == itemA)
        #expect(try await sut.load(1) == itemA)

        #expect(store.keys == ["item-1"])
        #expect(client.requests.map(\.url.path) == ["/items/1", "/items/1"])
        #expect(client.requests.last?.headers["If-None-Match"] == etag)
    }

    @Test func keyedForm_withADecodeClosure() async throws {
        let client = ScriptedHTTPClient([.success(HTTPReply(url: url, statusCode: 200, body: Data("b".utf8)))])
        let store = MemoryStore<Int, String>()
        let sut = HTTPLoader.get(transport: client) { (id: Int) in URL(string: "https://api.example.com/raw/\(id)")! }
            .revalidated(in: store, freshness: .maxAge(.seconds(60))) { id in id } decode: { response in
                String(decoding: response.body, as: UTF8.self)
            }.environment(LoadEnvironment(now: clock.wallClock, logger: quietLogger))

        #expect(try await sut.load(7) == "b")
        #expect(try await store.retrieve(7)?.value == "b")
    }

    @Test func description_namesTheRequestStoreAndPolicy() {
        let (sut, _, _) = makeSUT(responses: [])
        #expect(sut.description == "HTTP GET https://api.example.com/items/1 + revalidated(in: MemoryStore, max age 1m 0s, Cache-Control)")
    }

    @Test func revalidatedEvent_describesItself_andIsNotAServingTier() {
        let served = Provenance(origin: .remote, tier: "remote", age: .zero)
        let events: [LoadEvent] = [.served(served), .revalidated(store: "FileStore(/c)", key: "feed")]
        #expect(servingProvenance(in: events) == served)
        #expect(events[1].description == "revalidated: feed in FileStore(/c) (304 Not Modified)")
    }
}

/// `Cache-Control` parsing, one row per header value.
@Suite("Cache-Control parsing")
struct CacheControlTests {
    @Test(arguments: [
        ("max-age=60", CacheControl(maxAge: .seconds(60))),
        ("MAX-AGE=60", CacheControl(maxAge: .seconds(60))),
        ("  max-age = 60  ", CacheControl(maxAge: .seconds(60))),
        ("max-age=\"60\"", CacheControl(maxAge: .seconds(60))),
        ("public, max-age=0", CacheControl(maxAge: .zero)),
        ("no-store", CacheControl(noStore: true)),
        ("No-Cache", CacheControl(noCache: true)),
        ("private, no-cache, no-store, max-age=5", CacheControl(maxAge: .seconds(5), noStore: true, noCache: true)),
        ("no-cache=\"Set-Cookie, X-Foo\", max-age=30", CacheControl(maxAge: .seconds(30), noCache: true)),
        ("community=\"UCI, max-age=99\", max-age=7", CacheControl(maxAge: .seconds(7))),
        ("ext=\"a \\\" quote, max-age=99\", max-age=8", CacheControl(maxAge: .seconds(8))),
        ("s-maxage=600", CacheControl()),
        ("s-maxage=600, max-age=60", CacheControl(maxAge: .seconds(60))),
        ("max-age=abc", CacheControl()),
        ("max-age=-1", CacheControl()),
        ("max-age=1.5", CacheControl()),
        ("max-age=", CacheControl()),
        ("max-age", CacheControl()),
        ("max-age=6 0", CacheControl()),
        ("max-age=abc, max-age=30", CacheControl(maxAge: .seconds(30))),
        ("max-age=10, max-age=30", CacheControl(maxAge: .seconds(10))),
        ("max-age=99999999999999999999999", CacheControl(maxAge: .seconds(CacheControl.maxDeltaSeconds))),
        ("max-age=3000000000", CacheControl(maxAge: .seconds(CacheControl.maxDeltaSeconds))),
        (",,, ,max-age=1,,", CacheControl(maxAge: .seconds(1))),
        ("max-age=\"unterminated", CacheControl()),
        ("", CacheControl()),
        ("must-revalidate, proxy-revalidate, immutable", CacheControl()),
    ])
    func parses(fieldValue: String, expected: CacheControl) {
        #expect(CacheControl(parsing: fieldValue) == expected)
    }

    @Test func responseHeaderLookup_isCaseInsensitive() {
        let response = fields(["cache-control": "no-store"])
        #expect(response.cacheControl == CacheControl(noStore: true))
    }
}

@Suite("Store.refresh")
struct StoreRefreshTests {
    @Test func defaultImplementation_restampsAnExistingEntryAndKeepsItsValue() async throws {
        let store = PlainStore()
        try await store.insert(itemA, for: "k", storedAt: referenceDate, validators: .init(etag: "\"a\""))

        let later = referenceDate.addingTimeInterval(300)
        #expect(try await store.refresh("k", storedAt: later, validators: .init(etag: "\"b\"", maxAge: .seconds(5))))

        #expect(try await store.retrieve("k") == CacheEntry(value: itemA, storedAt: later, validators: .init(etag: "\"b\"", maxAge: .seconds(5))))
    }

    @Test func defaultImplementation_ofAMissingKey_isFalseAndStoresNothing() async throws {
        let store = PlainStore()
        #expect(try await store.refresh("missing", storedAt: referenceDate, validators: .none) == false)
        #expect(try await store.retrieve("missing") == nil)
    }

    @Test func memoryStore_restampsInPlace_marksTheEntryRecent_andOfAMissingKeyIsFalse() async throws {
        let store = MemoryStore<String, Item>()
        try await store.insert(itemA, for: "a", storedAt: referenceDate)
        try await store.insert(itemB, for: "b", storedAt: referenceDate)

        #expect(try await store.refresh("a", storedAt: referenceDate + 60, validators: .init(lastModified: "x")))
        #expect(try await store.refresh("c", storedAt: referenceDate, validators: .none) == false)

        #expect(store.keys == ["a", "b"])
        #expect(store.count == 2)
        let entry = try await store.retrieve("a")
        #expect(entry == CacheEntry(value: itemA, storedAt: referenceDate + 60, validators: .init(lastModified: "x")))
    }

    @Test func fileStore_refreshOfAMissingKey_createsNoFile() async throws {
        let directory = try TemporaryDirectory()
        let store = FileStore<Item>(directory: directory.appending("cache"), logger: quietLogger)
        #expect(try await store.refresh("missing", storedAt: referenceDate, validators: .none) == false)
        #expect(!FileManager.default.fileExists(atPath: store.fileURL(for: "missing").path))
    }
}

// MARK: - Test doubles

/// An HTTP client that answers with scripted results in order (the last repeats) and records every
/// request. With `cancelsCallerOnSend`, it cancels the calling task before answering, so a test sees
/// a cancellation that lands while the request is in flight, without timing.
final class ScriptedHTTPClient: HTTPTransport, Sendable {
    private let results: [Result<HTTPReply, any Error>]
    private let cancelsCallerOnSend: Bool
    private let recorded = Locked<[SentRequest]>([])

    init(_ results: [Result<HTTPReply, any Error>], cancelsCallerOnSend: Bool = false) {
        self.results = results
        self.cancelsCallerOnSend = cancelsCallerOnSend
    }

    var requests: [SentRequest] { recorded.withLock { $0 } }

    func send(_ request: HTTPRequest, body: Data?, options: HTTPRequestOptions) async throws -> HTTPReply {
        let request = SentRequest(request: request, body: body, options: options)
        let index = recorded.withLock { recorded -> Int in
            recorded.append(request)
            return recorded.count - 1
        }
        if cancelsCallerOnSend { withUnsafeCurrentTask { $0?.cancel() } }
        guard !results.isEmpty else { throw TestError("no scripted response for request \(index + 1)") }
        return try results[min(index, results.count - 1)].get()
    }
}

/// A store with no `refresh` of its own, so the protocol's default implementation runs.
final class PlainStore: Store, Sendable {
    private let entries = Locked<[String: CacheEntry<Item>]>([:])
    func retrieve(_ key: String) async throws -> CacheEntry<Item>? { entries.withLock { $0[key] } }
    func insert(_ entry: CacheEntry<Item>, for key: String) async throws { entries.withLock { $0[key] = entry } }
    func delete(_ key: String) async throws { entries.withLock { $0[key] = nil } }
}

/// A store whose entry disappears when it is refreshed (as if deleted by another task meanwhile).
final class DeletingOnRefreshStore: Store, Sendable {
    private let entries = Locked<[String: CacheEntry<Item>]>([:])
    func retrieve(_ key: String) async throws -> CacheEntry<Item>? { entries.withLock { $0[key] } }
    func insert(_ entry: CacheEntry<Item>, for key: String) async throws { entries.withLock { $0[key] = entry } }
    func delete(_ key: String) async throws { entries.withLock { $0[key] = nil } }
    func refresh(_ key: String, storedAt: Date, validators: CacheValidators) async throws -> Bool {
        entries.withLock { $0[key] = nil }
        return false
    }
}

extension PlainStore {
    func removeAll() async throws { entries.withLock { $0 = [:] } }
}

extension DeletingOnRefreshStore {
    func removeAll() async throws { entries.withLock { $0 = [:] } }
}
