/// How a race of an operation against a deadline ended.
@_spi(StrataInternals)
public enum DeadlineRaceOutcome<Value: Sendable>: Sendable {
    /// The operation finished first.
    case value(Result<Value, any Error>)
    /// The deadline passed first: the operation's task was cancelled and left behind.
    case deadline
    /// The caller's task was cancelled first.
    case cancelled
}

/// Runs `operation` in a task of its own against a sleep of `duration` on `clock`, and returns the
/// first of its result, the deadline and the caller's cancellation. The losing tasks are cancelled,
/// never awaited: an operation that ignores cancellation cannot hold the caller. `TimingOutLoader`,
/// the outbox's handler deadline, the bounded shutdowns of the PostgreSQL store and backplane and the
/// proxy's soft timeout all race this way. To let an operation go on past the deadline (a soft
/// timeout), race a task's `value`: awaiting it does not cancel the task.
@_spi(StrataInternals)
public func raceAgainstDeadline<Value: Sendable>(
    clock: any Clock<Duration>, duration: Duration, _ operation: @escaping @Sendable () async throws -> Value
) async -> DeadlineRaceOutcome<Value> {
    let race = DeadlineRace<Value>()
    return await withTaskCancellationHandler {
        await withCheckedContinuation { continuation in
            race.wait(continuation)
            race.add(Task {
                let result: Result<Value, any Error>
                do { result = .success(try await operation()) } catch { result = .failure(error) }
                race.resolve(.value(result))
            })
            race.add(Task {
                do {
                    try await clock.sleep(for: duration)
                    race.resolve(.deadline)
                } catch {
                    // Cancelled: the operation finished first, or the caller left.
                }
            })
        }
    } onCancel: {
        race.resolve(.cancelled)
    }
}

/// The state of one ``raceAgainstDeadline(clock:duration:_:)``: resolved once, by whichever comes
/// first; resolving cancels the other tasks.
final class DeadlineRace<Value: Sendable>: Sendable {
    private struct State: Sendable {
        var continuation: CheckedContinuation<DeadlineRaceOutcome<Value>, Never>?
        var outcome: DeadlineRaceOutcome<Value>?
        var tasks: [Task<Void, Never>] = []
    }

    private let state = Locked(State())

    func wait(_ continuation: CheckedContinuation<DeadlineRaceOutcome<Value>, Never>) {
        let decided = state.withLock { state -> DeadlineRaceOutcome<Value>? in
            if let outcome = state.outcome { return outcome }
            state.continuation = continuation
            return nil
        }
        if let decided { continuation.resume(returning: decided) }
    }

    func add(_ task: Task<Void, Never>) {
        let decided = state.withLock { state -> Bool in
            if state.outcome != nil { return true }
            state.tasks.append(task)
            return false
        }
        if decided { task.cancel() }
    }

    func resolve(_ outcome: DeadlineRaceOutcome<Value>) {
        let taken = state.withLock { state -> (CheckedContinuation<DeadlineRaceOutcome<Value>, Never>?, [Task<Void, Never>])? in
            guard state.outcome == nil else { return nil }
            state.outcome = outcome
            defer { state.continuation = nil; state.tasks = [] }
            return (state.continuation, state.tasks)
        }
        guard let (continuation, tasks) = taken else { return }
        for task in tasks { task.cancel() }
        continuation?.resume(returning: outcome)
    }
}
