import Dispatch
import Foundation
import Logging
import Metrics
import MetricsTestKit
import InMemoryTracing
import Testing
import Tracing

@testable @_spi(StrataInternals) import Strata
import StrataTesting

/// SE-0461: a load runs on its caller's executor. A hit asked for on the main actor is answered on
/// the main thread; the work that must not run there (decoding, blocking file I/O) leaves it.
@Suite("Caller isolation")
@MainActor
struct CallerIsolationTests {
    /// The README's production chain, with a memory store in place of the file store, and a probe
    /// (`map`) next to the store that notes the thread the hit is served on.
    static func productionChain(
        store: MemoryStore<String, Item>, threads: ThreadLog, remoteCalls: CallCounter
    ) -> some Loader<Void, Item> {
        let remote = ClosureLoader<Void, Item> { _ in
            remoteCalls.increment()
            return itemB
        }
        .writingThrough(in: store, key: "feed")
        .coalesced()
        return store.loader(key: "feed", freshness: .maxAge(.hours(24)))
            .map { item in
                threads.note()
                return item
            }
            .named("fresh local")
            .fallingBack(to: remote.named("remote"))
            .fallingBack(to: store.loader(key: "feed", freshness: .any).named("stale local"))
            .logged(to: quietLogger)
            .traced("load feed", tracer: NoOpTracer())
            .metered("feed", metricsFactory: NOOPMetricsHandler.instance)
            .environment(LoadEnvironment(logger: quietLogger))
    }

    @Test("a memory hit asked for on the main actor is served on the main actor")
    func memoryHitStaysOnMainThread() async throws {
        let store = MemoryStore<String, Item>()
        try await store.insert(itemA, for: "feed", storedAt: Date())
        let threads = ThreadLog()
        let remoteCalls = CallCounter()
        let feed = Self.productionChain(store: store, threads: threads, remoteCalls: remoteCalls)

        #expect(MainQueue.isCurrent, "the test itself runs on the main actor")
        for _ in 0..<3 {
            #expect(try await feed.load() == itemA)
            #expect(MainQueue.isCurrent)
        }
        #expect(threads.notes == [true, true, true])
        #expect(remoteCalls.value == 0)
    }

    enum Operator: String, CaseIterable, Sendable {
        case none, named, fallingBack, logged, traced, metered, coalesced, environment, tracked, cached
        case staleIfError, retrying, guarded, writingThrough, erased
    }

    @Test("every operator keeps a main-actor hit on the main actor", arguments: Operator.allCases)
    func operatorKeepsHitOnMainActor(_ op: Operator) async throws {
        let store = MemoryStore<String, Item>()
        try await store.insert(itemA, for: "k", storedAt: Date())
        let threads = ThreadLog()
        let probe = store.loader(key: "k").map { item in
            threads.note()
            return item
        }
        let failing = ClosureLoader<Void, Item> { _ in throw CancellationError() }
        let probeStore = ThreadProbeStore(base: store)
        let loader: AnyLoader<Void, Item> =
            switch op {
            case .none: AnyLoader(probe)
            case .named: AnyLoader(probe.named("n"))
            case .fallingBack: AnyLoader(probe.fallingBack(to: failing))
            case .logged: AnyLoader(probe.logged(to: quietLogger))
            // A recording tracer and a real metrics backend: with the no-op ones these operators are a
            // plain call (see the README chain's test for those).
            case .traced: AnyLoader(probe.traced("t", tracer: InMemoryTracer()))
            case .metered: AnyLoader(probe.metered("m", metricsFactory: TestMetrics()))
            case .coalesced: AnyLoader(probe.coalesced())
            case .environment: AnyLoader(probe.environment(LoadEnvironment(logger: quietLogger)))
            case .tracked: AnyLoader(probe.tracked(by: DroppingAnalytics()))
            case .cached: AnyLoader(failing.cached(.cacheFirst(freshness: .maxAge(.seconds(60))), in: probeStore, key: "k"))
            case .staleIfError: AnyLoader(probe.servingStaleOnError(in: store, key: "k"))
            case .retrying: AnyLoader(probe.retrying(.exponential(attempts: 3)))
            case .guarded: AnyLoader(probe.guarded(by: CircuitBreaker(name: "b", clock: ContinuousClock())))
            case .writingThrough: AnyLoader(probe.writingThrough(in: store, key: "k"))
            case .erased: AnyLoader(AnyLoader(probe))
            }
        #expect(try await loader.load() == itemA)
        #expect((op == .cached ? probeStore.threads.notes : threads.notes) == [true])
    }

    @Test("a store called through the Store protocol runs on its main-actor caller's executor")
    func memoryStoreRetrieveStaysOnMainThread() async throws {
        let store = MemoryStore<String, Item>()
        try await store.insert(itemA, for: "a", storedAt: referenceDate)
        let probe = ThreadProbeStore(base: store)
        // Through a generic function, so the call goes through the protocol requirement (whose
        // isolation decides whether there is a hop), not the concrete method.
        func retrieve<S: Store>(_ key: S.Key, from store: S) async throws -> S.Value? {
            try await store.retrieve(key)?.value
        }
        #expect(try await retrieve("a", from: probe) == itemA)
        #expect(probe.threads.notes == [true])
    }

    @Test("decoding a large value leaves the main actor free")
    func decodingDoesNotBlockMainActor() async throws {
        let gate = DecodeGate()
        let bytes = Data(#"{"payload":"\#(String(repeating: "x", count: 1 << 20))"}"#.utf8)
        let loader = ClosureLoader<Void, Data> { _ in bytes }
            .decoding(GatedValue.self, decoder: {
                let decoder = JSONDecoder()
                decoder.userInfo[GatedValue.gateKey] = gate
                return decoder
            })

        // Runs on the main actor while the decode is held: it can only run if the decode is not
        // holding the main thread. It lets the decode finish.
        let turn = Task { @MainActor in
            await gate.decodeStarted()
            gate.release(mainActorRan: MainQueue.isCurrent)
        }
        let value = try await loader.load()
        await turn.value

        #expect(value.decodedOnMainThread == false)
        #expect(value.payloadCount == 1 << 20)
        #expect(value.releasedByMainActor, "the main actor could not run while the value was decoded")
    }

    @Test("a file store's read and decode never run on the main actor; the hit returns to it")
    func fileStoreWorkLeavesMainThread() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let codec = ThreadNotingCodec<Item>()
        let store = FileStore<Item>(directory: directory.url, codec: codec)
        try await store.insert(itemA, for: "a", storedAt: referenceDate)
        #expect(try await store.retrieve("a")?.value == itemA)
        #expect(MainQueue.isCurrent)
        #expect(codec.threads.notes == [false, false], "encode, then decode")
    }
}

// MARK: - Probes

final class CallCounter: Sendable {
    private let storage = Locked(0)
    func increment() { storage.withLock { $0 += 1 } }
    var value: Int { storage.withLock { $0 } }
}

/// A store that forwards to `base` and notes the thread `retrieve` runs on. Its methods are
/// `nonisolated(nonsending)`, as the requirements are, so it runs where its caller does.
struct ThreadProbeStore<Base: Store>: Store {
    let base: Base
    let threads = ThreadLog()

    nonisolated(nonsending) func retrieve(_ key: Base.Key) async throws -> CacheEntry<Base.Value>? {
        threads.note()
        return try await base.retrieve(key)
    }
    nonisolated(nonsending) func insert(_ entry: CacheEntry<Base.Value>, for key: Base.Key) async throws {
        try await base.insert(entry, for: key)
    }
    nonisolated(nonsending) func delete(_ key: Base.Key) async throws { try await base.delete(key) }
    nonisolated(nonsending) func refresh(
        _ key: Base.Key, storedAt: Date, validators: CacheValidators
    ) async throws -> Bool {
        try await base.refresh(key, storedAt: storedAt, validators: validators)
    }
    nonisolated(nonsending) func removeAll() async throws { try await base.removeAll() }
    var origin: Origin { base.origin }
}

struct DroppingAnalytics: LoadTracker {
    func track(_ report: LoadReport) {}
}

/// Holds a decode until the main actor has had a turn.
final class DecodeGate: Sendable {
    private let started = AsyncStream<Void>.makeStream()
    private let released = DispatchSemaphore(value: 0)
    private let mainActorRan = Locked(false)

    /// Called by the decode: says it started, then waits for ``release(mainActorRan:)``. The timeout
    /// only ends a test that failed (the decode held the main thread, so the main actor never ran);
    /// a passing run never waits for it.
    func holdDecode() -> Bool {
        started.continuation.yield()
        guard released.wait(timeout: .now() + .seconds(30)) == .success else { return false }
        return mainActorRan.withLock { $0 }
    }

    func decodeStarted() async {
        for await _ in started.stream { return }
    }

    func release(mainActorRan ran: Bool) {
        mainActorRan.withLock { $0 = ran }
        released.signal()
    }
}

struct GatedValue: Decodable, Sendable {
    static let gateKey = CodingUserInfoKey(rawValue: "strata.test.gate")!
    let decodedOnMainThread: Bool
    let releasedByMainActor: Bool
    let payloadCount: Int

    enum CodingKeys: String, CodingKey { case payload }

    init(from decoder: any Decoder) throws {
        decodedOnMainThread = MainQueue.isCurrent
        let container = try decoder.container(keyedBy: CodingKeys.self)
        payloadCount = try container.decode(String.self, forKey: .payload).utf8.count
        guard let gate = decoder.userInfo[Self.gateKey] as? DecodeGate else {
            throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "no gate in userInfo"))
        }
        releasedByMainActor = gate.holdDecode()
    }
}
