import NIOCore
import Testing
@testable import StrataProxy

/// The request body `strata proxy` streams to its upstream.
@Suite("LimitedBody: a client's request body, streamed once to the upstream")
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
}
