import Foundation

/// Collects the ``LoadEvent``s of one load. Loaders report through ``LoadRecorder/record(_:)``;
/// it costs one task-local read when nobody is listening.
///
/// Recorders nest: an observing operator (``Loader/logged(to:level:failureLevel:)``, ``Loader/metered(_:factory:)``, …)
/// installs its own for the part of the chain it wraps, and every event also reaches the recorders
/// outside it.
public final class LoadRecorder: Sendable {
    @TaskLocal static var current: LoadRecorder?
    /// The innermost ``NamedLoader``'s name, so a leaf reports the tier as the chain names it.
    @TaskLocal static var tierName: String?

    /// The recorder of the enclosing load, which also receives every event.
    let parent: LoadRecorder?
    /// Called with each event as it happens (an observing operator logs or counts it at once).
    let onEvent: (@Sendable (LoadEvent) -> Void)?
    /// Called when the load sends a non-idempotent request (a coalesced flight stops being shared).
    let onWrite: (@Sendable () -> Void)?

    /// The tier name a loader of your own should put in the ``Provenance`` it records: the name given
    /// by the innermost enclosing ``Loader/named(_:)``, or `description` when there is none.
    public static func tierName(default description: @autoclosure () -> String) -> String {
        tierName ?? description()
    }

    private let storage = Locked<[LoadEvent]>([])

    @usableFromInline
    init(parent: LoadRecorder? = nil, onEvent: (@Sendable (LoadEvent) -> Void)? = nil, onWrite: (@Sendable () -> Void)? = nil) {
        self.parent = parent
        self.onEvent = onEvent
        self.onWrite = onWrite
    }

    /// Tells every recorder of the current load that it is sending a non-idempotent request
    /// (``LoadAttempt/noteNonIdempotentRequest(hasIdempotencyKey:)`` does). One walk up the chain,
    /// so a coalesced flight needs no task-local of its own besides its recorder.
    static func noteWrite() {
        var next = current
        while let recorder = next {
            recorder.onWrite?()
            next = recorder.parent
        }
    }

    /// The events recorded so far.
    @usableFromInline
    var events: [LoadEvent] { storage.withLock { $0 } }

    /// Records `event` for the load running in the current task, if anyone is listening.
    public static func record(_ event: @autoclosure () -> LoadEvent) {
        guard let recorder = current else { return }
        recorder.deliver(event())
    }

    /// Appends `event` here and in every enclosing recorder.
    @usableFromInline
    func deliver(_ event: LoadEvent) {
        var next: LoadRecorder? = self
        while let recorder = next {
            recorder.storage.withLock { $0.append(event) }
            recorder.onEvent?(event)
            next = recorder.parent
        }
    }

    /// Whether the current task's load is being recorded (lets loaders skip building expensive events).
    public static var isRecording: Bool { current != nil }

    /// The recorder of the enclosing load (for inlinable code, which cannot reach the task-local).
    @usableFromInline
    static var enclosing: LoadRecorder? { current }

    /// Runs `body` with `name` as the tier name of the loads inside it (for inlinable code).
    @usableFromInline
    static func naming<T: Sendable>(_ name: String, _ body: sending () async throws -> T) async rethrows -> T {
        try await $tierName.binding(name, body)
    }

    /// Runs `body` with `recorder` as the current recorder (for inlinable code).
    @usableFromInline
    static func recording<T: Sendable>(into recorder: LoadRecorder, _ body: sending () async throws -> T) async rethrows -> T {
        try await $current.binding(recorder, body)
    }
}
