#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A value guarded by one mutex, in one allocation.
///
/// The state and its `pthread_mutex_t` live in a single `ManagedBuffer` (``LockedBuffer``: the state as
/// the header, the mutex as the one tail element), so a `Locked` costs one heap allocation, like
/// `Synchronization.Mutex` boxed in a class would. Copies of a `Locked` share the same lock and state.
///
/// Why not the standard types: `Synchronization.Mutex` needs macOS 15 / iOS 18 and Strata supports older
/// Apple systems; on Linux, ThreadSanitizer cannot see `Mutex`'s futex hand-off and reports races inside
/// `withLock`. `OSAllocatedUnfairLock` exists only on Apple platforms, and
/// this package is tested on Linux only. One implementation everywhere keeps what CI checks identical
/// to what ships.
@_spi(StrataInternals)
public struct Locked<State>: Sendable {
    @usableFromInline let guarded: InlinableLocked<State>

    public init(_ initial: State) where State: Sendable {
        guarded = InlinableLocked(initial)
    }

    /// Runs `body` with exclusive access to the state.
    @inlinable
    public func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        try guarded.withLock(body)
    }

    /// Runs `body` with exclusive access to the state, calling `onContention` first when another
    /// thread holds the lock (so a test can see that a caller had to wait).
    public func withLock<Result>(
        onContention: () -> Void, _ body: (inout State) throws -> Result
    ) rethrows -> Result {
        try guarded.buffer.withUnsafeMutablePointers { state, mutex in
            if pthread_mutex_trylock(mutex) != 0 {
                onContention()
                pthread_mutex_lock(mutex)
            }
            defer { pthread_mutex_unlock(mutex) }
            return try body(&state.pointee)
        }
    }
}

/// The storage of ``Locked``: the state (header) and its mutex (the single tail element), allocated
/// together. Internal but usable from inlinable code, so a hot path such as `MemoryStore.retrieve` can
/// be specialised in the caller's module (SPI declarations cannot appear in inlinable code).
///
/// The state is only read or written inside ``withLock(_:)``, between `pthread_mutex_lock` and
/// `pthread_mutex_unlock`; the mutex is initialised in ``make(_:)`` before the buffer is returned and
/// destroyed only in `deinit`, when no reference is left.
@usableFromInline
final class LockedBuffer<State>: ManagedBuffer<State, pthread_mutex_t> {
    /// A buffer holding `initial`, its mutex initialised.
    @usableFromInline
    static func make(_ initial: State) -> LockedBuffer<State> {
        make { initial }
    }

    /// A buffer holding the state `makeState` builds in place (no copy of a state made beforehand).
    @usableFromInline
    static func make(_ makeState: () -> State) -> LockedBuffer<State> {
        let buffer = unsafeDowncast(create(minimumCapacity: 1) { _ in makeState() }, to: LockedBuffer<State>.self)
        buffer.withUnsafeMutablePointerToElements { mutex in
            mutex.initialize(to: pthread_mutex_t())
            pthread_mutex_init(mutex, nil)
        }
        return buffer
    }

    /// Runs `body` with exclusive access to the state.
    @inlinable
    func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        try withUnsafeMutablePointers { state, mutex in
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            return try body(&state.pointee)
        }
    }

    deinit {
        withUnsafeMutablePointerToElements { mutex in
            pthread_mutex_destroy(mutex)
            _ = mutex.deinitialize(count: 1)
        }
    }
}

/// ``LockedBuffer`` as a `Sendable` value: the one type that vouches for the buffer's thread safety.
/// ``Locked`` (SPI, for other modules) wraps it; Strata's inlinable hot paths use it directly, since
/// SPI declarations cannot appear in inlinable code.
///
/// `@unchecked Sendable`: its only stored property is the ``LockedBuffer`` reference, whose state
/// is read and written solely inside `withLock`, under its `pthread_mutex_t`; the lock serialises
/// every access, so sharing the wrapper across tasks shares only that mutex-guarded buffer.
@usableFromInline
struct InlinableLocked<State>: @unchecked Sendable {
    // @unchecked: `ManagedBuffer` is never Sendable, so the compiler cannot see this. The state (the
    // buffer's header) is only read or written between `pthread_mutex_lock` and
    // `pthread_mutex_unlock` on the buffer's mutex (`LockedBuffer.withLock`, and `Locked`'s
    // `withLock(onContention:)`); `buffer` is not public; the mutex is initialised in
    // `LockedBuffer.make` before the buffer is returned and destroyed only in its `deinit`, when no
    // reference is left; `init` requires `State: Sendable`, so values leaving the lock are Sendable.
    @usableFromInline let buffer: LockedBuffer<State>

    @usableFromInline
    init(_ initial: State) where State: Sendable {
        buffer = LockedBuffer.make(initial)
    }

    /// A lock around the state `makeState` builds in place.
    @usableFromInline
    init(making makeState: () -> State) where State: Sendable {
        buffer = LockedBuffer.make(makeState)
    }

    @inlinable
    func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        try buffer.withLock(body)
    }
}
