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
    // @unchecked: `state` is only read or written while `mutex` is held (see `withLock`), and
    // `State: Sendable` is required by the initialiser, so values leaving the lock are Sendable.
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
}
