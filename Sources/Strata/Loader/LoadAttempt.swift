import Foundation

/// What the loaders of one logical load tell the operators around them about the requests they sent.
///
/// ``Loader/retrying(_:)`` runs its base inside a `LoadAttempt` (a task-local, so it reaches through
/// any chain of operators), and ``Loader/coalesced(in:)->CoalescedLoader<Self,Self.Input>`` hears of it
/// through the flight's ``LoadRecorder``; a
/// loader that sends a **non-idempotent** request (a `POST`, a `PATCH`) says so with
/// ``noteNonIdempotentRequest(hasIdempotencyKey:)``. Then:
/// - `retry` does not send it again unless it carried an idempotency key or the policy opts in
///   (``RetryPolicy/retriesNonIdempotentRequests``);
/// - `coalesced` does not share it: every caller's write reaches the server.
///
/// ``HTTPLoader`` does this itself. A loader of your own that writes (a custom client, an RPC) calls
/// ``noteNonIdempotentRequest(hasIdempotencyKey:)`` before it sends, and may take
/// ``currentIdempotencyKey`` as the key it sends, which stays the same across every retry of one load.
public final class LoadAttempt: Sendable {
    /// The attempt of the operator nearest to the current task, if any.
    @TaskLocal static var current: LoadAttempt?

    /// The key every attempt of this logical load sends (an enclosing retry's key when there is one).
    /// Kept as a `UUID` and formatted only when a request asks for it: formatting costs a `printf`,
    /// which a read that sends no write should not pay.
    /// Made on first use (an enclosing attempt's when there is one): most attempts (a coalesced memory
    /// hit) never send a write, and making a random `UUID` costs more than the rest of the attempt.
    var idempotencyKey: String { idempotencyUUID.uuidString }
    private var idempotencyUUID: UUID {
        if let parent { return parent.idempotencyUUID }
        return state.withLock { writes in
            if let uuid = writes.key { return uuid }
            let uuid = UUID()
            writes.key = uuid
            return uuid
        }
    }
    private let parent: LoadAttempt?
    private let onWrite: (@Sendable () -> Void)?
    private let state = Locked(Writes())

    private struct Writes: Sendable {
        var sentWrite = false
        var sentUnkeyedWrite = false
        var key: UUID?
    }

    @usableFromInline
    init(onWrite: (@Sendable () -> Void)? = nil) {
        let parent = LoadAttempt.current
        self.parent = parent
        self.onWrite = onWrite
    }

    /// Whether a non-idempotent request was sent in this attempt.
    var sentNonIdempotentRequest: Bool { state.withLock { $0.sentWrite } }
    /// Whether a non-idempotent request without an idempotency key was sent in this attempt.
    var sentUnkeyedNonIdempotentRequest: Bool { state.withLock { $0.sentUnkeyedWrite } }

    private func note(hasKey: Bool) {
        state.withLock { writes in
            writes.sentWrite = true
            if !hasKey { writes.sentUnkeyedWrite = true }
        }
        onWrite?()
        parent?.note(hasKey: hasKey)
    }

    /// Runs `body` as this attempt.
    @usableFromInline
    func run<T: Sendable>(_ body: sending () async throws -> T) async rethrows -> T {
        try await LoadAttempt.$current.binding(self, body)
    }

    /// Tells the operators around the current load that it is sending a non-idempotent request:
    /// `retry` will not repeat it unless `hasIdempotencyKey` (or the policy opts in), and `coalesced`
    /// will not share it. Call it before sending. Does nothing outside such operators.
    ///
    /// For a loader that implements only ``Loader/load(_:)``, whose context is bound as its task's. A
    /// loader that implements ``Loader/load(_:in:)`` calls
    /// ``noteNonIdempotentRequest(hasIdempotencyKey:in:)`` with the context it was given.
    public static func noteNonIdempotentRequest(hasIdempotencyKey: Bool) {
        noteNonIdempotentRequest(hasIdempotencyKey: hasIdempotencyKey, in: .current)
    }

    /// Tells the operators around the load that `context` belongs to that it is sending a
    /// non-idempotent request (see ``noteNonIdempotentRequest(hasIdempotencyKey:)``): what a loader
    /// that implements ``Loader/load(_:in:)`` calls before it sends a write.
    public static func noteNonIdempotentRequest(hasIdempotencyKey: Bool, in context: LoadContext) {
        current?.note(hasKey: hasIdempotencyKey)
        context.noteWrite()
    }

    /// The idempotency key of the current logical load: the same for every attempt a
    /// ``Loader/retrying(_:)`` makes, a new one for each load outside a retry.
    public static var currentIdempotencyKey: String { current?.idempotencyKey ?? UUID().uuidString }

    /// Whether `method` is idempotent (RFC 9110 §9.2.2): repeating it has the effect of sending it once.
    public static func isIdempotent(method: String) -> Bool {
        ["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"].contains(method.uppercased())
    }
}
