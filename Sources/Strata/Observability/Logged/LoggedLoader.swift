import Logging

/// Logs each load of its base loader to a swift-log `Logger`; built by
/// ``Loader/logged(to:level:failureLevel:)``.
///
/// | what | level |
/// |---|---|
/// | load started, value served by a tier, value cached, load joined (coalesced) | `debug` |
/// | a tier failed and the chain moved on, a retry, a timeout, an open circuit failing fast | `level` |
/// | its first tier served the load (origin, tier, age, duration) | `debug` (or `level`, if lower) |
/// | the load left its first tier and served a value (``LoadReport/leftFirstTier``) | `level` |
/// | a circuit changed state, a cache write failed | `warning` |
/// | the load failed | `failureLevel` |
///
/// Every message and metadata value is passed through ``Redaction/redactingSecrets(in:)``: URLs lose credentials
/// and query values, `Authorization` and cookie values never reach the log. When the logger's level
/// would drop every one of these lines, the operator is a plain call to its base.
public struct LoggedLoader<Base: Loader>: Loader {
    public typealias Input = Base.Input
    public typealias Output = Base.Output

    public let base: Base
    /// Where lines go; `nil`: the chain's ``LoadEnvironment/logger``, read at each load.
    public let logger: Logger?
    /// The level of a load that left its first tier (a miss, a fallback, a retry, a revalidation)
    /// and of the events on its way; a load its first tier answers is logged at `debug`.
    public let level: Logger.Level
    /// The level of failed loads.
    public let failureLevel: Logger.Level
    /// The chain's one-line summary and its redacted form, made once when the operator is built (a
    /// chain's description does not change), not on every load.
    @usableFromInline let name: String
    @usableFromInline let redactedName: String
    /// Writes an event's line as it happens, to this operator's logger or the load's; made once.
    @usableFromInline let logEvent: @Sendable (LoadEvent, LoadEnvironment) -> Void
    /// The same for a load whose logger drops `debug` lines: routine events (a value served, a
    /// cache write) return before the logger's level is read again.
    @usableFromInline let logEventAboveDebug: @Sendable (LoadEvent, LoadEnvironment) -> Void
    /// The level of `logger` when it cannot change (``Logging/Logger/fixedLevel``), read once.
    @usableFromInline let fixedLogLevel: Logger.Level?

    init(base: Base, logger: Logger?, level: Logger.Level, failureLevel: Logger.Level) {
        self.base = base
        self.logger = logger
        self.level = level
        self.failureLevel = failureLevel
        let fixedLogLevel = logger?.fixedLevel
        self.fixedLogLevel = fixedLogLevel
        self.name = base.chainSummary
        let redactedName = Redaction.redactingSecrets(in: name)
        self.redactedName = redactedName
        let logEvent: @Sendable (LoadEvent, LoadEnvironment) -> Void = { event, environment in
            let eventLevel = Self.level(of: event, level: level)
            // The level is checked before the logger is copied (a copy copies its handler).
            guard (fixedLogLevel ?? logger?.logLevel ?? environment.logLevel) <= eventLevel else { return }
            Self.log(event, at: eventLevel, redactedLoader: redactedName, logger: logger ?? environment.logger)
        }
        self.logEvent = logEvent
        self.logEventAboveDebug = { event, environment in
            guard Self.level(of: event, level: level) > .debug else { return }
            logEvent(event, environment)
        }
    }

    @inlinable @inline(__always)
    public func load(_ input: Input) async throws -> Output {
        try await loadTryingImmediately(input)
    }

    @inlinable
    public func load(_ input: Input, in context: LoadContext) async throws -> Output {
        // The level is read without copying the logger; below it every line this operator writes
        // is dropped: a plain call.
        let logLevel = self.logLevel(in: context)
        guard logLevel <= max(level, failureLevel, .warning) else { return try await base.load(input, in: context) }
        return try await loadLogged(input, logLevel: logLevel, in: context)
    }

    /// The level lines of a load in `context` are filtered at: this operator's logger's, or the
    /// environment's; read without copying the logger.
    @inlinable
    func logLevel(in context: LoadContext) -> Logger.Level {
        if let fixedLogLevel { return fixedLogLevel }
        return logger?.logLevel ?? context.environment.logLevel
    }

    /// The base's immediate answer, logged as a load its first tier served (an immediate answer
    /// never leaves its first tier): at `debug`, so with the logger above `debug` it is the base's
    /// answer and nothing else.
    @inlinable
    public func loadImmediately(_ input: Input, in context: LoadContext) -> Output? {
        let logLevel = self.logLevel(in: context)
        guard logLevel <= .debug else { return base.loadImmediately(input, in: context) }
        return loadLoggedImmediately(input, in: context)
    }

    /// Like `observeImmediately`, with the "load started" line written before the events it held.
    @usableFromInline
    func loadLoggedImmediately(_ input: Input, in context: LoadContext) -> Output? {
        let clock = ContinuousClock()
        let start = clock.now
        let held = LoadRecorder(parent: nil, environment: context.environment)
        guard let value = base.loadImmediately(input, in: context.recording(into: held)) else { return nil }
        let logger = logger ?? context.environment.logger
        let events = held.events
        context.replay(events)
        let result: Result<Output, any Error> = .success(value)
        let report = LoadReport(loader: name, result: result, duration: start.duration(to: clock.now), events: events)
        let environment = context.environment
        context.afterImmediateAnswer { [self] in
            logger.debug("load started", metadata: ["loader": "\(redactedName)"])
            for event in events { logEvent(event, environment) }
            log(report, to: logger)
        }
        return value
    }

    @inlinable
    func loadLogged(_ input: Input, logLevel: Logger.Level, in context: LoadContext) async throws -> Output {
        let name = name
        let redactedName = redactedName
        let level = level
        if logLevel <= .debug {
            (logger ?? context.environment.logger).debug("load started", metadata: ["loader": "\(redactedName)"])
        }
        let clock = ContinuousClock()
        let start = clock.now
        let recorder = context.recorder(onEvent: logLevel > .debug ? logEventAboveDebug : logEvent)
        // As in `observeLoad`, in this frame: an async helper would cost a frame on every load.
        let result: Result<Output, any Error>
        do {
            result = .success(try await base.load(input, in: context.recording(into: recorder)))
        } catch {
            result = .failure(error)
        }
        // A value its first tier served writes no line below `debug`: nothing to build.
        if case .success(let value) = result, logLevel > min(level, .debug), !recorder.summary.leftFirstTier {
            return value
        }
        let logger = logger ?? context.environment.logger
        log(LoadReport(loader: name, result: result, duration: start.duration(to: clock.now), events: recorder.events), to: logger)
        return try result.get()
    }

    /// Writes the line that says how the load `report` describes ended.
    @usableFromInline
    func log(_ report: LoadReport, to logger: Logger) {
        // The line's metadata (redacted names, formatted ages) is built only when its level is
        // enabled: redaction is not free, and a line below the logger's level would drop it anyway.
        func metadata(capacity: Int = 2) -> Logger.Metadata {
            // Sized once for the line's fields: growing a dictionary rehashes every key.
            var metadata = Logger.Metadata(minimumCapacity: capacity)
            metadata["loader"] = "\(redactedName)"
            metadata["duration"] = "\(report.duration.formattedAge)"
            return metadata
        }
        // A load its first tier answered is routine: `debug` (or `level`, if lower).
        let servedLevel = report.leftFirstTier ? level : min(level, .debug)
        switch report.outcome {
        case .served(let provenance) where logger.logLevel <= servedLevel:
            var metadata = metadata(capacity: 6)
            metadata["origin"] = "\(provenance.origin)"
            metadata["tier"] = "\(Redaction.redactingSecrets(in: provenance.tier))"
            if let age = provenance.age { metadata["age"] = "\(age.formattedAge)" }
            if report.retryCount > 0 { metadata["retries"] = "\(report.retryCount)" }
            logger.log(level: servedLevel, "served from \(provenance.origin)", metadata: metadata)
        case .served:
            break
        case .failed(let error) where logger.logLevel <= failureLevel:
            var metadata = metadata(capacity: 3)
            metadata["error"] = "\(Redaction.redactingSecrets(in: "\(error)"))"
            logger.log(level: failureLevel, "load failed", metadata: metadata)
        case .failed:
            break
        case .cancelled:
            logger.debug("load cancelled", metadata: metadata())
        }
    }

    /// The level of `event`'s line: routine steps at `debug`, the chain moving on at `level`,
    /// what needs attention at `warning`.
    static func level(of event: LoadEvent, level: Logger.Level) -> Logger.Level {
        switch event {
        case .served, .cacheWritten, .coalesced, .revalidated, .refreshStarted: .debug
        case .tierFailed, .retrying, .timedOut, .breakerRejected, .servedStale, .waitedForFleetLock: level
        case .breakerStateChanged, .cacheWriteFailed: .warning
        }
    }

    static func log(_ event: LoadEvent, at eventLevel: Logger.Level, redactedLoader: String, logger: Logger) {
        logger.log(
            level: eventLevel, "\(Redaction.redactingSecrets(in: event.description))",
            metadata: ["loader": "\(redactedLoader)", "event": "\(event.kind)"])
    }
}

extension LoggedLoader: LoaderDescribing {
    public var loaderNode: LoaderNode {
        LoaderNode(label: logger.map { "logged(\($0.label), \(level))" } ?? "logged(\(level))", children: [base.chainNode]).observing()
    }
}

extension Loader {
    /// Logs every load — start, each event on the way (retries, fallbacks, timeouts, breaker changes),
    /// and how it ended — to the chain's logger, with secrets redacted.
    ///
    /// A load its first tier answers (a cache hit) is a `debug` line; a load that left its first tier
    /// is a `level` line, a failed one a `failureLevel` line. At the usual `info`, a hit writes
    /// nothing and a miss says why.
    ///
    /// ```swift
    /// let feed = chain.logged().environment(LoadEnvironment(logger: Logger(label: "app.feed")))
    /// // debug: served from disk [loader=fresh local → remote, tier=fresh local, age=2h 0m, duration=1ms]
    /// // info:  served from remote [loader=fresh local → remote, tier=remote, age=0s, duration=84ms]
    /// ```
    /// - Parameters:
    ///   - logger: where lines go; its `logLevel` filters them. `nil` (the default): the chain's
    ///     ``LoadEnvironment/logger``, read at each load, the one failed cache writes go to.
    ///   - level: the level of a load that left its first tier and of the events on its way
    ///     (default `info`). A load its first tier answered is logged at `debug` (or at `level`
    ///     when that is lower).
    ///   - failureLevel: the level of failed loads (default `error`).
    public func logged(to logger: Logger? = nil, level: Logger.Level = .info, failureLevel: Logger.Level = .error) -> LoggedLoader<Self> {
        LoggedLoader(base: self, logger: logger, level: level, failureLevel: failureLevel)
    }
}

extension LoadEvent {
    /// The event's kind in one word (a log field, a span event name, a metric dimension).
    public var kind: String {
        switch self {
        case .served: "served"
        case .tierFailed: "tier_failed"
        case .cacheWritten: "cache_written"
        case .cacheWriteFailed: "cache_write_failed"
        case .retrying: "retrying"
        case .timedOut: "timed_out"
        case .breakerStateChanged: "breaker_state_changed"
        case .breakerRejected: "breaker_rejected"
        case .coalesced: "coalesced"
        case .revalidated: "revalidated"
        case .refreshStarted: "refresh_started"
        case .servedStale: "served_stale"
        case .waitedForFleetLock: "waited_for_fleet_lock"
        }
    }
}
