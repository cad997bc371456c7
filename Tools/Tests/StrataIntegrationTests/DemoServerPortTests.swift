import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
@_spi(StrataInternals) import Strata
@testable import DemoServer
import StrataTesting
import Testing

/// A demo server that goes offline keeps its port to itself: nothing else in the process can be
/// listening there when a test's client connects, so the client is refused.
///
/// With ports the kernel picks, an offline server's port can go to the next server a parallel test
/// starts: a client expecting "connection refused" then reaches another test's server (a lost
/// connection, or that test's injected HTTP 500).
@Suite("Demo server: ports", .timeLimit(.minutes(2)))
struct DemoServerPortTests {
    @Test func anOfflineServersPortIsGivenToNoOtherServer_andItsClientsAreRefused() async throws {
        let server = try await DemoServer.start()
        let port = server.port
        #expect(DemoServerPorts.range.contains(port))
        #expect(!Self.kernelEphemeralPorts().contains(port), "bind(0) anywhere on this machine could take \(port)")
        await server.goOffline()

        var others: [DemoServer] = []
        for _ in 0..<32 { others.append(try await DemoServer.start()) }
        #expect(!others.map(\.port).contains(port))
        let refused = await #expect(throws: HTTPError.self) { try await HTTPLoader(url: server.feedURL).load() }
        #expect(refused?.neverReachedTheServer == true, "\(String(describing: refused))")

        try await server.goOnline()
        #expect(server.port == port)
        #expect(try await HTTPLoader(url: server.feedURL).load().status.code == 200)
        await server.stop()
        for other in others { await other.stop() }
    }

    @Test func aPortAnotherSocketHoldsIsSkipped() async throws {
        let held = DemoServerPorts.shared.take()
        let free = DemoServerPorts.shared.take()
        let holder = try ListeningSocket(port: held)
        defer { holder.close() }

        let server = try await DemoServer.start(ports: DemoServerPorts([held, free]))
        #expect(server.port == free)
        await server.stop()
    }

    @Test func whenEveryAttemptFindsItsPortHeld_startFailsWithTheBindError() async throws {
        let held = DemoServerPorts.shared.take()
        let holder = try ListeningSocket(port: held)
        defer { holder.close() }

        await #expect {
            try await DemoServer.start(ports: DemoServerPorts([held], attempts: 3))
        } throws: { error in
            DemoServerPorts.isAddressInUse(error)
        }
    }

    @Test func thePoolHandsOutEachPortOnceBeforeWrapping() {
        let pool = DemoServerPorts([7, 8, 9], startingAt: 1)
        #expect((0..<5).map { _ in pool.take() } == [8, 9, 7, 8, 9])
    }

    /// The kernel's range for `bind(0)` and clients' local ports (Linux; empty elsewhere).
    static func kernelEphemeralPorts() -> ClosedRange<Int> {
        guard let text = try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8) else {
            return 49_152...65_535
        }
        let bounds = text.split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
        return bounds.count == 2 ? bounds[0]...bounds[1] : 49_152...65_535
    }
}

/// A TCP socket listening on 127.0.0.1:`port`: while it listens, no other socket can bind the port.
///
/// It sets `SO_REUSEADDR`, as servers do: without it, a connection of an earlier test process still
/// in `TIME_WAIT` on the port made the bind fail (`EADDRINUSE`, seen when runs followed each other
/// within a minute). A listening socket holds its port with or without the option.
struct ListeningSocket {
    let fd: Int32

    /// A port of the demo servers' pool (below the kernel's ephemeral range, handed out once per
    /// process) that a socket could listen on a moment ago: for servers this project did not write,
    /// which need a port on their command line. The kernel's pick for port 0 could go to another
    /// test's server, or be a client connection's local port, before such a server binds it.
    static func freePort() throws -> Int {
        var failure: (any Error)?
        for _ in 0..<64 {
            let port = DemoServerPorts.shared.take()
            do {
                try ListeningSocket(port: port).close()
                return port
            } catch {
                failure = error
            }
        }
        throw failure ?? TestError("no free port")
    }

    init(port: Int) throws {
        #if canImport(Glibc)
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #else
        fd = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw TestError("socket failed: \(errno)") }
        var reuse: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 1) == 0 else {
            let failure = errno
            ListeningSocket.close(fd)
            throw TestError("could not listen on 127.0.0.1:\(port): errno \(failure)")
        }
    }

    func close() { Self.close(fd) }

    static func close(_ fd: Int32) {
        #if canImport(Glibc)
        _ = Glibc.close(fd)
        #else
        _ = Darwin.close(fd)
        #endif
    }
}
