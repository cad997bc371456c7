import Foundation
import Logging
import MetricsTestKit
@testable @_spi(StrataInternals) import Strata
@testable import StrataOutbox
import StrataTesting
import Testing

@Suite("overlayingPending(_:scope:apply:)", .timeLimit(.minutes(1)))
struct OverlayingPendingTests {
    struct Post: Codable, Equatable, Sendable {
        var id: String
        var title: String
    }

    static func postsRead(_ outbox: Outbox, base: Locked<[Post]>) -> some Loader<Void, [Post]> {
        ClosureLoader("posts endpoint") { base.withLock { $0 } }
            .originating(from: .remote)
            .named("posts")
            .overlayingPending(outbox, scope: { _ in "/posts" }) { pending, posts in
                posts + pending.compactMap { try? $0.decoded(Post.self) }
            }
    }

    @Test("a read shows pending writes on top, says pending (n), rebases on a fresh base, and drops them once delivered")
    func overlayLifecycle() async throws {
        let fixture = try OutboxFixture()
        let outbox = fixture.outbox()
        let base = Locked([Post(id: "1", title: "server")])
        let read = Self.postsRead(outbox, base: base)
        outbox.connectivityChanged(isOnline: false)
        let (request, _) = OutboxFixture.post()
        try await outbox.enqueue(request, body: try JSONEncoder().encode(Post(id: "tmp-a", title: "mine")))
        try await outbox.enqueue(request, body: try JSONEncoder().encode(Post(id: "tmp-b", title: "mine too")))

        let served = try await read.loadServed()
        #expect(served.value.map(\.id) == ["1", "tmp-a", "tmp-b"])
        #expect(served.provenance.pendingWrites == 2)
        #expect(served.provenance.description.contains("pending (2)"))
        #expect(served.provenance.origin == .remote)

        // A fresh base from the server: the still-pending writes go on top of it.
        base.withLock { $0 = [Post(id: "1", title: "server"), Post(id: "2", title: "someone else")] }
        #expect(try await read.load().map(\.id) == ["1", "2", "tmp-a", "tmp-b"])

        // Delivered: the server's value has them; no overlay.
        outbox.connectivityChanged(isOnline: true)
        try await outbox.drain()
        base.withLock { $0.append(contentsOf: [Post(id: "3", title: "mine"), Post(id: "4", title: "mine too")]) }
        let after = try await read.loadServed()
        #expect(after.value.map(\.id) == ["1", "2", "3", "4"])
        #expect(after.provenance.pendingWrites == 0)
    }

    @Test("a write delivered while the base loads is shown (read before the base), and one queued meanwhile too (read after)")
    func writeDeliveredDuringTheBaseReadIsNeverLost() async throws {
        let fixture = try OutboxFixture()
        let outbox = fixture.outbox()
        outbox.connectivityChanged(isOnline: false)
        let (request, _) = OutboxFixture.post()
        try await outbox.enqueue(request, body: try JSONEncoder().encode(Post(id: "tmp-a", title: "mine")))
        let server = Locked([Post(id: "1", title: "server")])
        // The base answers with what the server had when it read, and the write is delivered right
        // after that read, before the overlay looks at the pending writes: it is in neither unless
        // the overlay read them before the base too. A second write is queued at the same moment.
        let read = ClosureLoader("posts endpoint") { () async throws -> [Post] in
            let answered = server.withLock { $0 }
            outbox.connectivityChanged(isOnline: true)
            #expect(try await outbox.drain().delivered == 1)
            server.withLock { $0.append(Post(id: "2", title: "mine")) }
            outbox.connectivityChanged(isOnline: false)
            try await outbox.enqueue(request, body: try JSONEncoder().encode(Post(id: "tmp-b", title: "mine too")))
            return answered
        }
        .originating(from: .remote)
        .named("posts")
        .overlayingPending(outbox, scope: { _ in "/posts" }) { pending, posts in
            posts + pending.compactMap { try? $0.decoded(Post.self) }
        }

        let served = try await read.loadServed()
        #expect(served.value.map(\.id) == ["1", "tmp-a", "tmp-b"])
        #expect(served.provenance.pendingWrites == 2)
        #expect(fixture.server.requests.count == 1)
    }

    @Test("a write pending in both reads is applied once, as the later read has it")
    func writePendingInBothReadsIsAppliedOnce() throws {
        func entry(_ sequence: UInt64, title: String) throws -> OutboxEntry {
            OutboxEntry(
                id: UUID(), sequence: sequence, scope: "/posts", kind: "post",
                payload: try JSONEncoder().encode(Post(id: "\(sequence)", title: title)), host: nil, baseVersion: nil,
                createdAt: Date(timeIntervalSince1970: 0))
        }
        let first = try entry(1, title: "first")
        var rewritten = first
        rewritten.payload = try JSONEncoder().encode(Post(id: "1", title: "rewritten"))
        let second = try entry(2, title: "second")
        let third = try entry(3, title: "third")
        typealias Overlay = OverlayingPendingLoader<ClosureLoader<Void, [Post]>>
        // `second` was delivered in between, `third` queued in between, `first` rewritten.
        let union = Overlay.union(before: [first, second], after: [rewritten, third])
        #expect(union.map(\.sequence) == [1, 2, 3])
        #expect(try union.map { try $0.decoded(Post.self).title } == ["rewritten", "second", "third"])
        #expect(Overlay.union(before: [], after: [first]).map(\.id) == [first.id])
        #expect(Overlay.union(before: [first], after: []).map(\.id) == [first.id])
    }

    @Test("a parked write rolls back out of reads")
    func parkedWriteRollsBack() async throws {
        let server = ScriptedServer { request, _ in HTTPReply(url: request.url, statusCode: 422) }
        let fixture = try OutboxFixture(server: server)
        let outbox = fixture.outbox()
        let read = Self.postsRead(outbox, base: Locked([Post(id: "1", title: "server")]))
        outbox.connectivityChanged(isOnline: false)
        let (request, _) = OutboxFixture.post()
        try await outbox.enqueue(request, body: try JSONEncoder().encode(Post(id: "tmp", title: "invalid")))
        #expect(try await read.load().count == 2)
        outbox.connectivityChanged(isOnline: true)
        try await outbox.drain()
        #expect(try await read.load().map(\.id) == ["1"])
    }

    @Test("an outbox that cannot read its storage leaves reads as they are")
    func unreadableOutboxDoesNotFailReads() async throws {
        let fixture = try OutboxFixture()
        let blocked = fixture.directory.appending("file")
        try Data().write(to: blocked)
        // The storage's directory is a file inside a file: listing it fails with ENOTDIR.
        let outbox = Outbox(
            storage: FileOutboxStorage(directory: blocked.appendingPathComponent("outbox")),
            environment: fixture.clock.environment(logger: fixture.logs.logger))
        let read = Self.postsRead(outbox, base: Locked([Post(id: "1", title: "server")]))
        #expect(try await read.load().map(\.id) == ["1"])
        #expect(fixture.logs.entries.contains { $0.message.contains("pending writes not shown") })
    }
}
