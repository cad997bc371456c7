import Foundation
#if canImport(FoundationNetworking) && StrataURLSession
import FoundationNetworking
#endif
import Logging
import Synchronization
@_spi(StrataInternals) import Strata

/// The pieces of the scenarios that both the benchmarks and `BenchProbe` (the callgrind driver) build,
/// so the profile and the timing measure the same code.
public enum Scenarios {
    /// The key every single-entry scenario stores its value under.
    public static let feedKey = "feed"

    /// A logger whose level (`critical`) drops every line the chain could log: `logged` is then at a
    /// disabled level, the configuration the chain target is stated for.
    public static var silentLogger: Logger {
        var logger = Logger(label: "strata.benchmarks")
        logger.logLevel = .critical
        return logger
    }

    /// The 5-operator chain: `coalesced → logged (disabled level) → fallback → cache → MemoryStore hit`.
    ///
    /// ```
    /// memory.loader(key: "feed")                      ← the hit: MemoryStore through a StoreLoader
    ///     .fallingBack(to: remote.writingThrough(in: memory))     ← the tier a miss would reach (never on a hit)
    ///     .logged(to: silentLogger)                   ← level disabled: a plain call
    ///     .coalesced()                                ← single-flight
    /// ```
    /// `memory` must hold a value under ``feedKey``; `remote` throws if it is ever reached.
    public static func chain5(memory: MemoryStore<String, [Article]>) -> some Loader<Void, [Article]> {
        let remote = ClosureLoader<Void, [Article]>("remote") { throw NotReached() }
        return memory.loader(key: feedKey, freshness: .any)
            .fallingBack(to: remote.writingThrough(in: memory, key: feedKey))
            .logged(to: silentLogger)
            .coalesced()
    }

    /// `chain5` without `coalesced()`, with a name on the hit tier in its place: five operators
    /// (`StoreLoader`, `named`, `fallingBack`, `writingThrough`, `logged` at a disabled level), so
    /// `chain5` against this is what `coalesced()` outermost adds.
    public static func chain5Uncoalesced(memory: MemoryStore<String, [Article]>) -> some Loader<Void, [Article]> {
        let remote = ClosureLoader<Void, [Article]>("remote") { throw NotReached() }
        return memory.loader(key: feedKey, freshness: .any).named("local")
            .fallingBack(to: remote.writingThrough(in: memory, key: feedKey))
            .logged(to: silentLogger)
    }

    /// The pass-through operators, each alone around the same hit (`memory.loader(key:)`, any age),
    /// and that loader bare: what one operator adds when it only forwards. The loaders are built by
    /// the caller (BenchProbe) as concrete types, so each row is specialised like an app's chain.
    public enum PassThrough: String, CaseIterable, Sendable {
        case bare, named, map, mapError, fallingBack
    }

    /// The README's production chain ("A production chain"), verbatim but for the store and the
    /// logger: a `MemoryStore` in place of the `FileStore`, so a hit is a memory hit, and the
    /// environment's logger at `.info` with a handler that drops every line (the level is enabled, so
    /// `logged` does its work); tracing and metrics are the process's defaults, the no-op tracer and
    /// the no-op metrics backend.
    ///
    /// ```
    /// metered → traced → logged(.info) → fallback
    ///     ├── named "fresh local" → MemoryStore [max age 1d]      ← the hit
    ///     ├── named "remote" → coalesced → writingThrough → guarded → retrying → timingOut → decoding → HTTP GET
    ///     └── named "stale local" → MemoryStore [any age]
    /// ```
    /// The remote points at a port nothing listens on; a hit never reaches it.
    public static func readmeChain(memory store: MemoryStore<String, [Article]>) -> some Loader<Void, [Article]> {
        let feedURL = URL(string: "http://127.0.0.1:9/feed")!
        let api = CircuitBreaker(name: "api")
        let remote = HTTPLoader(url: feedURL).decoding([Article].self)
            .timingOut(after: .seconds(5))
            .retrying(.exponential(attempts: 3))
            .guarded(by: api)
            .writingThrough(in: store, key: "feed")
            .coalesced()
        return store.loader(key: "feed", freshness: .maxAge(.seconds(24 * 3600))).named("fresh local")
            .fallingBack(to: remote.named("remote"))
            .fallingBack(to: store.loader(key: "feed", freshness: .any).named("stale local"))
            .logged()
            .traced("load feed")
            .metered("feed")
            .environment(LoadEnvironment(logger: droppingInfoLogger(label: "app.cache")))
    }

    /// A logger at `.info` whose handler drops every line it is given.
    public static func droppingInfoLogger(label: String) -> Logger {
        Logger(label: label, factory: { _ in DroppingLogHandler() })
    }

    #if StrataURLSession
    /// A URLSession client that opens up to 10 connections to a host (URLSession's default is 6):
    /// what the drain of 10 scopes at once needs, so that the transport is not its limit.
    public static let tenConnectionsPerHost: URLSessionHTTPClient = {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.httpMaximumConnectionsPerHost = 10
        return URLSessionHTTPClient(configuration: configuration)
    }()
    #endif

    /// Runs `body` `count` times, `width` calls at a time (a task each, all started before any is
    /// awaited): a burst of concurrent callers, round after round.
    public static func concurrently(
        _ count: Int, by width: Int, _ body: @escaping @Sendable () async throws -> Void
    ) async throws {
        var done = 0
        while done < count {
            let round = min(width, count - done)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<round { group.addTask { try await body() } }
                try await group.waitForAll()
            }
            done += round
        }
    }

    /// Runs `body` `count` times on the main actor: the loop of the main-actor scenarios, so each
    /// load is awaited by main-actor code, as a view model's is.
    @MainActor
    public static func onMainActor(
        _ count: Int, _ body: @MainActor (Int) async throws -> Void
    ) async rethrows {
        for index in 0..<count { try await body(index) }
    }

    /// A `MemoryStore` holding `value` under ``feedKey``.
    public static func memoryHoldingFeed(_ value: [Article]) async throws -> MemoryStore<String, [Article]> {
        let memory = MemoryStore<String, [Article]>()
        try await memory.insert(value, for: feedKey, storedAt: Date())
        return memory
    }

    /// The error of a tier a scenario must never reach.
    public struct NotReached: Error, CustomStringConvertible {
        public init() {}
        public var description: String { "a benchmark reached a tier its scenario never uses" }
    }
}

/// A one-shot gate: ``wait()`` suspends until ``open()`` (at once once open).
///
/// The coalescing scenario's upstream load waits on it, so every one of the concurrent callers has
/// joined the single flight before it completes.
public final class Gate: Sendable {
    private let state = Locked<(isOpen: Bool, waiting: [CheckedContinuation<Void, Never>])>((false, []))

    public init(open: Bool = false) {
        if open { state.withLock { $0.isOpen = true } }
    }

    /// Suspends until the gate is open.
    public func wait() async {
        await withCheckedContinuation { continuation in
            let resumeNow = state.withLock { state -> Bool in
                if state.isOpen { return true }
                state.waiting.append(continuation)
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    /// Opens the gate, releasing every waiter.
    public func open() {
        let waiting = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.isOpen = true
            defer { state.waiting = [] }
            return state.waiting
        }
        for continuation in waiting { continuation.resume() }
    }
}

/// A log handler at `.info` that drops every line: what a chain logging into a quiet handler pays.
public struct DroppingLogHandler: LogHandler {
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    public init() {}
    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
    public func log(event: LogEvent) {}
}

/// Counts calls from any thread.
public final class CallCounter: Sendable {
    private let count = Locked(0)

    public init() {}

    /// Adds one call.
    public func increment() { count.withLock { $0 += 1 } }

    /// The calls counted so far.
    public var value: Int { count.withLock { $0 } }
}

/// The MemoryStore baseline: a dictionary behind one `Synchronization.Mutex`, nothing else.
@available(macOS 15, *)
public final class MutexDictionary: Sendable {
    private let storage: Mutex<[String: Article]>

    public init(_ contents: [String: Article]) { storage = Mutex(contents) }

    /// The article stored under `key`.
    public func value(for key: String) -> Article? { storage.withLock { $0[key] } }
}
