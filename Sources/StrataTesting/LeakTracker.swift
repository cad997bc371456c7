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
}

/// Runs `body` with a ``LeakTracker`` and, once `body` has returned and released its locals, throws
/// ``LeakError`` if anything it tracked is still alive.
///
/// What `body` returns is still alive at the check: don't return a tracked object (a one-line
/// closure `{ leaks in leaks.track(x) }` returns it — write `_ = leaks.track(x)`).
public func withLeakTracking<Result>(
    isolation: isolated (any Actor)? = #isolation,
    _ body: (LeakTracker) async throws -> Result
) async throws -> Result {
    let tracker = LeakTracker()
    let result = try await body(tracker)
    try tracker.verifyNoLeaks()
    return result
}
