import Foundation

/// Where a served value came from.
public enum Origin: Sendable, Hashable, CustomStringConvertible {
    /// An in-memory cache.
    case memory
    /// A persistent local cache (files, user defaults, a database on this machine).
    case disk
    /// A shared cache on another machine (for example PostgreSQL).
    case sharedCache
    /// The remote source of truth, fetched for this load.
    case remote
    /// Default data shipped with the app.
    case bundled
    /// A source named by the application.
    case custom(String)
    /// No loader in the chain reported an origin.
    case unknown

    public var description: String {
        switch self {
        case .memory: "memory"
        case .disk: "disk"
        case .sharedCache: "shared cache"
        case .remote: "remote"
        case .bundled: "bundled default"
        case .custom(let name): name
        case .unknown: "unknown"
        }
    }
}

/// Where a value came from and how old it is.
public struct Provenance: Sendable, Hashable, CustomStringConvertible {
    /// The kind of source that served the value.
    public var origin: Origin
    /// The loader (tier) that served it, as described in the chain.
    public var tier: String
    /// When the value was stored, for cached values; `nil` for values fetched or read from a bundle now.
    public var storedAt: Date?
    /// How old the value was when it was served: `now - storedAt` for cached values, zero for fresh ones,
    /// `nil` when unknown (bundled data).
    public var age: Duration?

    public init(origin: Origin, tier: String, storedAt: Date? = nil, age: Duration? = nil) {
        self.origin = origin
        self.tier = tier
        self.storedAt = storedAt
        self.age = age
    }

    public var description: String {
        var text = "\(origin) via \(tier)"
        if let age { text += ", age \(age.formattedAge)" }
        return text
    }
}

/// A value together with where it came from and what happened while loading it.
public struct Served<Value: Sendable>: Sendable {
    /// The loaded value.
    public var value: Value
    /// The tier that served it; `origin == .unknown` when no loader in the chain reports one. It is the
    /// last tier to report serving after the last tier failure, so a tier that produced a response and
    /// then failed (an undecodable body) is never named as the source.
    public var provenance: Provenance
    /// Every event recorded during the load, in order: tiers that failed, the tier that served,
    /// cache writes that failed.
    public var events: [LoadEvent]

    public init(value: Value, provenance: Provenance, events: [LoadEvent]) {
        self.value = value
        self.provenance = provenance
        self.events = events
    }
}

/// Something that happened during one load, as recorded by Strata's loaders.
public enum LoadEvent: Sendable, CustomStringConvertible {
    /// A tier produced the value.
    case served(Provenance)
    /// A tier failed and the chain moved on (or gave up).
    case tierFailed(tier: String, error: any Error)
    /// A value was written to a cache.
    case cacheWritten(store: String, key: String)
    /// Writing to a cache failed; the load itself still succeeded.
    case cacheWriteFailed(store: String, key: String, error: any Error)
    /// A tier failed transiently and is tried again (`attempt` counts from 1) after `delay`.
    case retrying(tier: String, attempt: Int, delay: Duration, error: any Error)
    /// A tier did not finish within its deadline; its work was cancelled.
    case timedOut(tier: String, after: Duration)
    /// A circuit breaker moved from one state to another.
    case breakerStateChanged(breaker: String, from: CircuitState, to: CircuitState)
    /// A circuit breaker refused a load without calling its tier (it is open).
    case breakerRejected(breaker: String)
    /// This load joined an identical load already in flight instead of starting its own.
    case coalesced(tier: String)
    /// The server confirmed a cached entry (HTTP 304 Not Modified) and the entry was re-stamped in
    /// the store without rewriting its value.
    case revalidated(store: String, key: String)

    public var description: String {
        switch self {
        case .served(let provenance): "served: \(provenance)"
        case .tierFailed(let tier, let error): "failed: \(tier): \(error)"
        case .cacheWritten(let store, let key): "cached: \(key) in \(store)"
        case .cacheWriteFailed(let store, let key, let error): "cache write failed: \(key) in \(store): \(error)"
        case .retrying(let tier, let attempt, let delay, let error): "retrying: \(tier), attempt \(attempt) in \(delay.formattedAge), after: \(error)"
        case .timedOut(let tier, let after): "timed out: \(tier) after \(after.formattedAge)"
        case .breakerStateChanged(let breaker, let from, let to): "circuit \(breaker): \(from) → \(to)"
        case .breakerRejected(let breaker): "circuit \(breaker) refused the load: failed fast"
        case .coalesced(let tier): "coalesced: joined the load in flight for \(tier)"
        case .revalidated(let store, let key): "revalidated: \(key) in \(store) (304 Not Modified)"
        }
    }
}

/// Collects the ``LoadEvent``s of one load. Loaders report through ``LoadRecorder/record(_:)``;
/// it costs one task-local read when nobody is listening.
///
/// Recorders nest: an observing operator (``Loader/logged(to:level:failureLevel:)``, ``Loader/metered(_:factory:)``, …)
/// installs its own for the part of the chain it wraps, and every event also reaches the recorders
/// outside it.
public final class LoadRecorder: Sendable {
    @TaskLocal static var current: LoadRecorder?
    /// The innermost ``NamedLoader``'s name, so a leaf reports the tier as the chain names it.
    @TaskLocal static var tierName: String?

    /// The recorder of the enclosing load, which also receives every event.
    let parent: LoadRecorder?
    /// Called with each event as it happens (an observing operator logs or counts it at once).
    let onEvent: (@Sendable (LoadEvent) -> Void)?

    /// The tier name a loader of your own should put in the ``Provenance`` it records: the name given
    /// by the innermost enclosing ``Loader/named(_:)``, or `description` when there is none.
    public static func tierName(default description: @autoclosure () -> String) -> String {
        tierName ?? description()
    }

    private let storage = Locked<[LoadEvent]>([])

    init(parent: LoadRecorder? = nil, onEvent: (@Sendable (LoadEvent) -> Void)? = nil) {
        self.parent = parent
        self.onEvent = onEvent
    }

    /// The events recorded so far.
    var events: [LoadEvent] { storage.withLock { $0 } }

    /// Records `event` for the load running in the current task, if anyone is listening.
    public static func record(_ event: @autoclosure () -> LoadEvent) {
        guard let recorder = current else { return }
        recorder.deliver(event())
    }

    /// Appends `event` here and in every enclosing recorder.
    func deliver(_ event: LoadEvent) {
        var next: LoadRecorder? = self
        while let recorder = next {
            recorder.storage.withLock { $0.append(event) }
            recorder.onEvent?(event)
            next = recorder.parent
        }
    }

    /// Whether the current task's load is being recorded (lets loaders skip building expensive events).
    public static var isRecording: Bool { current != nil }
}

extension Loader {
    /// Loads `input` and reports where the value came from and how old it is.
    ///
    /// ```swift
    /// let served = try await feed.loadServed()
    /// print(served.provenance)   // "disk via fresh local, age 2h 0m"
    /// ```
    public func loadServed(_ input: Input) async throws -> Served<Output> {
        let recorder = LoadRecorder(parent: LoadRecorder.current)
        let value = try await LoadRecorder.$current.withValue(recorder) {
            try await load(input)
        }
        let events = recorder.events
        return Served(value: value, provenance: servingProvenance(in: events) ?? Provenance(origin: .unknown, tier: self.chainSummary), events: events)
    }
}

extension Loader where Input == Void {
    /// Loads the resource and reports where the value came from and how old it is.
    public func loadServed() async throws -> Served<Output> {
        try await loadServed(())
    }
}

/// The tier that served the value: the last `.served` event after the last `.tierFailed` one. A tier
/// that reported `.served` and then failed (a response that did not decode) is not the one that served.
func servingProvenance(in events: [LoadEvent]) -> Provenance? {
    for event in events.reversed() {
        switch event {
        case .served(let provenance): return provenance
        case .tierFailed: return nil
        case .cacheWritten, .cacheWriteFailed, .retrying, .timedOut, .breakerStateChanged, .breakerRejected, .coalesced, .revalidated: continue
        }
    }
    return nil
}

extension Duration {
    /// This duration as an age for people: `250ms`, `42s`, `5m 3s`, `2h 0m`, `3d 4h`. Negative ages
    /// read as zero.
    public var formattedAge: String { Self.formatAge(self) }

    private static func formatAge(_ age: Duration) -> String {
    let seconds = max(0, Int(age.components.seconds))
    if seconds == 0 {
        let milliseconds = max(0, age.components.attoseconds / 1_000_000_000_000_000)
        return milliseconds == 0 || age < .zero ? "0s" : "\(milliseconds)ms"
    }
    if seconds < 60 { return "\(seconds)s" }
    if seconds < 3600 { return "\(seconds / 60)m \(seconds % 60)s" }
    if seconds < 86_400 { return "\(seconds / 3600)h \((seconds % 3600) / 60)m" }
    return "\(seconds / 86_400)d \((seconds % 86_400) / 3600)h"
    }
}

extension Duration {
    /// The duration between two wall-clock dates (negative when `end` is before `start`).
    static func between(_ start: Date, _ end: Date) -> Duration {
        .seconds(end.timeIntervalSince(start))
    }
}
