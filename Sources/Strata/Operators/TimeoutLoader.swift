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

    public var description: String { "\(tier): no result within \(timeout.formattedAge); the load was cancelled" }
}

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
public struct TimeoutLoader<Base: Loader>: Loader {
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
        try Task.checkCancellation()
        let clock = LoadEnvironment.current.clock
        let race = Race()
        let finish = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                race.wait(continuation)
                race.add(Task { [base] in
                    let result: Result<Output, any Error>
                    do { result = .success(try await base.load(input)) } catch { result = .failure(error) }
                    race.resolve(.value(result))
                })
                race.add(Task { [clock, duration] in
                    do {
                        try await clock.sleep(for: duration)
                        race.resolve(.deadline)
                    } catch {
                        // Cancelled: the load finished first, or the caller left.
                    }
                })
            }
        } onCancel: {
            race.resolve(.cancelled)
        }
        switch finish {
        case .value(let result):
            return try result.get()
        case .cancelled:
            throw CancellationError()
        case .deadline:
            let tier = base.chainSummary
            LoadRecorder.record(.timedOut(tier: tier, after: duration))
            throw TimeoutError(tier: tier, timeout: duration)
        }
    }

    enum Finish: Sendable {
        case value(Result<Output, any Error>)
        case deadline
        case cancelled
    }

    /// The first of the load, the deadline and the caller's cancellation to happen: it answers the
    /// caller and cancels the other tasks, without waiting for them to stop.
    final class Race: Sendable {
        private struct State: Sendable {
            var continuation: CheckedContinuation<Finish, Never>?
            var finish: Finish?
            var tasks: [Task<Void, Never>] = []
        }

        private let state = Locked(State())

        func wait(_ continuation: CheckedContinuation<Finish, Never>) {
            let finished = state.withLock { state -> Finish? in
                if let finish = state.finish { return finish }
                state.continuation = continuation
                return nil
            }
            if let finished { continuation.resume(returning: finished) }
        }

        func add(_ task: Task<Void, Never>) {
            let decided = state.withLock { state -> Bool in
                if state.finish != nil { return true }
                state.tasks.append(task)
                return false
            }
            if decided { task.cancel() }
        }

        func resolve(_ finish: Finish) {
            let taken = state.withLock { state -> (CheckedContinuation<Finish, Never>?, [Task<Void, Never>])? in
                guard state.finish == nil else { return nil }
                state.finish = finish
                defer { state.continuation = nil; state.tasks = [] }
                return (state.continuation, state.tasks)
            }
            guard let (continuation, tasks) = taken else { return }
            for task in tasks { task.cancel() }
            continuation?.resume(returning: finish)
        }
    }
}

extension TimeoutLoader: LoaderDescribing {
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
    public func timingOut(after duration: Duration) -> TimeoutLoader<Self> {
        TimeoutLoader(base: self, duration: duration)
    }
}
