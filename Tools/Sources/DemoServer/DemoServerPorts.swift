#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import NIOCore
@_spi(StrataInternals) import Strata

/// The ports a ``DemoServer`` started on port 0 listens on (and the fleet demo's relay): handed out by this process, from a range
/// below the kernel's ephemeral ports, each once while the process runs (until the range wraps).
///
/// A server that goes offline closes its socket and must come back on the same port, and a client
/// that reaches that port meanwhile must be refused. With a port the kernel picked (port 0), the
/// kernel is free to give the closed port to the next `bind(0)` of this process or any other: a
/// test's client would then reach another test's server (an injected 500 where a refused connection is
/// expected, "connection lost" where "connection refused" is). The kernel never picks a port in this
/// range for `bind(0)` or for a client's local port, and this process hands each out once, so an
/// offline server's port stays unanswered. A port another process holds fails to bind, and the
/// server tries the next one (``attempts`` in all).
public final class DemoServerPorts: Sendable {
    /// Below Linux's ephemeral range (32768–60999) and macOS's (49152–65535), above the well-known
    /// and the commonly configured ones.
    static let range = 20_000..<32_000

    /// The process's pool. It starts at a random place in ``range``, so two processes running side
    /// by side (two checkouts' test runs) rarely meet.
    public static let shared = DemoServerPorts(Array(range), startingAt: Int.random(in: 0..<range.count))

    /// How many ports a server tries before it reports the last failure.
    public let attempts: Int
    private let ports: [Int]
    private let next: Locked<Int>

    /// A pool that hands out `ports` in order from `startingAt`, then from the start again.
    init(_ ports: [Int], startingAt start: Int = 0, attempts: Int = 64) {
        precondition(!ports.isEmpty, "a pool needs a port")
        self.ports = ports
        self.attempts = attempts
        self.next = Locked(start % ports.count)
    }

    /// The next port.
    public func take() -> Int {
        next.withLock { next in
            defer { next = (next + 1) % ports.count }
            return ports[next]
        }
    }

    /// Whether `error` says the port is held by another socket.
    public static func isAddressInUse(_ error: any Error) -> Bool {
        (error as? IOError)?.errnoCode == EADDRINUSE
    }
}
