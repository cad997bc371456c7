import Foundation

extension Store {
    /// Writes `value` (with `validators`) stamped `storedAt` (the environment's `now` by default), reporting a failure
    /// to the environment's logger and the load report instead of throwing it: a failed cache write
    /// never fails a load, and the store keeps its previous entry.
    func insertReportingFailure(
        _ value: Value, for key: Key, storedAt: Date? = nil, validators: CacheValidators = .none, in context: LoadContext
    ) async {
        let environment = context.environment
        do {
            try await insert(value, for: key, storedAt: storedAt ?? environment.now(), validators: validators)
            context.record(.cacheWritten(store: storeDescription, key: "\(key)"))
        } catch {
            environment.logger.warning(
                "cache write failed; the load still succeeds and the previous entry is kept",
                metadata: ["store": "\(storeDescription)", "key": "\(key)", "error": "\(error)"])
            context.record(.cacheWriteFailed(store: storeDescription, key: "\(key)", error: error))
        }
    }
}
