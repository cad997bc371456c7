import Foundation
import NIOCore
import NIOPosix
import DemoServer
@_spi(StrataInternals) import Strata

/// A TCP relay on 127.0.0.1 in front of another address: what `strata demo --scenario fleet` puts
/// between its nodes and PostgreSQL, so that it can take the database away (every connection
/// closed, new ones refused) and bring it back on the same port, whatever server the URL names.
///
/// It is also the partition checker's fault injector (``Fault``): besides taking the address away
/// (``stop()``), it can hold every byte (a black hole: what a dropped route does to TCP, whose
/// retransmissions deliver the bytes once the route is back), delay each one, or reset every
/// connection open.
final class TCPRelay: Sendable {
    let targetHost: String
    let targetPort: Int
    private let state = Locked(State())

    /// What the relay does to the bytes it carries, until told otherwise.
    enum Fault: Sendable, Equatable {
        /// Carries them at once.
        case none
        /// Holds them, in both directions, until the fault ends; then carries them in order.
        case blackHole
        /// Carries each read after this long, in order.
        case delay(Duration)
    }

    private struct State: Sendable {
        var port = 0
        var serving: Task<Void, Never>?
        /// The listener and every relayed connection's two channels, closed by ``stop()``.
        var channels: [ObjectIdentifier: any Channel] = [:]
        /// The relayed connections' channels alone (both sides), which ``resetConnections()`` resets.
        var relayed: [ObjectIdentifier: any Channel] = [:]
        var fault = Fault.none
        /// Set while ``stop()`` runs: a held read stops waiting, and its connection ends.
        var stopping = false
        /// Whether reads wait now: a black hole, unless the relay is stopping.
        var holds: Bool { fault == .blackHole && !stopping }
        var faultWaiters = ConditionWaiters<Bool>()
    }

    /// What the relay does to the bytes it carries now.
    var fault: Fault {
        get { state.withLock { $0.fault } }
        set {
            state.withLock { state in
                state.fault = newValue
                state.faultWaiters.resumeSatisfied(by: state.holds)
            }
        }
    }

    /// Resets every relayed connection open now (a TCP RST to each side); the relay keeps listening.
    func resetConnections() async {
        let channels = state.withLock { state -> [any Channel] in
            defer { state.relayed = [:] }
            return Array(state.relayed.values)
        }
        for channel in channels {
            // A zero linger turns the close into a reset.
            try? await (channel as? any SocketOptionProvider)?.setSoLinger(linger(l_onoff: 1, l_linger: 0)).get()
            try? await channel.close()
        }
    }

    /// Waits while the relay holds bytes, then waits out its delay: where each read waits before it
    /// is carried on.
    private func passFault() async throws {
        try await state.wait(in: \.faultWaiters, current: { $0.holds }, until: { !$0 })
        if state.withLock({ $0.stopping }) { throw CancellationError() }
        if case .delay(let delay) = fault { try await Task.sleep(for: delay) }
    }

    private func track(_ channel: any Channel, relayed: Bool = false) {
        state.withLock { state in
            state.channels[ObjectIdentifier(channel)] = channel
            if relayed { state.relayed[ObjectIdentifier(channel)] = channel }
        }
    }

    init(targetHost: String, targetPort: Int) {
        self.targetHost = targetHost
        self.targetPort = targetPort
    }

    /// The port it listens on while started (the same one after a restart).
    var port: Int { state.withLock { $0.port } }

    /// Listens (on the port it had before, or the first free one of ``DemoServerPorts`` the first
    /// time: below the kernel's ephemeral range, so no client socket of the nodes takes it while the
    /// relay is stopped) and relays every connection until ``stop()``. Started already, it does nothing.
    func start() async throws {
        if state.withLock({ $0.serving != nil }) { return }  // listening already
        if port != 0 { return try await listen(on: port) }
        for attempt in 1...DemoServerPorts.shared.attempts {
            do {
                return try await listen(on: DemoServerPorts.shared.take())
            } catch let error where DemoServerPorts.isAddressInUse(error) && attempt < DemoServerPorts.shared.attempts {
                continue
            }
        }
    }

    private func listen(on requested: Int) async throws {
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .bind(host: "127.0.0.1", port: requested) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        let bound = server.channel.localAddress?.port ?? requested
        track(server.channel)
        let serving = Task<Void, Never> {
            try? await withThrowingDiscardingTaskGroup { group in
                try await server.executeThenClose { connections in
                    for try await connection in connections {
                        self.track(connection.channel, relayed: true)
                        group.addTask { await self.relay(connection) }
                    }
                }
            }
        }
        state.withLock { state in
            state.port = bound
            state.serving = serving
        }
    }

    /// Closes the listener and every connection: clients see the server go away.
    ///
    /// The listener is closed rather than its task cancelled: connections it accepted and had not
    /// handed over yet are each taken and closed through `executeThenClose` (a dropped one would
    /// trap), and reads held by a black hole end.
    func stop() async {
        let (serving, channels) = state.withLock { state -> (Task<Void, Never>?, [any Channel]) in
            state.stopping = true
            state.faultWaiters.resumeSatisfied(by: state.holds)
            defer {
                state.serving = nil
                state.channels = [:]
                state.relayed = [:]
            }
            return (state.serving, Array(state.channels.values))
        }
        for channel in channels { try? await channel.close() }
        await serving?.value
        state.withLock { $0.stopping = false }
    }

    private func untrack(_ channel: any Channel) {
        state.withLock { state in
            state.channels[ObjectIdentifier(channel)] = nil
            state.relayed[ObjectIdentifier(channel)] = nil
        }
    }

    private func relay(_ client: NIOAsyncChannel<ByteBuffer, ByteBuffer>) async {
        defer { untrack(client.channel) }
        do {
            // Everything inside the client's `executeThenClose`: a channel dropped before it (a
            // refused connect, a cancelled wait) would trap, its writer never finished.
            try await client.executeThenClose { clientIn, clientOut in
                // A black hole holds the connection's setup too: the client's connection is
                // accepted and then hears nothing.
                try await passFault()
                let upstream = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                    .connect(host: targetHost, port: targetPort) { channel in
                        channel.eventLoop.makeCompletedFuture {
                            try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                        }
                    }
                track(upstream.channel, relayed: true)
                defer { untrack(upstream.channel) }
                try await upstream.executeThenClose { upstreamIn, upstreamOut in
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        group.addTask {
                            for try await buffer in clientIn {
                                try await self.passFault()
                                try await upstreamOut.write(buffer)
                            }
                        }
                        group.addTask {
                            for try await buffer in upstreamIn {
                                try await self.passFault()
                                try await clientOut.write(buffer)
                            }
                        }
                        // Either side closing ends both.
                        _ = try await group.next()
                        group.cancelAll()
                    }
                }
            }
        } catch {
            // The connection ends; the client sees it closed.
        }
    }
}
