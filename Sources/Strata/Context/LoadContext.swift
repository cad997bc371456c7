import Foundation

/// What travels with one load down a chain: the ``LoadEnvironment`` it runs in, the recorders
/// listening to it, and the tier name an enclosing ``Loader/named(_:)`` gave it.
///
/// Strata's operators hand the context to the loader they wrap as an argument of
/// ``Loader/load(_:in:)``, so a load through a chain of them reads the task's context once, at the
/// outermost operator, and never binds it: `environment(_:)`, `named(_:)` and an observing operator
/// such as `logged()` each change a copy of it on the way in. The task-local copy (``current``) is
/// for code outside the operators: a loader of your own that implements only ``Loader/load(_:)``
/// runs with the context bound as the task's, so ``LoadEnvironment/current``,
/// ``LoadRecorder/record(_:)`` and ``LoadRecorder/tierName(default:)`` still reach it, and a child
/// task inherits it.
///
/// A decorator of your own forwards the context it is given:
///
/// ```swift
/// struct Audited<Base: Loader>: Loader {
///     let base: Base
///     func load(_ input: Base.Input) async throws -> Base.Output {
///         try await load(input, in: .current)
///     }
///     func load(_ input: Base.Input, in context: LoadContext) async throws -> Base.Output {
///         context.environment.logger.debug("audited load")
///         return try await base.load(input, in: context)
///     }
/// }
/// ```
///
/// Such a loader runs with the context as an argument, not bound as its task's: work it starts in a
/// task of its own gets the context only when handed it (`base.load(input, in: context)` inside the
/// task), or when it binds it there with `context.bound { … }`.
public struct LoadContext: Sendable {
    /// The clocks and logger the load uses.
    public var environment: LoadEnvironment
    /// The innermost recorder listening to the load (each one forwards to its parent), if any.
    @usableFromInline package var recorder: LoadRecorder?
    /// The innermost ``Loader/named(_:)`` around the running loader.
    @usableFromInline var tierName: String?
    /// Copies stored at or before this instant are not fresh: a tier with a freshness policy (not
    /// ``FreshnessPolicy/any``) refuses them, so the load goes past it (to the remote); a tier that
    /// serves any age (a stale fallback) still answers. `nil`: each tier's policy alone decides.
    ///
    /// A live query sets it when it refetches: to the moment of an invalidation or an explicit
    /// refetch, or to "older than its `staleAfter`" for a stale value, so a refetch is not answered
    /// by the chain's own cache with the copy it was asked to replace.
    public var revalidatingSince: Date?
    /// Where the observers inside an immediate attempt put their side effects while an operator
    /// around them (a `map` whose transform can still throw) may yet answer `nil`.
    @usableFromInline var heldEffects: HeldEffects?

    /// A context with `environment`, no recorder and no tier name.
    public init(environment: LoadEnvironment = .live) {
        self.environment = environment
        self.recorder = nil
        self.tierName = nil
        self.revalidatingSince = nil
        self.heldEffects = nil
    }

    /// The one task-local behind ``current``, ``LoadEnvironment/current`` and the static
    /// ``LoadRecorder`` calls.
    ///
    /// Optional, `nil` until a context is bound: reading it where nothing was bound (the outermost
    /// operator of most loads) copies no context out of the task-local's default.
    @usableFromInline @TaskLocal static var taskValue: LoadContext?

    /// The context outside any chain: the live environment, no recorder.
    @usableFromInline static let outside = LoadContext()

    /// The context of the current task: the one bound around a loader that does not take it as an
    /// argument, or around a child task a chain started; outside any chain, the live environment and
    /// no recorder. An operator's ``Loader/load(_:)`` starts its chain from here.
    @inlinable
    public static var current: LoadContext { taskValue ?? outside }

    /// Whether anyone records this load: lets a loader skip building events nobody reads.
    @inlinable
    public var isRecording: Bool { recorder != nil }

    /// Reports `event` to every recorder of this load; builds it only when someone records.
    @inlinable
    public func record(_ event: @autoclosure () -> LoadEvent) {
        guard let recorder else { return }
        recorder.deliver(event())
    }

    /// The tier a leaf loader names in the ``Provenance`` it records: the innermost enclosing
    /// ``Loader/named(_:)``'s name, or `description`.
    @inlinable
    public func tierName(default description: @autoclosure () -> String) -> String {
        tierName ?? description()
    }

    /// This context with `name` as the tier name (``Loader/named(_:)``).
    @inlinable
    public func named(_ name: String) -> LoadContext {
        var context = self
        context.tierName = name
        return context
    }

    /// This context with `environment` (``Loader/environment(_:)``).
    @inlinable
    public func with(_ environment: LoadEnvironment) -> LoadContext {
        var context = self
        context.environment = environment
        return context
    }

    /// This context with `recorder` as the innermost recorder (it must have this context's recorder
    /// as its parent, as ``LoadRecorder`` made by ``recorder(onEvent:onWrite:)`` has).
    @usableFromInline
    package func recording(into recorder: LoadRecorder) -> LoadContext {
        var context = self
        context.recorder = recorder
        return context
    }

    /// A recorder whose parent is this context's recorder; `onEvent` is called with each event and
    /// this context's environment.
    @usableFromInline
    package func recorder(
        onEvent: (@Sendable (LoadEvent, LoadEnvironment) -> Void)? = nil, onWrite: (@Sendable () -> Void)? = nil
    ) -> LoadRecorder {
        LoadRecorder(parent: recorder, environment: environment, onEvent: onEvent, onWrite: onWrite)
    }

    /// Tells every recorder of this load that it is sending a non-idempotent request (a coalesced
    /// flight stops being shared).
    func noteWrite() {
        recorder?.noteWrite()
    }

    /// Whether `other` carries the same environment, recorder and tier name.
    @usableFromInline
    func isSame(as other: LoadContext) -> Bool {
        (recorder?.isSame(as: other.recorder) ?? (other.recorder == nil)) && tierName == other.tierName
            && revalidatingSince == other.revalidatingSince && environment.isSame(as: other.environment)
    }

    /// Runs `body` with this context as the task's, binding it only when it differs from the one
    /// already bound (a chain of Strata's operators passes it along without binding).
    @inlinable
    public func bound<R: Sendable>(
        isolation: isolated (any Actor)? = #isolation, _ body: sending () async throws -> R
    ) async rethrows -> R {
        if isSame(as: Self.current) { return try await body() }
        return try await Self.bindAlways(self, body)
    }

    @usableFromInline
    static func bindAlways<R: Sendable>(
        _ context: LoadContext, isolation: isolated (any Actor)? = #isolation, _ body: sending () async throws -> R
    ) async rethrows -> R {
        try await $taskValue.binding(context, body)
    }

    /// Runs `attempt` — an immediate answer (``Loader/loadImmediately(_:in:)``) — so that an attempt
    /// answering `nil` leaves no trace: its events are held back and reach this context's recorders
    /// only with a value. With nobody recording, `attempt` runs in this context as it is.
    @inlinable
    public func attemptingImmediately<Output>(_ attempt: (LoadContext) -> Output?) -> Output? {
        guard isRecording else { return attempt(self) }
        let held = LoadRecorder(parent: nil, environment: environment)
        guard let value = attempt(recording(into: held)) else { return nil }
        replay(held.events)
        return value
    }

    /// Runs `effect` — an observer's log line, metric, span or report of an immediate answer — now,
    /// or, inside an operator that may still answer `nil`, once that operator has answered.
    @inlinable
    public func afterImmediateAnswer(_ effect: @escaping @Sendable () -> Void) {
        guard let heldEffects else { return effect() }
        heldEffects.add(effect)
    }

    /// Runs `attempt` with the observers' side effects held back, and runs them only if it answers:
    /// for an operator that turns its base's answer into `nil` (a `map` whose transform throws).
    @inlinable
    public func holdingEffects<Output>(_ attempt: (LoadContext) -> Output?) -> Output? {
        if heldEffects != nil { return attempt(self) }
        var context = self
        let effects = HeldEffects()
        context.heldEffects = effects
        guard let value = attempt(context) else { return nil }
        effects.run()
        return value
    }

    /// Delivers `events`, held back during an immediate attempt, to `onEvent` (an observer's own
    /// callback, called as if they had happened now) and to every recorder of this context.
    @usableFromInline
    func replay(_ events: [LoadEvent], onEvent: (@Sendable (LoadEvent, LoadEnvironment) -> Void)? = nil) {
        for event in events {
            onEvent?(event, environment)
            recorder?.deliver(event)
        }
    }

    /// Runs the synchronous `body` with this context as the task's.
    public func bound<R>(_ body: () throws -> R) rethrows -> R {
        try Self.$taskValue.withValue(self, operation: body)
    }
}

extension LoadRecorder {
    /// Records `event` for the load running in the current task, if anyone is listening: for a
    /// loader of your own, which runs with its chain's context bound (``LoadContext/record(_:)`` is
    /// the same call for code that has the context).
    public static func record(_ event: @autoclosure () -> LoadEvent) {
        LoadContext.current.record(event())
    }

    /// Whether the current task's load is being recorded (lets loaders skip building expensive events).
    public static var isRecording: Bool { LoadContext.current.isRecording }

    /// The tier name a loader of your own should put in the ``Provenance`` it records: the name given
    /// by the innermost enclosing ``Loader/named(_:)``, or `description` when there is none.
    public static func tierName(default description: @autoclosure () -> String) -> String {
        LoadContext.current.tierName(default: description())
    }
}

/// The side effects of an immediate answer held until it stands (``LoadContext/holdingEffects(_:)``).
@usableFromInline
final class HeldEffects: Sendable {
    private let effects = Locked<[@Sendable () -> Void]>([])

    @usableFromInline init() {}

    @usableFromInline func add(_ effect: @escaping @Sendable () -> Void) {
        effects.withLock { $0.append(effect) }
    }

    /// Runs the effects, in the order they were added (inner observers first, as a load reports).
    @usableFromInline func run() {
        for effect in effects.withLock({ $0 }) { effect() }
    }
}
