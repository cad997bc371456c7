import NIOCore
@_spi(StrataInternals) import Strata
import Testing
@testable import StrataProxy

/// The request body `strata proxy` streams to its upstream.
@Suite("LimitedBody: a client's request body, streamed once to the upstream", .timeLimit(.minutes(1)))
struct LimitedBodyTests {
    /// A body in three parts.
    static func parts(_ sizes: [Int]) -> AsyncStream<ByteBuffer> {
        AsyncStream { continuation in
            for size in sizes { continuation.yield(ByteBuffer(repeating: 0x61, count: size)) }
            continuation.finish()
        }
    }

    @Test("it passes every byte up to its limit, and ends with TooLarge past it")
    func theLimit() async throws {
        var total = 0
        for try await part in LimitedBody(base: Self.parts([3, 4, 5]), limit: 12) { total += part.readableBytes }
        #expect(total == 12)
        await #expect(throws: LimitedBody<AsyncStream<ByteBuffer>>.TooLarge.self) {
            for try await _ in LimitedBody(base: Self.parts([3, 4, 5]), limit: 11) {}
        }
    }

    @Test("an attempt that read nothing (its connection was closed before the request went out) leaves the whole body to the next")
    func anUnreadAttempt_leavesTheBody() async throws {
        let body = LimitedBody(base: Self.parts([3, 4]), limit: 100)
        _ = body.makeAsyncIterator()  // the first attempt, dropped before it sent anything
        var total = 0
        for try await part in body { total += part.readableBytes }
        #expect(total == 7)
    }

    @Test("a second iterator (AsyncHTTPClient sending the request again on a new connection) fails with SentOnce instead of trapping; the first reads on")
    func aSecondIterator_fails() async throws {
        let body = LimitedBody(base: Self.parts([3, 4]), limit: 100)
        var first = body.makeAsyncIterator()
        #expect(try await first.next()?.readableBytes == 3)
        let copy = body  // a copy shares the record of having been read
        var second = copy.makeAsyncIterator()
        await #expect(throws: LimitedBody<AsyncStream<ByteBuffer>>.SentOnce.self) { _ = try await second.next() }
        #expect(try await first.next()?.readableBytes == 4)
        #expect(try await first.next() == nil)
    }

    /// A body whose parts come when the test sends them, and which counts the reads asked of it.
    final class Paced: AsyncSequence, Sendable {
        typealias Element = ByteBuffer
        let stream: AsyncStream<ByteBuffer>
        let source: AsyncStream<ByteBuffer>.Continuation
        init() { (stream, source) = AsyncStream.makeStream() }
        func makeAsyncIterator() -> AsyncStream<ByteBuffer>.AsyncIterator { stream.makeAsyncIterator() }
    }

    @Test("with a declared length, the body ends at its last byte with no further read of the client's body (which the server then reads)")
    func aDeclaredLength_endsWithoutAnotherRead() async throws {
        let paced = Paced()
        let body = LimitedBody(base: paced, limit: 100, length: 7)
        var iterator = body.makeAsyncIterator()
        paced.source.yield(ByteBuffer(repeating: 0x61, count: 3))
        paced.source.yield(ByteBuffer(repeating: 0x62, count: 4))
        #expect(try await iterator.next()?.readableBytes == 3)
        #expect(try await iterator.next()?.readableBytes == 4)
        // The client's body has not ended (no finish): a read would wait. It is not made.
        #expect(try await iterator.next() == nil)
        await body.close()
        paced.source.finish()
    }

    @Test("close() returns only once the read in progress has ended, and a read after it ends the body")
    func close_waitsForTheReadInProgress() async throws {
        let paced = Paced()
        let body = LimitedBody(base: paced, limit: 100)
        let events = Locked<[String]>([])
        let reader = Task {
            var iterator = body.makeAsyncIterator()
            while try await iterator.next() != nil { events.withLock { $0.append("read") } }
            events.withLock { $0.append("ended") }
        }
        // The reader's first read waits for the client; close() then waits for it.
        while !body.state.withLock({ $0.reading }) { await Task.yield() }
        let closing = Task {
            await body.close()
            events.withLock { $0.append("closed") }
        }
        while body.state.withLock({ $0.idle.isEmpty }) { await Task.yield() }
        #expect(events.withLock { $0 }.isEmpty, "close() returned while a read was in progress")
        paced.source.yield(ByteBuffer(repeating: 0x61, count: 3))
        await closing.value
        try await reader.value
        // The read in progress delivered its bytes, and the next one found the body closed.
        #expect(events.withLock { $0 }.sorted() == ["closed", "ended", "read"])
        paced.source.finish()
    }
}
