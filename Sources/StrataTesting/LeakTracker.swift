/// Objects a test created that are still alive when it ends.
public struct LeakError: Error, CustomStringConvertible {
    /// One line per leaked object: its type and where it was tracked.
    public var leaks: [String]
    public var description: String {
        "\(leaks.count) object(s) outlived the test (a retain cycle or a task still holding them):\n"
            + leaks.map { "  - \($0)" }.joined(separator: "\n")
    }
}

/// Tracks objects a test creates and checks that every one is deallocated when the test is done
/// (Essential Feed's `trackForMemoryLeaks`, usable from Swift Testing or XCTest).
///
/// ```swift
/// @Test func loadsFeed() async throws {
///     try await withLeakTracking { leaks in
///         let store = leaks.track(FileStore<[FeedItem]>(directory: dir))
///         …
///     }   // throws LeakError if `store` is still alive here
/// }
/// ```
public final class LeakTracker {
    private struct Entry {
        weak var object: AnyObject?
        var label: String
    }

    private var entries: [Entry] = []

    public init() {}

    /// Tracks `object` and returns it, so tracking fits in an expression.
    @discardableResult
    public func track<T: AnyObject>(_ object: T, fileID: String = #fileID, line: Int = #line) -> T {
        entries.append(Entry(object: object, label: "\(T.self) tracked at \(fileID):\(line)"))
        return object
    }

    /// The tracked objects still alive.
    public var leaks: [String] { entries.filter { $0.object != nil }.map(\.label) }

    /// Throws ``LeakError`` when a tracked object is still alive.
    public func verifyNoLeaks() throws {
        let leaked = leaks
        if !leaked.isEmpty { throw LeakError(leaks: leaked) }
    }

    /// Throws ``LeakError`` when a tracked object is still alive once the tasks that may still hold
    /// one (an unstructured `Task` finishing just after the test's body) have had a chance to end.
    ///
    /// Waits only while something is alive: first by yielding (100 times: enough for a task on the
    /// caller's actor, which cannot run until the caller suspends), then by re-checking on real time
    /// (`ContinuousClock`), less and less often, until `releaseTimeout` has passed.
    /// - Throws: ``LeakError``; `CancellationError` as soon as the task is cancelled while it waits.
    public func verifyNoLeaks(
        isolation: isolated (any Actor)? = #isolation, releaseTimeout: Duration
    ) async throws {
        var isClean: Bool { entries.allSatisfy { $0.object == nil } }
        if isClean { return }
        for _ in 0..<100 {
            await Task.yield()
            try Task.checkCancellation()
            if isClean { return }
        }
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: releaseTimeout)
        var pause = Duration.microseconds(100)
        while clock.now < deadline {
            try await Task.sleep(for: min(pause, clock.now.duration(to: deadline)), clock: clock)
            if isClean { return }
            pause = min(pause * 2, .milliseconds(10))
        }
        try verifyNoLeaks()
    }
}

/// Runs `body` with a ``LeakTracker`` and, once `body` has returned and released its locals, throws
/// ``LeakError`` if anything it tracked is still alive.
///
/// An object a task still holds when `body` returns (a `Task { }` that ends just after) is given
/// time to be released: the check yields, then re-checks on real time for up to `releaseTimeout`
/// (see ``LeakTracker/verifyNoLeaks(isolation:releaseTimeout:)``). A test with nothing alive does
/// not wait at all; a real leak costs `releaseTimeout` before it is reported.
///
/// What `body` returns is still alive at the check: don't return a tracked object (a one-line
/// closure `{ leaks in leaks.track(x) }` returns it — write `_ = leaks.track(x)`).
/// - Throws: what `body` throws; ``LeakError``; `CancellationError` when the task is cancelled
///   during the check.
public func withLeakTracking<Result>(
    isolation: isolated (any Actor)? = #isolation,
    releaseTimeout: Duration = .seconds(1),
    _ body: (LeakTracker) async throws -> Result
) async throws -> Result {
    let tracker = LeakTracker()
    let result = try await body(tracker)
    try await tracker.verifyNoLeaks(releaseTimeout: releaseTimeout)
    return result
}
