import CoreMetrics

/// Counts and times each load of its base loader with swift-metrics; built by
/// ``Loader/metered(_:metricsFactory:)``.
///
/// Every metric carries the dimension `loader` (the name given), so one dashboard can tell chains apart:
///
/// | metric | kind | when |
/// |---|---|---|
/// | `strata_loads_total` (`outcome`: served, failed, cancelled) | counter | every load |
/// | `strata_load_duration_seconds` (`outcome`) | timer | every load |
/// | `strata_cache_hits_total` | counter | served from memory, disk or a shared cache |
/// | `strata_cache_misses_total` | counter | served from anywhere else, or not served |
/// | `strata_errors_total` (`error`: the error's type) | counter | a failed load |
/// | `strata_retries_total` | counter | each retry inside |
/// | `strata_timeouts_total` | counter | each timeout inside |
/// | `strata_breaker_rejections_total` | counter | each fast failure of an open circuit inside |
/// | `strata_coalesced_total` | counter | each load that joined one in flight |
/// | `strata_cache_write_failures_total` | counter | each failed cache write inside |
///
/// Put it inside ``Loader/coalesced(in:)->CoalescedLoader<Self,Self.Input>`` to count upstream work once, outside to count what callers see.
public struct MeteredLoader<Base: Loader>: Loader {
    public typealias Input = Base.Input
    public typealias Output = Base.Output

    public let base: Base
    /// The `loader` dimension of every metric.
    public let name: String
    let metrics: Metrics
    /// The chain's summary, made once when the operator is built.
    let summary: String
    /// The factory is swift-metrics' no-op backend (what `MetricsSystem.factory` is when no backend was
    /// bootstrapped): every metric would be dropped, so a load is a plain call to the base.
    @usableFromInline let isNoOp: Bool

    init(base: Base, name: String, factory: any MetricsFactory) {
        self.base = base
        self.name = name
        self.metrics = Metrics(name: name, factory: factory)
        self.summary = base.chainSummary
        self.isNoOp = factory is NOOPMetricsHandler
    }

    @inlinable @inline(__always)
    public func load(_ input: Input) async throws -> Output {
        try await loadTryingImmediately(input)
    }

    @inlinable
    public func load(_ input: Input, in context: LoadContext) async throws -> Output {
        if isNoOp { return try await base.load(input, in: context) }
        return try await loadMetered(input, in: context)
    }

    @inlinable
    public func loadImmediately(_ input: Input, in context: LoadContext) -> Output? {
        if isNoOp { return base.loadImmediately(input, in: context) }
        return loadMeteredImmediately(input, in: context)
    }

    @usableFromInline
    func loadMeteredImmediately(_ input: Input, in context: LoadContext) -> Output? {
        guard let (value, report) = observeImmediately(base, input, in: context, loader: summary) else { return nil }
        context.afterImmediateAnswer { [metrics] in metrics.record(report) }
        return value
    }

    @usableFromInline
    func loadMetered(_ input: Input, in context: LoadContext) async throws -> Output {
        let (result, report) = await observeLoad(base, input, in: context, loader: summary, clock: ContinuousClock())
        metrics.record(report)
        return try result.get()
    }

    /// The metric objects, made once per operator so a load only updates them.
    struct Metrics: Sendable {
        let factory: any MetricsFactory
        let dimensions: [(String, String)]
        let served, failed, cancelled: Counter
        let servedTime, failedTime, cancelledTime: Timer
        let hits, misses, retries, timeouts, rejections, coalesced, writeFailures, refreshesStarted: Counter
        /// `strata_stale_served_total` per reason.
        let staleServed: [StaleReason: Counter]
        /// `strata_fleet_lock_waits_total` per outcome, and the time waited.
        let fleetLockWaits: [FleetLockWait: Counter]
        let fleetLockWaitTime: Timer
        /// `strata_errors_total` per error type, made on the first failure of each type (a backend
        /// registers a metric when it is made: one per failed load would register it again each time).
        let errorCounters = Locked<[ObjectIdentifier: Counter]>([:])

        func errorCounter(for error: any Error) -> Counter {
            let errorType = type(of: error)
            let id = ObjectIdentifier(errorType)
            if let counter = errorCounters.withLock({ $0[id] }) { return counter }
            let counter = Counter(label: "strata_errors_total", dimensions: dimensions + [("error", "\(errorType)")], factory: factory)
            return errorCounters.withLock { counters in
                if let existing = counters[id] { return existing }
                counters[id] = counter
                return counter
            }
        }

        init(name: String, factory: any MetricsFactory) {
            self.factory = factory
            let dimensions = [("loader", name)]
            self.dimensions = dimensions
            func counter(_ label: String, _ extra: [(String, String)] = []) -> Counter {
                Counter(label: label, dimensions: dimensions + extra, factory: factory)
            }
            func timer(_ outcome: String) -> Timer {
                Timer(label: "strata_load_duration_seconds", dimensions: dimensions + [("outcome", outcome)], factory: factory)
            }
            served = counter("strata_loads_total", [("outcome", "served")])
            failed = counter("strata_loads_total", [("outcome", "failed")])
            cancelled = counter("strata_loads_total", [("outcome", "cancelled")])
            servedTime = timer("served")
            failedTime = timer("failed")
            cancelledTime = timer("cancelled")
            hits = counter("strata_cache_hits_total")
            misses = counter("strata_cache_misses_total")
            retries = counter("strata_retries_total")
            timeouts = counter("strata_timeouts_total")
            rejections = counter("strata_breaker_rejections_total")
            coalesced = counter("strata_coalesced_total")
            writeFailures = counter("strata_cache_write_failures_total")
            refreshesStarted = counter("strata_refresh_ahead_total")
            staleServed = Dictionary(uniqueKeysWithValues: StaleReason.allCases.map {
                ($0, counter("strata_stale_served_total", [("reason", $0.rawValue)]))
            })
            fleetLockWaits = Dictionary(uniqueKeysWithValues: FleetLockWait.allCases.map {
                ($0, counter("strata_fleet_lock_waits_total", [("outcome", $0.rawValue)]))
            })
            fleetLockWaitTime = Timer(label: "strata_fleet_lock_wait_seconds", dimensions: dimensions, factory: factory)
        }

        func record(_ report: LoadReport) {
            switch report.outcome {
            case .served:
                served.increment()
                servedTime.recordInterval(report.duration)
            case .failed(let error):
                failed.increment()
                failedTime.recordInterval(report.duration)
                errorCounter(for: error).increment()
            case .cancelled:
                cancelled.increment()
                cancelledTime.recordInterval(report.duration)
            }
            if case .cancelled = report.outcome {} else {
                (report.isCacheHit ? hits : misses).increment()
            }
            for event in report.events {
                switch event {
                case .retrying: retries.increment()
                case .timedOut: timeouts.increment()
                case .breakerRejected: rejections.increment()
                case .coalesced: coalesced.increment()
                case .cacheWriteFailed: writeFailures.increment()
                case .refreshStarted: refreshesStarted.increment()
                case .servedStale(_, let reason): staleServed[reason]?.increment()
                case .waitedForFleetLock(_, let waited, let outcome):
                    fleetLockWaits[outcome]?.increment()
                    fleetLockWaitTime.recordInterval(waited)
                case .served, .tierFailed, .cacheWritten, .breakerStateChanged, .revalidated: break
                }
            }
        }
    }
}

extension Timer {
    /// Records `duration` in nanoseconds.
    fileprivate func recordInterval(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        recordNanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}

extension MeteredLoader: LoaderDescribing {
    public var loaderNode: LoaderNode { LoaderNode(label: "metered(\(name))", children: [base.chainNode]).observing() }
}

extension Loader {
    /// Counts and times every load with swift-metrics, under the dimension `loader: name`.
    ///
    /// ```swift
    /// let feed = chain.metered("feed")   // strata_loads_total{loader="feed",outcome="served"} …
    /// ```
    /// - Parameters:
    ///   - name: the `loader` dimension of every metric.
    ///   - metricsFactory: where metrics go; the process's bootstrapped `MetricsSystem.factory` by
    ///     default. Every type that reports metrics takes it under this label.
    public func metered(_ name: String, metricsFactory: any MetricsFactory = MetricsSystem.factory) -> MeteredLoader<Self> {
        MeteredLoader(base: self, name: name, factory: metricsFactory)
    }

    /// The former spelling of `metered(_:metricsFactory:)`.
    @available(*, deprecated, renamed: "metered(_:metricsFactory:)")
    public func metered(_ name: String, factory: any MetricsFactory) -> MeteredLoader<Self> {
        MeteredLoader(base: self, name: name, factory: factory)
    }
}
