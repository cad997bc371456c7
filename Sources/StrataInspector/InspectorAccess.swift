#if Inspector
import Foundation
import Hummingbird
import NIOCore

extension StrataInspector {
    /// The peers an inspector answers: decided on the address of the connection a request came on,
    /// which the client cannot forge, unlike its `Host` header.
    ///
    /// Behind a reverse proxy every request comes from the proxy's address: a proxy on loopback
    /// that forwards requests from elsewhere makes them all look local.
    public struct AllowedPeers: Sendable {
        private let allowsPeer: @Sendable (SocketAddress?) -> Bool

        private init(_ allowsPeer: @escaping @Sendable (SocketAddress?) -> Bool) {
            self.allowsPeer = allowsPeer
        }

        /// The loopback addresses only (``isLoopback(_:)``): the default. A request whose peer is
        /// unknown is refused.
        public static let loopback = AllowedPeers { peer in peer.map(isLoopback) ?? false }

        /// Every peer, and requests whose peer is unknown (a router whose request context is not a
        /// `RemoteAddressRequestContext`): for an app that keeps its listener private by other
        /// means. Whoever reaches the listener gets the page, and with it the token.
        public static let any = AllowedPeers { _ in true }

        /// No peer: every request is refused.
        public static let none = AllowedPeers { _ in false }

        /// The peers `allows` accepts (a private network's, say); a request whose peer is unknown
        /// is refused.
        public static func only(_ allows: @escaping @Sendable (SocketAddress) -> Bool) -> AllowedPeers {
            AllowedPeers { peer in peer.map(allows) ?? false }
        }

        /// Whether a request from `peer` (`nil`: unknown) is answered.
        public func allows(_ peer: SocketAddress?) -> Bool { allowsPeer(peer) }

        /// Whether `address` is a loopback address: in `127.0.0.0/8`, `::1`, or an IPv4-mapped
        /// `::ffff:127.x.y.z`. A Unix domain socket is not (a proxy may forward through one).
        public static func isLoopback(_ address: SocketAddress) -> Bool {
            switch address {
            case .v4(let v4):
                return UInt32(bigEndian: v4.address.sin_addr.s_addr) >> 24 == 127
            case .v6(let v6):
                let bytes = withUnsafeBytes(of: v6.address.sin6_addr) { Array($0) }
                guard bytes.count == 16, bytes[0..<10].allSatisfy({ $0 == 0 }) else { return false }
                let isOne = bytes[10..<15].allSatisfy { $0 == 0 } && bytes[15] == 1
                let isMappedLoopback = bytes[10] == 0xff && bytes[11] == 0xff && bytes[12] == 127
                return isOne || isMappedLoopback
            case .unixDomainSocket:
                return false
            }
        }
    }
}

/// A request context that tells the inspector where a request comes from (its connection's peer
/// address): what ``StrataInspector/serving(host:port:serverName:routes:_:)`` gives the
/// routes by default. An app that mounts the inspector in a router of its own uses it (or its own
/// `RemoteAddressRequestContext`): with a context that cannot tell the peer, such as
/// `BasicRequestContext`, the inspector refuses every request unless `allowedPeers` is `.any`.
public struct InspectorRequestContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The address of the connection's other end.
    public let remoteAddress: SocketAddress?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
    }
}
#endif
