#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A value guarded by one mutex.
///
/// `Synchronization.Mutex` needs macOS 15 / iOS 18; Strata supports older systems, so it carries this
/// small pthread-based lock instead. Every access to `state` happens inside `withLock`, between
/// `pthread_mutex_lock` and `pthread_mutex_unlock`, so no two threads ever touch it at once.
@_spi(StrataInternals)
public final class Locked<State>: @unchecked Sendable {
    // @unchecked: `state` is only read or written while `mutex` is held (both `withLock` methods lock
    // before touching it and unlock after; nothing else reads it), `mutex` is freed only in `deinit`,
    // when no other reference exists, and `State: Sendable` is required by the initialiser, so values
    // leaving the lock are Sendable. (`Synchronization.Mutex` was tried on Linux: ThreadSanitizer
    // cannot see its futex hand-off and reports races inside `withLock`; see the CHANGELOG.)
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
    @usableFromInline var state: State

    public init(_ initial: State) where State: Sendable {
        state = initial
        mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Runs `body` with exclusive access to the state.
    @inlinable
    public func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&state)
    }

    /// Runs `body` with exclusive access to the state, calling `onContention` first when another
    /// thread holds the lock (so a test can see that a caller had to wait).
    public func withLock<Result>(
        onContention: () -> Void, _ body: (inout State) throws -> Result
    ) rethrows -> Result {
        if pthread_mutex_trylock(mutex) != 0 {
            onContention()
            pthread_mutex_lock(mutex)
        }
        defer { pthread_mutex_unlock(mutex) }
        return try body(&state)
    }
}
