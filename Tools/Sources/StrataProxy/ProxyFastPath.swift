import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1

/// Answers a plain GET of a fresh memory-tier entry on the connection's event loop, before the
/// request reaches the async server: no hop to the concurrency pool and back, and no conversion of
/// the request into swift-http-types' `HTTPRequest` or of the answer out of it (both a large share of
/// a hit's CPU time: see docs/BENCHMARKS.md). It sits between NIO's HTTP/1 codec and
/// the conversion to swift-http-types (``Installer`` puts it there), so it reads NIO's request heads
/// and writes NIO's response heads. Everything else passes through untouched
/// (``CachingProxy/immediateHit(_:)-(HTTPRequestHead)`` says which requests qualify).
///
/// - Order: HTTP/1.1 answers go back in the order of the requests. While a request it passed on
///   has not been answered (its response's `end` has not come back through this handler), later
///   requests pass on too, so a hit never overtakes an earlier answer.
/// - A request it answered is swallowed whole (its body parts and end).
/// - Connections that end with an answer: a request that is not keep-alive (HTTP/1.0 without
///   `Connection: keep-alive`, or `Connection: close`) goes the full way, its answer says
///   `Connection: close`, and the connection closes once it is written; anything the client sent
///   after it is dropped unread (RFC 9112 §9.6). The async server behind honours only
///   `Connection: close`, so an HTTP/1.0 client would otherwise wait for the idle timeout.
/// - Idle connections: with an `IdleStateHandler` in front of it, it closes a connection that read
///   and wrote nothing for the idle timeout, unless a request it passed on is still being
///   answered (a slow upstream is not the client's idleness).
///
/// - A hit is written as bytes: the stored entry's head encoded once (``StoredResponse/encodedHead``),
///   the hit's own fields and the body in one buffer, below NIO's response encoder.
///
/// One per connection, used only on that connection's event loop.
final class ProxyFastPath: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    let proxy: CachingProxy
    /// Requests passed on whose answers have not ended yet.
    private var passedOn = 0
    /// Answers (its own, or passed on) whose last write has not completed: a slow client still
    /// reading a large body is not idle.
    private var sending = 0
    /// The rest of a request it answered is dropped until its end.
    private var swallowing = false
    /// A request passed on was the connection's last: what follows is dropped, and the
    /// connection closes once that request's answer is written.
    private var closing = false
    /// The last request's body parts still go on, up to its end.
    private var forwardingLast = false

    /// Where a hit's bytes are written: the ``Outlet`` between the channel and NIO's response encoder.
    private var outlet: ChannelHandlerContext?

    init(proxy: CachingProxy) {
        self.proxy = proxy
    }

    func handlerAdded(context: ChannelHandlerContext) {
        outlet = try? context.pipeline.syncOperations.context(handlerType: Outlet.self)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        outlet = nil
    }

    /// Sits between the channel and NIO's `HTTPResponseEncoder` and passes everything on; its
    /// context is where ``ProxyFastPath`` writes a hit's bytes, already a whole HTTP/1.1 response.
    final class Outlet: ChannelOutboundHandler, RemovableChannelHandler {
        typealias OutboundIn = IOData
        typealias OutboundOut = IOData
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        if closing {
            if forwardingLast {
                if case .end = part { forwardingLast = false }
                context.fireChannelRead(data)
            }
            return
        }
        if swallowing {
            if case .end = part { swallowing = false }
            return
        }
        guard case .head(let head) = part else {
            context.fireChannelRead(data)
            return
        }
        if passedOn == 0, let outlet, let answer = proxy.immediateHit(head, allocator: context.channel.allocator) {
            swallowing = true
            sending += 1
            let promise = context.eventLoop.makePromise(of: Void.self)
            let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
            promise.futureResult.whenComplete { _ in handler.value.sending -= 1 }
            // The whole response in one buffer, below NIO's encoder (idle between responses: no
            // answer is under way while `passedOn` is 0). `channelReadComplete` flushes it.
            outlet.write(NIOAny(IOData.byteBuffer(answer)), promise: promise)
            return
        }
        passedOn += 1
        if !head.isKeepAlive {
            closing = true
            forwardingLast = true
            context.fireChannelRead(data)
            return
        }
        context.fireChannelRead(data)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        context.flush()
        context.fireChannelReadComplete()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(var head) where closing && passedOn == 1 && head.status.code >= 200:
            // The answer to the connection's last request.
            head.headers.replaceOrAdd(name: "Connection", value: "close")
            context.write(wrapOutboundOut(.head(head)), promise: promise)
        case .head, .body:
            context.write(data, promise: promise)
        case .end:
            // The answer is over once its end is written out, not when it is queued.
            sending += 1
            let written = context.eventLoop.makePromise(of: Void.self)
            let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
            let channel = context.channel
            written.futureResult.whenComplete { _ in
                let fastPath = handler.value
                fastPath.sending -= 1
                if fastPath.passedOn > 0 { fastPath.passedOn -= 1 }
                if fastPath.closing, fastPath.passedOn == 0 { channel.close(promise: nil) }
            }
            written.futureResult.cascade(to: promise)
            context.write(data, promise: written)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is IdleStateHandler.IdleStateEvent {
            if passedOn == 0, sending == 0 { context.close(promise: nil) }
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// Puts an `IdleStateHandler` and a ``ProxyFastPath`` in front of the conversion to
    /// swift-http-types (Hummingbird adds its `additionalChannelHandlers` behind it), then leaves
    /// the pipeline.
    final class Installer: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = NIOAny

        let proxy: CachingProxy
        let idleTimeout: TimeAmount

        init(proxy: CachingProxy, idleTimeout: TimeAmount) {
            self.proxy = proxy
            self.idleTimeout = idleTimeout
        }

        func handlerAdded(context: ChannelHandlerContext) {
            let pipeline = context.pipeline.syncOperations
            do {
                let codec = try pipeline.handler(type: HTTP1ToHTTPServerCodec.self)
                let encoder = try pipeline.handler(type: HTTPResponseEncoder.self)
                try pipeline.addHandler(Outlet(), position: .before(encoder))
                try pipeline.addHandler(IdleStateHandler(allTimeout: idleTimeout), position: .before(codec))
                try pipeline.addHandler(ProxyFastPath(proxy: proxy), position: .before(codec))
            } catch {
                // Hummingbird always adds the codec first; without it there is no HTTP/1 to answer.
                context.fireErrorCaught(error)
            }
            pipeline.removeHandler(context: context, promise: nil)
        }
    }
}
