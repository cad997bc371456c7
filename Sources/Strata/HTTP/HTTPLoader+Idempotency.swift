import Foundation

extension HTTPLoader {
    /// This loader, sending a `header` (`Idempotency-Key` by default) with each non-idempotent
    /// request (`POST`, `PATCH`) that does not carry one already. The key is the same for every
    /// attempt of one logical load a ``Loader/retrying(_:)`` makes, and new for each load, so
    /// a server that honours the header creates the object once however often the load is retried;
    /// with it, `retry` repeats such a request (without it, it does not: see ``LoadAttempt``).
    ///
    /// ```swift
    /// let create = HTTPLoader<NewPost>.postJSON(to: postsURL).addingIdempotencyKey().retrying(.exponential())
    /// ```
    public func addingIdempotencyKey(header: String = "Idempotency-Key") -> HTTPLoader {
        var copy = self
        copy.idempotencyKeyHeader = header
        return copy
    }

    /// Adds the idempotency key when asked to, and tells the ``LoadAttempt`` around the load that
    /// it sends a non-idempotent request.
    func prepareForSending(_ request: HTTPRequest, in context: LoadContext) -> HTTPRequest {
        guard !LoadAttempt.isIdempotent(method: request.method.rawValue) else { return request }
        var request = request
        if let header = idempotencyKeyHeader, let name = HTTPField.Name(header), request.headerFields[name] == nil {
            request.headerFields[name] = LoadAttempt.currentIdempotencyKey
        }
        let hasKey = HTTPField.Name(idempotencyKeyHeader ?? "Idempotency-Key").map { request.headerFields[$0] != nil } ?? false
        LoadAttempt.noteNonIdempotentRequest(hasIdempotencyKey: hasKey, in: context)
        return request
    }
}
