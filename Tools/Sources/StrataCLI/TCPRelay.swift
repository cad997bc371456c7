import Foundation
import NIOCore
import NIOPosix
import DemoServer
@_spi(StrataInternals) import Strata

/// A TCP relay on 127.0.0.1 in front of another address: what `strata demo --scenario fleet` puts
/// between its nodes and PostgreSQL, so that it can take the database away (every connection
/// closed, new ones refused) and bring it back on the same port, whatever server the URL names.
final class TCPRelay: Sendable {
    let targetHost: String
    let targetPort: Int
    private let state = Locked(State())

    private struct State: Sendable {
        var port = 0
        var serving: Task<Void, Never>?
        /// The listener and every relayed connection's two channels, closed by ``stop()``.
        var channels: [ObjectIdentifier: any Channel] = [:]
    }

    private func track(_ channel: any Channel) {
        state.withLock { $0.channels[ObjectIdentifier(channel)] = channel }
    }

    init(targetHost: String, targetPort: Int) {
        self.targetHost = targetHost
        self.targetPort = targetPort
    }

    /// The port it listens on while started (the same one after a restart).
    var port: Int { state.withLock { $0.port } }

    /// Listens (on the port it had before, or the first free one of ``DemoServerPorts`` the first
    /// time: below the kernel's ephemeral range, so no client socket of the nodes takes it while the
    /// relay is stopped) and relays every connection until ``stop()``.
    func start() async throws {
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
                        self.track(connection.channel)
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
    func stop() async {
        let (serving, channels) = state.withLock { state -> (Task<Void, Never>?, [any Channel]) in
            defer {
                state.serving = nil
                state.channels = [:]
            }
            return (state.serving, Array(state.channels.values))
        }
        for channel in channels { try? await channel.close() }
        serving?.cancel()
        await serving?.value
    }

    private func relay(_ client: NIOAsyncChannel<ByteBuffer, ByteBuffer>) async {
        do {
            let upstream = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connect(host: targetHost, port: targetPort) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                    }
                }
            track(upstream.channel)
            try await client.executeThenClose { clientIn, clientOut in
                try await upstream.executeThenClose { upstreamIn, upstreamOut in
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        group.addTask { for try await buffer in clientIn { try await upstreamOut.write(buffer) } }
                        group.addTask { for try await buffer in upstreamIn { try await clientOut.write(buffer) } }
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
