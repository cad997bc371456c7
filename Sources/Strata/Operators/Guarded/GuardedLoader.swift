/// Guards its base loader with a ``CircuitBreaker``; built by ``Loader/guarded(by:)``.
///
/// While the circuit is open, loads throw ``CircuitOpenError`` at once without calling the base, so a
/// ``Loader/fallingBack(to:)`` after it serves the next tier immediately.
public struct GuardedLoader<Base: Loader, C: Clock>: Loader where C.Duration == Duration {
    public typealias Input = Base.Input
    public typealias Output = Base.Output

    public let base: Base
    /// The breaker guarding `base` (read its ``CircuitBreaker/state``, or ``CircuitBreaker/isolate()`` it).
    public let breaker: CircuitBreaker<C>

    public func load(_ input: Input) async throws -> Output {
        try await load(input, in: .current)
    }

    public func load(_ input: Input, in context: LoadContext) async throws -> Output {
        let permit: CircuitBreaker<C>.Permit
        do {
            permit = try breaker.admit(in: context)
        } catch {
            context.record(.breakerRejected(breaker: breaker.name))
            throw error
        }
        do {
            let value = try await base.load(input, in: context)
            breaker.record(true, permit: permit, in: context)
            return value
        } catch {
            let counts = !(error is CancellationError) && !Task.isCancelled && breaker.policy.isFailure(error)
            breaker.record(counts ? false : nil, permit: permit, in: context)
            throw error
        }
    }
}

extension GuardedLoader: LoaderDescribing {
    public var loaderNode: LoaderNode {
        LoaderNode(label: "guarded(by: \(breaker.name), \(breaker.policy))", children: [base.chainNode])
    }
}

extension Loader {
    /// Guards this loader with `breaker`, which may be shared with other loaders.
    ///
    /// ```swift
    /// let api = CircuitBreaker(name: "api", policy: .init(failureRatio: 0.5, breakDuration: .seconds(30)))
    /// let feed = remote.guarded(by: api).fallingBack(to: staleLocal)
    /// ```
    ///
    /// The breaker is made once and passed in, even for one loader: it outlives every load, and its
    /// state is what the app inspects (``CircuitBreaker/state``) and forces (``CircuitBreaker/isolate()``).
    public func guarded<C: Clock>(by breaker: CircuitBreaker<C>) -> GuardedLoader<Self, C> {
        GuardedLoader(base: self, breaker: breaker)
    }
}
