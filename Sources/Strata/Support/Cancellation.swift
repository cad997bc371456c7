/// Throws `CancellationError` when `error` is one or the task has been cancelled: a cancelled load
/// reports cancellation, whatever error the cancelled work happened to end with.
@usableFromInline
func rethrowIfCancelled(_ error: any Error) throws {
    if error is CancellationError { throw error }
    if Task.isCancelled { throw CancellationError() }
}
