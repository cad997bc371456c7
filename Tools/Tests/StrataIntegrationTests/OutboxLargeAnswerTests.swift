import Foundation
import Testing
@_spi(StrataInternals) import Strata
import StrataOutbox
import DemoServer
import StrataTesting

/// An outbox write whose answer has a body over the request's limit: the status
/// decides, not the size. A real ``Outbox`` sends through each real transport to the demo server,
/// which answers writes with a body no client reads to the end (a terabyte, generated as it is sent,
/// chunked or with its `Content-Length`) while the outbox's limit is 32 KiB: the transfer ends only
/// because the client closes the connection once it has the status, as the server sees it.
// Serialized: each case streams an endless body until the client closes; many at once on two
// cores starved every other suite in the process (a PostgreSQL read went unanswered for 30 s).
@Suite("Outbox: the status of an answer over the body limit decides", .serialized, .timeLimit(.minutes(1)))
struct OutboxLargeAnswerTests {
    static let limit = 32 * 1024
    static let answerSize = 1 << 40

    /// An outbox over memory whose HTTP writes go through `kind` with a body limit of 32 KiB.
    static func outbox(
        _ kind: TransportKind, conflicts: OutboxConflictPolicy = .manual,
        refreshAuthorization: (@Sendable () async throws -> Void)? = nil
    ) -> Outbox {
        let outbox = Outbox(storage: MemoryOutboxStorage(), name: "large-answers", environment: ManualClock().environment())
        outbox.registerHTTP(
            transport: kind.make(), options: HTTPRequestOptions(maxBodyBytes: limit), conflicts: conflicts,
            refreshAuthorization: refreshAuthorization)
        return outbox
    }

    static func enqueuePost(_ outbox: Outbox, to server: DemoServer, title: String) async throws -> OutboxEntry {
        var request = HTTPRequest(method: .post, url: server.baseURL.appendingPathComponent("posts"))
        request.headerFields[.contentType] = "application/json"
        return try await outbox.enqueue(request, body: try JSONEncoder().encode(NewPost(title: title, body: "large answer")))
    }

    @Test("a 2xx with a body over the limit was applied: the write is delivered, and the body's transfer ends",
          arguments: TransportKind.allCases, [true, false])
    func successWithALargeBody_isDelivered(kind: TransportKind, declaresLength: Bool) async throws {
        try await withDemoServer { server in
            server.faults = .init(oversizedBody: Self.answerSize, declaresOversizedLength: declaresLength)
            let outbox = Self.outbox(kind)
            let entry = try await Self.enqueuePost(outbox, to: server, title: "applied")

            let report = try await outbox.drain()
            let left = try await outbox.entry(entry.id)
            #expect(report.delivered == 1 && report.parked == 0, "\(report); \(String(describing: left))")
            #expect(try await outbox.entries().isEmpty)
            #expect(server.posts.values.filter { $0.title == "applied" }.count == 1)
            #expect(server.idempotencyKey(entry.idempotencyKey)?.applied == 1)
            let streamed = await server.waitForStreamedBodies(count: 1)
            #expect(streamed.first?.closedByClient == true, "\(streamed)")
        }
    }

    @Test("a 401 with a body over the limit runs the refresh hook, and the write is sent once more",
          arguments: TransportKind.allCases, [true, false])
    func unauthorizedWithALargeBody_refreshesAuthorization(kind: TransportKind, declaresLength: Bool) async throws {
        try await withDemoServer { server in
            server.faults = .init(
                oversizedBody: Self.answerSize, declaresOversizedLength: declaresLength, writeFault: .status(401),
                remainingWriteFaults: 1)
            let refreshes = Locked(0)
            let outbox = Self.outbox(kind, refreshAuthorization: { refreshes.withLock { $0 += 1 } })
            let entry = try await Self.enqueuePost(outbox, to: server, title: "after refresh")

            let report = try await outbox.drain()
            let left = try await outbox.entry(entry.id)
            #expect(refreshes.withLock { $0 } == 1)
            #expect(report.delivered == 1, "\(report); \(String(describing: left))")
            #expect(server.requests.filter { $0.method == "POST" }.count == 2)
            #expect(server.posts.values.filter { $0.title == "after refresh" }.count == 1)
        }
    }

    @Test("a 409 or 412 with a body over the limit goes to the conflict policy, with the body cut at the limit",
          arguments: TransportKind.allCases, [409, 412])
    func conflictWithALargeBody_reachesTheConflictPolicy(kind: TransportKind, status: Int) async throws {
        for declaresLength in [true, false] {
            try await withDemoServer { server in
                server.faults = .init(
                    oversizedBody: Self.answerSize, declaresOversizedLength: declaresLength,
                    writeFault: status == 409 ? .conflict : .status(status))
                let outbox = Self.outbox(kind)
                let entry = try await Self.enqueuePost(outbox, to: server, title: "conflicting")

                let report = try await outbox.drain()
                #expect(report.parked == 1, "\(report)")
                let parked = try #require(try await outbox.entry(entry.id)?.deadLetter)
                #expect(parked.reason == .conflict, "\(parked)")
                #expect(parked.status == status)
                // Cut at the limit: nothing of it when its Content-Length decided.
                #expect(parked.body?.count == (declaresLength ? 0 : Self.limit), "\(parked.body?.count ?? -1) bytes kept")
                #expect(server.posts.isEmpty)
                let streamed = await server.waitForStreamedBodies(count: 1)
                #expect(streamed.first?.closedByClient == true, "\(streamed)")
            }
        }
    }
}
