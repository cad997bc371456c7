import Foundation
import Testing
@_spi(StrataInternals) import Strata
import StrataOutbox
import StrataQueries
import StrataTesting

/// A change another process makes reaches this process's live queries once this process is told,
/// with a real second process: `strata-crash-writer` stands in for a share
/// extension or a widget, on the same files. On iOS the telling is a Darwin notification (the guide
/// "Offline writes"); here the test calls what the notification's handler would.
@Suite("A change made by another process reaches the screen", .serialized, .timeLimit(.minutes(2)))
struct ChangedElsewhereProcessTests {
    /// What the writer's queued HTTP writes carry that the screen shows: the post's title.
    struct Post: Decodable {
        var title: String
    }

    @Test func writesAnotherProcessQueued_showAsPendingOnceTheOutboxIsTold() async throws {
        let directory = try TemporaryDirectory(prefix: "strata-elsewhere-outbox")
        let outboxDirectory = directory.appending("outbox")
        let app = Outbox(storage: FileOutboxStorage(directory: outboxDirectory), name: "app")
        app.connectivityChanged(isOnline: false)
        let queries = QueryClient()
        let remote = LoaderSpy<Void, [String]>(.success(["from the server"]))
        let pending = PendingWrites<[String]>(app, scope: "shared") { writes, titles in
            titles + writes.compactMap { try? $0.decoded(Post.self).title }
        }
        let query = queries.query(["posts"], pendingWrites: pending, chain: remote.originating(from: .remote))
        let observer = Task { for await _ in query.snapshots() {} }
        defer { observer.cancel() }
        try await query.waitForObservers(1)
        try await query.settled()
        #expect(query.current.value == ["from the server"])

        // The other process queues round 1: posts 3 and 4 into `shared`, post 5 into `other`.
        let arguments = ["--store", "outbox-enqueue", "--path", outboxDirectory.path, "--count", "1", "--start", "1"]
        try await TwoProcessTests.offPool { try KillLoop.runToCompletion(arguments, stderrFile: directory.appending("writer-stderr")) }
        #expect(query.current.pendingWrites == 0, "not told yet")

        try await app.storageChangedElsewhere()
        try await query.settled()
        #expect(query.current.pendingWrites == 2)
        #expect(Set(query.current.value ?? []) == ["from the server", "crash-3", "crash-4"])
        #expect(Set(try await app.entries().map(\.scope)) == ["shared", "other"])
    }

    @Test func aValueAnotherProcessStored_showsOnceTheKeyIsInvalidated() async throws {
        let directory = try TemporaryDirectory(prefix: "strata-elsewhere-store")
        let cache = directory.appending("cache")
        let stderrFile = directory.appending("writer-stderr")
        func write(round: Int) async throws {
            let arguments = ["--store", "file", "--path", cache.path, "--key", "feed", "--count", "1", "--start", "\(round)"]
            try await TwoProcessTests.offPool { try KillLoop.runToCompletion(arguments, stderrFile: stderrFile) }
        }
        try await write(round: 1)
        let store = FileStore<CrashRecord>(directory: cache)
        let queries = QueryClient()
        let query = queries.query(["feed"], chain: store.loader(key: "feed"))
        let observer = Task { for await _ in query.snapshots() {} }
        defer { observer.cancel() }
        try await query.waitForObservers(1)
        try await query.settled()
        #expect(query.current.value?.seq == 1)

        try await write(round: 2)
        #expect(query.current.value?.seq == 1, "not told yet")
        queries.invalidate(prefix: ["feed"])
        try await query.settled()
        #expect(query.current.value?.seq == 2)
        #expect(query.current.value?.defect == nil)
    }
}
