import Foundation
import Testing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

/// Many keys through one store read and one batch call, with a real memory store (counted by a
/// spy) and a manual clock.
@Suite("loadingMany(in:freshness:)", .timeLimit(.minutes(1)))
struct LoadingManyTests {
    let clock = ManualClock()
    let store = StoreSpy(MemoryStore<String, String>())

    func many(_ remote: LoaderSpy<[String], [String: String]>) -> some Loader<[String], [String: String]> {
        remote.loadingMany(in: store, freshness: .maxAge(.seconds(60))).environment(clock.environment(logger: quietLogger))
    }

    @Test func freshEntriesAnswer_andTheRestGoToTheRemoteInOneCall_andAreWritten() async throws {
        try await store.base.insert("cached a", for: "a", storedAt: clock.date)
        try await store.base.insert("old b", for: "b", storedAt: clock.date.addingTimeInterval(-120))
        let remote = LoaderSpy<[String], [String: String]>(.success(["b": "new b", "c": "new c"]))
        let answers = try await many(remote).load(["a", "b", "c", "a"])
        #expect(answers == ["a": "cached a", "b": "new b", "c": "new c"])
        #expect(remote.inputs == [["b", "c"]], "one call, for the stale and the missing keys, in order, once each")
        #expect(try await store.base.retrieve("b")?.value == "new b")
        #expect(try await store.base.retrieve("c")?.storedAt == clock.date)
    }

    @Test func everyKeyFresh_isServedByTheStore_withoutACall() async throws {
        try await store.base.insert("1", for: "a", storedAt: clock.date.addingTimeInterval(-10))
        try await store.base.insert("2", for: "b", storedAt: clock.date)
        let remote = LoaderSpy<[String], [String: String]>()
        let served = try await many(remote).loadServed(["a", "b"])
        #expect(served.value == ["a": "1", "b": "2"])
        #expect(served.provenance.storedAt == clock.date.addingTimeInterval(-10), "the oldest entry's store time")
        #expect(remote.loadCount == 0)
    }

    @Test func aKeyTheRemoteLeavesOut_isAbsent_andAFailedRemoteFailsTheLoad() async throws {
        let remote = LoaderSpy<[String], [String: String]>(.success(["a": "A"]), .failure(URLError(.timedOut)))
        #expect(try await many(remote).load(["a", "gone"]) == ["a": "A"])
        #expect(try await store.base.retrieve("gone") == nil)
        await #expect(throws: URLError.self) { try await many(remote).load(["x"]) }
    }

    @Test func aStoreThatFails_isAMissForEveryKey() async throws {
        store.faults = .init(retrieve: URLError(.cannotOpenFile))
        let remote = LoaderSpy<[String], [String: String]>(.success(["a": "A", "b": "B"]))
        #expect(try await many(remote).load(["a", "b"]) == ["a": "A", "b": "B"])
        #expect(remote.inputs == [["a", "b"]])
    }

    @Test func noKeys_noWork() async throws {
        let remote = LoaderSpy<[String], [String: String]>()
        #expect(try await many(remote).load([]) == [:])
        #expect(store.messages.isEmpty && remote.loadCount == 0)
    }
}
