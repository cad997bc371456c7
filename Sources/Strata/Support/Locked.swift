#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A value guarded by one mutex, in one allocation.
///
/// The state and its `pthread_mutex_t` live in a single `ManagedBuffer` (the state as the header, the
/// mutex as the one tail element), so a `Locked` costs one heap allocation, like `Synchronization.Mutex`
/// boxed in a class would. Copies of a `Locked` share the same lock and state.
///
/// Why not the standard types: `Synchronization.Mutex` needs macOS 15 / iOS 18 and Strata supports older
/// Apple systems; on Linux, ThreadSanitizer cannot see `Mutex`'s futex hand-off and reports races inside
/// `withLock` (tried; see the CHANGELOG). `OSAllocatedUnfairLock` exists only on Apple platforms, and
/// this package is tested on Linux only. One implementation everywhere keeps what CI checks identical
/// to what ships.
@_spi(StrataInternals)
public struct Locked<State>: @unchecked Sendable {
    // @unchecked: `ManagedBuffer` is never Sendable, so the compiler cannot see this. The state (the
    // buffer's header) is only read or written inside the `withLock` methods, between
    // `pthread_mutex_lock` and `pthread_mutex_unlock` on the buffer's mutex, and nothing else reaches
    // it (`storage` is not public); the mutex is initialised before `init` returns and destroyed only
    // in the buffer's `deinit`, when no reference is left; `init` requires `State: Sendable`, so values
    // leaving the lock are Sendable.
    @usableFromInline let storage: Storage

    public init(_ initial: State) where State: Sendable {
        let buffer = Storage.create(minimumCapacity: 1) { _ in initial }
        storage = unsafeDowncast(buffer, to: Storage.self)
        storage.withUnsafeMutablePointerToElements { mutex in
            mutex.initialize(to: pthread_mutex_t())
            pthread_mutex_init(mutex, nil)
        }
    }

    /// Runs `body` with exclusive access to the state.
    @inlinable
    public func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        try storage.withUnsafeMutablePointers { state, mutex in
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            return try body(&state.pointee)
        }
    }

    /// Runs `body` with exclusive access to the state, calling `onContention` first when another
    /// thread holds the lock (so a test can see that a caller had to wait).
    public func withLock<Result>(
        onContention: () -> Void, _ body: (inout State) throws -> Result
    ) rethrows -> Result {
        try storage.withUnsafeMutablePointers { state, mutex in
            if pthread_mutex_trylock(mutex) != 0 {
                onContention()
                pthread_mutex_lock(mutex)
            }
            defer { pthread_mutex_unlock(mutex) }
            return try body(&state.pointee)
        }
    }

    /// The state (header) and its mutex (the single tail element), allocated together.
    @usableFromInline
    final class Storage: ManagedBuffer<State, pthread_mutex_t> {
        deinit {
            withUnsafeMutablePointerToElements { mutex in
                pthread_mutex_destroy(mutex)
                _ = mutex.deinitialize(count: 1)
            }
        }
    }
}
