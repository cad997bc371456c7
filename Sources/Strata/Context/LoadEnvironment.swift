import Foundation
import Logging

/// What every operator in a chain reads from its surroundings: the wall clock, the clock it waits
/// on, and the logger it reports to. Given once, for a whole chain.
///
/// Operators take no `now:`, `clock:` or `logger:` of their own. Set the environment once, at
/// the outside of the chain, and every operator inside reads it while it loads:
///
/// ```swift
/// let feed = HTTPLoader(url: feedURL).decoding([FeedItem].self)
///     .timingOut(after: .seconds(5))
///     .retrying(.exponential(attempts: 3))
///     .writingThrough(in: files, key: "feed")
///     .fallingBack(to: files.loader(key: "feed"))
///     .environment(LoadEnvironment(logger: Logger(label: "app.feed")))
/// ```
///
/// - An inner ``Loader/environment(_:)`` (or ``Loader/environment(_:_:)`` for one field) overrides
///   the outer one for the loaders beneath it only: give one operator its own clock or logger that way.
/// - Without any, operators use ``live``: `Date()`, `ContinuousClock`, and a logger labelled `strata`.
/// - The environment travels with each load in its ``LoadContext``, so it reaches every operator
///   however the chain is nested, every loader of your own (as `context.environment`, or as
///   ``current`` in one that implements only ``Loader/load(_:)``), and every child task a chain
///   starts (a timeout's race, a background revalidation, a coalesced flight, which runs in the
///   environment of the caller that started it). Closures given to operators (`map`, `key:`) are
///   not loaders and do not see it.
///   Code outside a chain, such as ``Store/value(for:freshness:)`` or a ``StaleWhileRevalidatingSource/values(_:)``
///   stream, reads it from the surrounding task: wrap the call in `environment.bound { … }`.
/// - Stores are configured once, at their own initialiser (a `logger:` there), because a store
///   outlives and is shared by many chains.
/// - In tests, `ManualClock.environment` (StrataTesting) drives `now` and `clock` together.
public struct LoadEnvironment: Sendable {
    /// The wall clock that stamps cache entries and ages them against freshness policies, and turns
    /// an HTTP-date `Retry-After` into a wait.
    public var now: @Sendable () -> Date {
        get { storage.now }
        set { storage = Storage(now: newValue, clock: storage.clock, logger: storage.logger) }
    }

    /// What retries wait on between attempts and timeouts measure their deadline with.
    public var clock: any Clock<Duration> {
        get { storage.clock }
        set { storage = Storage(now: storage.now, clock: newValue, logger: storage.logger) }
    }

    /// Where operators report what does not fail a load: a failed cache write, a corrupt entry.
    public var logger: Logger {
        get { storage.logger }
        set { storage = Storage(now: storage.now, clock: storage.clock, logger: newValue) }
    }

    /// The three fields behind one reference, so copying or reading the environment on a hot path
    /// (every store hit asks for `now`) retains one object rather than each field's.
    private var storage: Storage

    private final class Storage: Sendable {
        let now: @Sendable () -> Date
        let clock: any Clock<Duration>
        let logger: Logger
        /// The logger's level when it cannot change (``Logging/Logger/fixedLevel``).
        let fixedLevel: Logger.Level?

        init(now: @escaping @Sendable () -> Date, clock: any Clock<Duration>, logger: Logger) {
            self.now = now
            self.clock = clock
            self.logger = logger
            self.fixedLevel = logger.fixedLevel
        }
    }

    /// Creates an environment; each field defaults to the live one.
    public init(
        now: @escaping @Sendable () -> Date = { Date() },
        clock: any Clock<Duration> = ContinuousClock(),
        logger: Logger = LoadEnvironment.defaultLogger
    ) {
        storage = Storage(now: now, clock: clock, logger: logger)
    }

    /// The logger operators use when no environment names one: label `strata`.
    public static let defaultLogger = Logger(label: "strata")

    /// The system's clocks and the default logger.
    public static let live = LoadEnvironment()

    /// The environment of the current task, or ``live``.
    ///
    /// Inside a loader of your own that implements only ``Loader/load(_:)``, it is the innermost
    /// ``Loader/environment(_:)`` around it (its context is bound as its task's). Elsewhere it is
    /// what the task has bound: a loader that implements ``Loader/load(_:in:)`` reads
    /// `context.environment` instead, and the closures an operator calls (a `map` transform, a
    /// `key:` closure, a retry policy) run outside the chain's environment. Code outside a chain sets
    /// it with `bound { … }`.
    public static var current: LoadEnvironment { LoadContext.current.environment }

    /// The logger's level, read without copying the logger (a copy copies its handler).
    @usableFromInline
    var logLevel: Logger.Level { storage.fixedLevel ?? storage.logger.logLevel }

    /// Whether `other` is this environment (the same fields, set together).
    func isSame(as other: LoadEnvironment) -> Bool { storage === other.storage }

    /// Runs `body` with this environment as the current task's, for code outside a chain that reads
    /// it (``Store/value(for:freshness:)``, a ``StaleWhileRevalidatingSource/values(_:)`` stream, a
    /// test).
    ///
    /// ```swift
    /// let cached = try await clock.environment().bound { try await store.value(for: "feed") }
    /// ```
    public func bound<R: Sendable>(
        isolation: isolated (any Actor)? = #isolation, _ body: sending () async throws -> R
    ) async rethrows -> R {
        try await LoadContext.current.with(self).bound(body)
    }

    /// Runs the synchronous `body` with this environment as the current task's.
    public func bound<R>(_ body: () throws -> R) rethrows -> R {
        try LoadContext.current.with(self).bound(body)
    }
}

extension Logger {
    /// The level of a logger whose level cannot change any more, or `nil`.
    ///
    /// A logger's level is its handler's. swift-log's stream and no-op handlers keep it as a stored
    /// property of a value, and a `Logger` holds its handler copy-on-write: once a copy is stored
    /// (in an operator, an environment), setting the level on another copy changes that copy only.
    /// So an operator reads such a level once, when it is built, instead of on every load (a read
    /// goes through the handler's existential box and an exclusivity check). Any other handler may
    /// compute its level (a global override, a shared setting) and is read on every load.
    @usableFromInline
    var fixedLevel: Logger.Level? {
        handler is StreamLogHandler || handler is SwiftLogNoOpLogHandler ? logLevel : nil
    }
}
