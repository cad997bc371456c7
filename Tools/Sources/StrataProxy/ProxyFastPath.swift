import Foundation
import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// Answers a plain GET of a fresh memory-tier entry on the connection's event loop, before the
/// request reaches the async server: no hop to the concurrency pool and back, which is where a hit
/// spent about a third of its CPU time (see docs/BENCHMARKS.md). Everything else passes through
/// untouched (``CachingProxy/immediateHit(_:)`` says which requests qualify).
///
/// - Order: HTTP/1.1 answers go back in the order of the requests. While a request it passed on
///   has not been answered (its response's `end` has not come back through this handler), later
///   requests pass on too, so a hit never overtakes an earlier answer.
/// - A request it answered is swallowed whole (its body parts and end).
/// - Idle connections: with an `IdleStateHandler` in front of it, it closes a connection that read
///   and wrote nothing for the idle timeout, unless a request it passed on is still being
///   answered (a slow upstream is not the client's idleness).
///
/// One per connection, used only on that connection's event loop.
final class ProxyFastPath: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    let proxy: CachingProxy
    /// Requests passed on whose answers have not ended yet.
    private var passedOn = 0
    /// Answers (its own, or passed on) whose last write has not completed: a slow client still
    /// reading a large body is not idle.
    private var sending = 0
    /// The rest of a request it answered is dropped until its end.
    private var swallowing = false

    init(proxy: CachingProxy) {
        self.proxy = proxy
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        if swallowing {
            if case .end = part { swallowing = false }
            return
        }
        guard case .head(let head) = part else {
            context.fireChannelRead(data)
            return
        }
        if passedOn == 0, let answer = proxy.immediateHit(head) {
            swallowing = true
            var fields = answer.fields
            fields[.contentLength] = "\(answer.body.count)"
            context.write(wrapOutboundOut(.head(HTTPResponse(status: answer.status, headerFields: fields))), promise: nil)
            if !answer.body.isEmpty {
                var buffer = context.channel.allocator.buffer(capacity: answer.body.count)
                buffer.writeBytes(answer.body)
                context.write(wrapOutboundOut(.body(buffer)), promise: nil)
            }
            sending += 1
            let promise = context.eventLoop.makePromise(of: Void.self)
            let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
            promise.futureResult.whenComplete { _ in handler.value.sending -= 1 }
            context.write(wrapOutboundOut(.end(nil)), promise: promise)
            return
        }
        passedOn += 1
        context.fireChannelRead(data)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        context.flush()
        context.fireChannelReadComplete()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .end = unwrapOutboundIn(data) else {
            context.write(data, promise: promise)
            return
        }
        // The answer is over once its end is written out, not when it is queued.
        sending += 1
        let written = context.eventLoop.makePromise(of: Void.self)
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        written.futureResult.whenComplete { _ in
            handler.value.sending -= 1
            if handler.value.passedOn > 0 { handler.value.passedOn -= 1 }
        }
        written.futureResult.cascade(to: promise)
        context.write(data, promise: written)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is IdleStateHandler.IdleStateEvent {
            if passedOn == 0, sending == 0 { context.close(promise: nil) }
            return
        }
        context.fireUserInboundEventTriggered(event)
    }
}
