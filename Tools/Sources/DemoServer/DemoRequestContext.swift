import Foundation
import Hummingbird
import NIOCore

/// The demo server's request context: Hummingbird's basic one, plus the connection the request came
/// on, so a fault can drop that connection without answering (``DemoServer/WriteFault/dropAfterApply``).
struct DemoRequestContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    /// The connection of this request.
    let channel: any Channel

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
    }

    /// Drops the connection without a byte of answer: a TCP reset (`SO_LINGER` 0, then close), so the
    /// client sees "connection reset by peer", not an HTTP status.
    func dropConnection() async {
        if let socket = channel as? any SocketOptionProvider {
            try? await socket.setSoLinger(linger(l_onoff: 1, l_linger: 0)).get()
        }
        try? await channel.close()
    }
}
