import Foundation
import Observation
@_spi(StrataInternals) import Strata
import StrataOutbox

/// A value a mutation shows in a live query before the server answers (``QueryClient/mutation(optimistic:invalidates:onSuccess:whenOffline:perform:)``).
public struct OptimisticUpdate<Variables: Sendable>: Sendable {
    /// Sets the value of the query for `key` (if it is in memory) when the mutation starts, and
    /// hands back the rollback.
    let apply: @Sendable (_ client: QueryClient, _ variables: Variables) -> (@Sendable () -> Void)?

    /// Sets the value of the query for `key` with `update` (given the value it holds and the
    /// mutation's variables; `nil`: leave it) while the mutation runs. If the mutation fails, the
    /// query is put back exactly as it was (value, provenance, store time). When it cannot be — a
    /// load answered meanwhile, or another call's optimistic value sits on this one (two calls
    /// overlapping, the first failing first) — it is invalidated instead, so the source's copy
    /// replaces whatever is shown. A query not in memory is not touched.
    public static func setting<Value: Sendable & Equatable>(
        _ key: QueryKey, as type: Value.Type = Value.self, _ update: @escaping @Sendable (_ value: Value?, _ variables: Variables) -> Value?
    ) -> OptimisticUpdate {
        OptimisticUpdate { client, variables in
            guard let query = client.heldQuery(key, as: Value.self), let point = query.setValue({ update($0, variables) }) else { return nil }
            // Not restored (a load answered since, or another call's value sits on this one and was
            // not taken off first): what is shown may still hold this call's value, so the source's
            // copy is asked for.
            return { if !query.restore(point) { query.invalidate() } }
        }
    }
}

/// How a call of a ``Mutation`` ended.
public enum MutationOutcome<Output: Sendable>: Sendable {
    /// The server answered.
    case completed(Output)
    /// Offline, the write was handed to the outbox, which delivers it when the network returns.
    case queued(OutboxEntry)

    /// The server's answer, if it answered.
    public var output: Output? {
        if case .completed(let output) = self { output } else { nil }
    }
}

/// A write a screen makes and waits for (a post, a like, a rename), with its state: whether it runs,
/// what it was made with, what the server answered or why it failed. Made by
/// ``QueryClient/mutation(optimistic:invalidates:onSuccess:whenOffline:perform:)``.
///
/// A call shows its optimistic values in the live queries it names at once; if it fails, they are
/// rolled back to exactly what they held; if it succeeds, the queries it invalidates refetch (and
/// `onSuccess` may set values from the answer). Offline, a mutation given `whenOffline` hands its
/// write to the outbox instead (durable, delivered when the network returns).
///
/// Use a mutation for a write whose answer the screen needs now (an error to show, an id to open);
/// use the outbox (``PendingWrites``) for writes that must survive a relaunch and need no answer.
///
/// The state follows the latest call (a button tapped twice shows the second); ``reset()`` goes back
/// to idle (a call running goes on, and its outcome is not shown).
public final class Mutation<Variables: Sendable, Output: Sendable>: Sendable {
    struct State: Sendable {
        var calls: UInt64 = 0
        var version: UInt64 = 0
        var observers: [UInt64: @Sendable (UInt64, MutationSnapshot<Variables, Output>) -> Void] = [:] {
            didSet { observerCount = observers.count }
        }
        /// How many observe (an integer to check: the dictionary's type is generic).
        var observerCount = 0
        var nextObserver: UInt64 = 0
        /// Last: its layout depends on the generic types (the fields before it are at fixed offsets).
        var machine = MutationStateMachine<Variables, Output>()
    }

    private let state = Locked(State())
    private let deliveries = Locked(DeliveryQueue())
    private let client: QueryClient
    private let optimistic: [OptimisticUpdate<Variables>]
    private let invalidates: [QueryKey]
    private let onSuccess: (@Sendable (_ output: Output, _ variables: Variables, _ client: QueryClient) -> Void)?
    private let whenOffline: (@Sendable (_ variables: Variables) async throws -> OutboxEntry)?
    private let perform: @Sendable (_ variables: Variables) async throws -> Output

    init(
        client: QueryClient, optimistic: [OptimisticUpdate<Variables>], invalidates: [QueryKey],
        onSuccess: (@Sendable (Output, Variables, QueryClient) -> Void)?,
        whenOffline: (@Sendable (Variables) async throws -> OutboxEntry)?,
        perform: @escaping @Sendable (Variables) async throws -> Output
    ) {
        self.client = client
        self.optimistic = optimistic
        self.invalidates = invalidates
        self.onSuccess = onSuccess
        self.whenOffline = whenOffline
        self.perform = perform
    }

    /// The state as it is now.
    public var current: MutationSnapshot<Variables, Output> { state.withLock { $0.machine.snapshot } }

    /// The number of the latest change of state.
    var version: UInt64 { state.withLock { $0.version } }

    /// Runs the write with `variables`: shows its optimistic values, performs it (or, offline, hands
    /// it to the outbox when the mutation has `whenOffline`), then invalidates and updates the
    /// queries on success, or rolls the optimistic values back on failure.
    ///
    /// - Returns: the server's answer, or the outbox entry it was queued as.
    /// - Throws: the error `perform` (or `whenOffline`) threw, after the rollback. Cancelling the
    ///   calling task cancels `perform`'s work as it honours cancellation; a write the server
    ///   answered stays a success.
    @discardableResult
    public func mutate(_ variables: Variables) async throws -> MutationOutcome<Output> {
        let now = client.environment.now()
        let call = update { state in
            state.calls += 1
            return .started(call: state.calls, variables, at: now)
        }
        var rollbacks: [@Sendable () -> Void] = []
        for update in optimistic {
            if let rollback = update.apply(client, variables) { rollbacks.append(rollback) }
        }
        do {
            if let whenOffline, !client.isOnline {
                let entry = try await whenOffline(variables)
                // The outbox's pending writes show it from now on (queries with ``PendingWrites``):
                // queued first, then the optimistic values go, so it is never missing in between.
                for rollback in rollbacks.reversed() { rollback() }
                update { _ in .queued(call: call, entry) }
                return .queued(entry)
            }
            // An answer is an answer, even to a caller cancelled meanwhile: the server has the write.
            let output = try await perform(variables)
            onSuccess?(output, variables, client)
            for key in invalidates { client.invalidate(prefix: key) }
            update { _ in .succeeded(call: call, output) }
            return .completed(output)
        } catch {
            for rollback in rollbacks.reversed() { rollback() }
            update { _ in .failed(call: call, QueryError(error)) }
            throw error
        }
    }

    /// Back to idle: the latest call's state is forgotten (a call running goes on; its outcome is
    /// not shown, and its rollback still happens).
    public func reset() {
        update { _ in .reset }
    }

    /// The state now, then each change, for as long as the iteration lasts.
    public func snapshots() -> AsyncStream<MutationSnapshot<Variables, Output>> {
        let (stream, continuation) = AsyncStream.makeStream(of: MutationSnapshot<Variables, Output>.self, bufferingPolicy: .bufferingNewest(16))
        let id = observe { _, snapshot in continuation.yield(snapshot) }
        continuation.onTermination = { [weak self] _ in self?.state.withLock { _ = $0.observers.removeValue(forKey: id) } }
        return stream
    }

    /// Makes `deliver` an observer (handed the current state first, then each change with its
    /// number, in order); returns its number.
    func observe(_ deliver: @escaping @Sendable (UInt64, MutationSnapshot<Variables, Output>) -> Void) -> UInt64 {
        let (id, batch) = state.withLock { state -> (UInt64, DeliveryQueue.Batch) in
            state.nextObserver += 1
            state.observers[state.nextObserver] = deliver
            let (version, snapshot) = (state.version, state.machine.snapshot)
            return (state.nextObserver, deliveries.withLock { queue in
                queue.append { deliver(version, snapshot) }
                return queue.take()
            })
        }
        DeliveryQueue.hand(batch, thenWhatIsQueuedIn: deliveries)
        return id
    }

    func removeObserver(_ id: UInt64) {
        state.withLock { _ = $0.observers.removeValue(forKey: id) }
    }

    /// Applies the event `make` returns, under the lock, and hands the new state to the observers
    /// after it (never under it: see ``Query``'s deliveries); returns the call number.
    @discardableResult
    private func update(_ make: (inout State) -> MutationStateMachine<Variables, Output>.Event) -> UInt64 {
        let (call, batch) = state.withLock { state -> (UInt64, DeliveryQueue.Batch) in
            let event = make(&state)
            let call = state.calls
            guard state.machine.handle(event) else { return (call, DeliveryQueue.Batch()) }
            state.version += 1
            guard state.observerCount > 0 else { return (call, DeliveryQueue.Batch()) }
            let (version, snapshot, observers) = (state.version, state.machine.snapshot, Array(state.observers.values))
            return (call, deliveries.withLock { queue in
                queue.append { for deliver in observers { deliver(version, snapshot) } }
                return queue.take()
            })
        }
        DeliveryQueue.hand(batch, thenWhatIsQueuedIn: deliveries)
        return call
    }

}

extension QueryClient {
    /// A mutation: a write a screen makes and waits for, with optimistic values in the live queries it
    /// names (see ``Mutation``).
    ///
    /// ```swift
    /// let post = queries.mutation(
    ///     optimistic: [.setting(["feed"], as: [FeedItem].self) { items, draft in [draft.optimistic] + (items ?? []) }],
    ///     invalidates: [["feed"]],
    ///     perform: { (draft: Draft) in try await api.publish(draft) })
    /// try await post.mutate(draft)   // the row shows at once; a refusal takes it away
    /// ```
    ///
    /// - Parameters:
    ///   - optimistic: the values shown while a call runs, rolled back if it fails.
    ///   - invalidates: key prefixes invalidated when a call succeeds (their observed queries refetch).
    ///   - onSuccess: runs with the server's answer before the invalidations (set a query's value
    ///     from it with ``setValue(for:as:_:)``).
    ///   - whenOffline: when the client is offline (``setOnline(_:)``), the write goes here instead
    ///     of `perform`: hand it to the outbox (`outbox.enqueue(…)`) and return the entry. Its
    ///     optimistic values are rolled back once it is queued: the queries' ``PendingWrites`` show it
    ///     from then on (match the write by an id, so it is never shown twice).
    ///   - perform: the write.
    public func mutation<Variables: Sendable, Output: Sendable>(
        optimistic: [OptimisticUpdate<Variables>] = [], invalidates: [QueryKey] = [],
        onSuccess: (@Sendable (_ output: Output, _ variables: Variables, _ client: QueryClient) -> Void)? = nil,
        whenOffline: (@Sendable (_ variables: Variables) async throws -> OutboxEntry)? = nil,
        perform: @escaping @Sendable (_ variables: Variables) async throws -> Output
    ) -> Mutation<Variables, Output> {
        Mutation(client: self, optimistic: optimistic, invalidates: invalidates, onSuccess: onSuccess, whenOffline: whenOffline, perform: perform)
    }
}

/// A ``Mutation`` observed from the main actor: an `@Observable` object a view model holds, whose
/// state a view reads (`isPending` for a spinner, `error` for an alert).
///
/// ```swift
/// @MainActor @Observable final class ComposeModel {
///     let post: LiveMutation<Draft, FeedItem>
///     init(queries: QueryClient) { post = queries.mutation(perform: api.publish).observed() }
/// }
/// // in the view: Button("Post") { Task { try? await model.post.mutate(draft) } }.disabled(model.post.isPending)
/// ```
@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
@MainActor
public final class LiveMutation<Variables: Sendable, Output: Sendable>: Observable {
    /// The mutation observed.
    public let mutation: Mutation<Variables, Output>
    private var stored: MutationSnapshot<Variables, Output>
    private var version: UInt64 = 0
    private let registrar = ObservationRegistrar()
    /// Built once: a key path of a generic class is built anew on every literal (see ``LiveQuery``).
    private let path: KeyPath<LiveMutation, MutationSnapshot<Variables, Output>>
    private var task: Task<Void, Never>?
    private let observer: UInt64
    private let catchingUp = CatchUpWaiters()

    init(mutation: Mutation<Variables, Output>) {
        self.mutation = mutation
        stored = mutation.current
        path = \.snapshot
        let (stream, continuation) = AsyncStream.makeStream(
            of: (UInt64, MutationSnapshot<Variables, Output>).self, bufferingPolicy: .bufferingNewest(1))
        observer = mutation.observe { version, snapshot in continuation.yield((version, snapshot)) }
        let id = observer
        continuation.onTermination = { [weak mutation] _ in mutation?.removeObserver(id) }
        task = Task { @MainActor [weak self] in
            for await (version, snapshot) in stream {
                guard let self else { return }
                guard version > self.version else { continue }
                self.version = version
                self.registrar.withMutation(of: self, keyPath: self.path) { self.stored = snapshot }
                self.catchingUp.resume(upTo: version)
            }
        }
    }

    isolated deinit {
        task?.cancel()
        catchingUp.cancelAll()
    }

    /// Suspends until this object shows the mutation's latest state.
    ///
    /// - Throws: `CancellationError` when the waiting task is cancelled.
    package func caughtUp() async throws {
        try await catchingUp.wait(for: mutation.version, shown: version)
    }

    /// The mutation's state, as last delivered to the main actor.
    public var snapshot: MutationSnapshot<Variables, Output> {
        registrar.access(self, keyPath: path)
        return stored
    }
    /// Where the latest call is.
    public var status: MutationSnapshot<Variables, Output>.Status { snapshot.status }
    /// Whether the latest call runs.
    public var isPending: Bool { snapshot.isPending }
    /// What the latest call was made with.
    public var variables: Variables? { snapshot.variables }
    /// The server's answer to the latest call.
    public var data: Output? { snapshot.data }
    /// Why the latest call failed.
    public var error: QueryError? { snapshot.error }

    /// Runs the mutation (``Mutation/mutate(_:)``).
    @discardableResult
    public func mutate(_ variables: Variables) async throws -> MutationOutcome<Output> {
        try await mutation.mutate(variables)
    }

    /// Back to idle (``Mutation/reset()``).
    public func reset() {
        mutation.reset()
    }
}

extension Mutation {
    /// This mutation observed from the main actor (see ``LiveMutation``).
    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @MainActor
    public func observed() -> LiveMutation<Variables, Output> {
        LiveMutation(mutation: self)
    }
}
