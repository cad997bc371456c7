/// Bounds how long its base loader may take; built by ``Loader/timingOut(after:)``.
///
/// - The base load runs in a task of its own (with the caller's priority and task-local values).
///   When the deadline passes first, that task is cancelled and ``TimeoutError`` is thrown **at
///   once**, whether or not the base stops: work that ignores cancellation (a file read blocked in
///   `flock` or `fsync`) is abandoned — it finishes in the background and its result or error is
///   discarded.
/// - When the caller's task is cancelled, the base is cancelled (and abandoned the same way) and
///   `CancellationError` is thrown, not a timeout.
/// - The deadline is measured on the ``LoadEnvironment``'s `clock`, so tests drive it with a manual clock.
/// - A timeout is recorded as ``LoadEvent/timedOut(tier:after:)``; put a ``Loader/retrying(_:)``
///   outside it to retry slow attempts, inside it to bound all attempts together.
public struct TimingOutLoader<Base: Loader>: Loader {
    public typealias Input = Base.Input
    public typealias Output = Base.Output

    public let base: Base
    /// The longest a load may take.
    public let duration: Duration

    init(base: Base, duration: Duration) {
        self.base = base
        self.duration = duration
    }

    public func load(_ input: Input) async throws -> Output {
        try await load(input, in: .current)
    }

    public func load(_ input: Input, in context: LoadContext) async throws -> Output {
        try Task.checkCancellation()
        let clock = context.environment.clock
        let finish = await raceAgainstDeadline(clock: clock, duration: duration) { [base] in try await base.load(input, in: context) }
        switch finish {
        case .value(let result):
            return try result.get()
        case .cancelled:
            throw CancellationError()
        case .deadline:
            let tier = base.chainSummary
            context.record(.timedOut(tier: tier, after: duration))
            throw TimeoutError(tier: tier, timeout: duration)
        }
    }
}

extension TimingOutLoader: LoaderDescribing {
    public var loaderNode: LoaderNode {
        LoaderNode(label: "timingOut(after: \(duration.formattedAge))", children: [base.chainNode])
    }
}

extension Loader {
    /// Fails with ``TimeoutError`` when a load takes longer than `duration`, cancelling it.
    ///
    /// ```swift
    /// let remote = HTTPLoader(url: feedURL).decoding([FeedItem].self)
    ///     .timingOut(after: .seconds(5))                 // each attempt
    ///     .retrying(.exponential(attempts: 3))
    ///     .timingOut(after: .seconds(12))                // all attempts together
    /// ```
    /// - Parameters:
    ///   - duration: the deadline, measured from the start of each load on the ``LoadEnvironment``'s
    ///     `clock` (a `ManualClock` in tests).
    public func timingOut(after duration: Duration) -> TimingOutLoader<Self> {
        TimingOutLoader(base: self, duration: duration)
    }
}
