/// A load that did not finish within its deadline.
public struct TimeoutError: Error, Sendable, CustomStringConvertible {
    /// The loader that was too slow, as named in the chain.
    public var tier: String
    /// The deadline it missed.
    public var timeout: Duration

    public init(tier: String, timeout: Duration) {
        self.tier = tier
        self.timeout = timeout
    }

    public var description: String { "\(tier): no result within \(formatAge(timeout)); the load was cancelled" }
}

/// Bounds how long its base loader may take; built by ``Loader/timeout(_:clock:)``.
///
/// - The base load runs in a child task. When the deadline passes first, that task is cancelled and
///   ``TimeoutError`` is thrown — after the base has stopped, so no work outlives the call and a
///   cancelled HTTP request writes nothing.
/// - When the caller's task is cancelled, `CancellationError` is thrown, not a timeout.
/// - Waiting uses the injected `clock`, so tests drive the deadline with a manual clock.
/// - A timeout is recorded as ``LoadEvent/timedOut(tier:after:)``; put a ``Loader/retry(_:clock:now:)``
///   outside it to retry slow attempts, inside it to bound all attempts together.
public struct TimeoutLoader<Base: Loader, C: Clock>: Loader where C.Duration == Duration {
    public typealias Input = Base.Input
    public typealias Output = Base.Output

    public let base: Base
    /// The longest a load may take.
    public let duration: Duration
    let clock: C

    init(base: Base, duration: Duration, clock: C) {
        self.base = base
        self.duration = duration
        self.clock = clock
    }

    private enum Finish: Sendable {
        case value(Output)
        case deadline
    }

    public func load(_ input: Input) async throws -> Output {
        try Task.checkCancellation()
        let outcome = try await withThrowingTaskGroup(of: Finish.self) { group in
            group.addTask { .value(try await base.load(input)) }
            group.addTask {
                try await clock.sleep(for: duration)
                return .deadline
            }
            defer { group.cancelAll() }
            // The first child to finish decides; the other is cancelled and awaited by the group.
            guard let first = try await group.next() else { throw CancellationError() }
            return first
        }
        switch outcome {
        case .value(let value):
            return value
        case .deadline:
            try Task.checkCancellation()
            let tier = describeLoader(base)
            LoadRecorder.record(.timedOut(tier: tier, after: duration))
            throw TimeoutError(tier: tier, timeout: duration)
        }
    }
}

extension TimeoutLoader: LoaderDescribing {
    public var loaderNode: LoaderNode {
        LoaderNode(label: "timeout(\(formatAge(duration)))", children: [Strata.loaderNode(of: base)])
    }
}

extension Loader {
    /// Fails with ``TimeoutError`` when a load takes longer than `duration`, cancelling it.
    ///
    /// ```swift
    /// let remote = HTTPLoader(url: feedURL).decoding([FeedItem].self)
    ///     .timeout(.seconds(5))                 // each attempt
    ///     .retry(.exponential(attempts: 3))
    ///     .timeout(.seconds(12))                // all attempts together
    /// ```
    /// - Parameters:
    ///   - duration: the deadline, measured from the start of each load.
    ///   - clock: the clock that measures it; a `ManualClock` in tests.
    public func timeout<C: Clock>(_ duration: Duration, clock: C) -> TimeoutLoader<Self, C> where C.Duration == Duration {
        TimeoutLoader(base: self, duration: duration, clock: clock)
    }

    /// Fails with ``TimeoutError`` when a load takes longer than `duration` on the continuous clock.
    public func timeout(_ duration: Duration) -> TimeoutLoader<Self, ContinuousClock> {
        TimeoutLoader(base: self, duration: duration, clock: ContinuousClock())
    }
}
