#if canImport(os)
import os
#else
import Synchronization
#endif

/// A value guarded by the platform's lock, shared by reference: copies of a `Locked` guard the same
/// value, and each instance is one allocation.
///
/// On Linux this is `Synchronization.Mutex`, held inline in one final class. On Apple platforms it is
/// `OSAllocatedUnfairLock`, because `Mutex` needs macOS 15 / iOS 18 and Strata supports macOS 13 /
/// iOS 16; the lock allocates its state and its `os_unfair_lock` together.
///
/// Every access goes through ``withLock(_:)``. The guarded value and whatever leaves the lock are
/// `Sendable`, so the compiler checks each use; no `@unchecked Sendable` is involved.
@_spi(StrataInternals)
public struct Locked<State: Sendable>: Sendable {
    #if canImport(os)
    @usableFromInline let lock: OSAllocatedUnfairLock<State>
    #else
    @usableFromInline let box: Box

    /// The one allocation: a `Mutex` is not copyable, so it lives inline in a class the copies share.
    @usableFromInline
    final class Box: Sendable {
        @usableFromInline let mutex: Mutex<State>
        @usableFromInline init(_ initial: State) { mutex = Mutex(initial) }
    }
    #endif

    /// Guards `initial`.
    @inlinable
    public init(_ initial: State) {
        #if canImport(os)
        lock = OSAllocatedUnfairLock(initialState: initial)
        #else
        box = Box(initial)
        #endif
    }

    /// Runs `body` with exclusive access to the value and returns what it returns.
    ///
    /// `body` must not block or call `withLock` on the same instance again.
    @inlinable
    public func withLock<Result: Sendable, Failure: Error>(
        _ body: (inout State) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        #if canImport(os)
        // `withLockUnchecked` rather than `withLock`, whose body must be `@Sendable`: that rule keeps
        // non-Sendable values from entering or leaving the lock, and here `State` and `Result` are
        // both `Sendable`, while `body` runs on the calling thread before this call returns.
        let outcome = lock.withLockUnchecked { state in Swift.Result { () throws(Failure) in try body(&state) } }
        return try outcome.get()
        #else
        return try box.mutex.withLock { state throws(Failure) -> Result in try body(&state) }
        #endif
    }
}
