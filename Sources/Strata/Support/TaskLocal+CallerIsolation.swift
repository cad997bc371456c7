extension TaskLocal {
    /// Binds `value` for the duration of `operation`, keeping a caller on the main actor there.
    ///
    /// The standard library's `withValue(_:operation:isolation:)` (Swift 6.3) calls its operation as a
    /// plain `async` function, and a closure passed to it that was written in a
    /// `nonisolated(nonsending)` function, or in one isolated to an actor known only at run time,
    /// hands its callees no isolation: the first `nonisolated(nonsending)` function that awaits
    /// anything inside it then continues on the global executor. A load bound on the main actor
    /// would leave it and come back. A closure written in a `@MainActor` function is isolated to the
    /// main actor statically, and its callees stay there; so a main-actor caller is bound through
    /// one. Other callers (the global executor, other actors) bind with `withValue` as it is.
    @inlinable
    func binding<R: Sendable>(
        _ value: Value, isolation: isolated (any Actor)? = #isolation, _ operation: sending () async throws -> R
    ) async rethrows -> R {
        if let isolation, isolation === MainActor.shared {
            return try await Self.bindingOnMainActor(self, value, operation)
        }
        return try await withValue(value, operation: operation)
    }

    @inlinable @MainActor
    static func bindingOnMainActor<R: Sendable>(
        _ local: TaskLocal<Value>, _ value: Value, _ operation: sending () async throws -> R
    ) async rethrows -> R {
        try await local.withValue(value) { try await operation() }
    }
}
