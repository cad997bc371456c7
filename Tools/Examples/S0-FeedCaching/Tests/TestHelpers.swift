import Foundation
import Logging
@_spi(StrataInternals) import Strata
import StrataTesting
import FeedCachingExample

/// DemoServer (imported by the end-to-end tests) has a `FeedItem` of its own, the server's; in these
/// tests the feed is always the example's.
typealias FeedItem = FeedCachingExample.FeedItem

/// A feed no other test uses.
func uniqueFeed(count: Int = 2) -> [FeedItem] {
    (0..<count).map { index in
        FeedItem(id: UUID(), title: "item \(index)", imageURL: URL(string: "https://example.com/\(UUID().uuidString).png")!)
    }
}

/// A logger that drops everything.
let quietLogger = Logger(label: "quiet", factory: { _ in SwiftLogNoOpLogHandler() })

/// A cache the test controls, speaking both dialects: the article's ``FeedCacheStore`` (`save`, `load`)
/// and Strata's `Store`. The hand-written decorator and `staleIfError` therefore run against the same
/// double, and a test can assert the exact messages either one sends.
final class FeedCacheSpy: FeedCacheStore, Store, Sendable {
    typealias Key = String
    typealias Value = [FeedItem]

    enum Message: Equatable, Sendable {
        case save([FeedItem])
        case load
        case delete
    }

    private struct State {
        var messages: [Message] = []
        var stored: CacheEntry<[FeedItem]>?
        var saveError: (any Error)?
        var loadError: (any Error)?
    }

    private let state = Locked(State())

    /// A cache holding `feed` (saved at `storedAt`), or nothing.
    init(holding feed: [FeedItem]? = nil, storedAt: Date = Date(timeIntervalSince1970: 1_767_225_600)) {
        state.withLock { $0.stored = feed.map { CacheEntry(value: $0, storedAt: storedAt) } }
    }

    /// Every message so far, in order.
    var messages: [Message] { state.withLock { $0.messages } }
    /// What a load would find now.
    var storedFeed: [FeedItem]? { state.withLock { $0.stored?.value } }

    /// Makes every save fail with `error`.
    func failSaves(with error: any Error) { state.withLock { $0.saveError = error } }
    /// Makes every load fail with `error`.
    func failLoads(with error: any Error) { state.withLock { $0.loadError = error } }

    // MARK: FeedCacheStore

    func save(_ items: [FeedItem]) async throws {
        try record(.save(items), then: CacheEntry(value: items, storedAt: Date()))
    }

    func load() async throws -> [FeedItem] {
        try retrieve()?.value ?? []
    }

    // MARK: Store

    func retrieve(_ key: String) async throws -> CacheEntry<[FeedItem]>? {
        try retrieve()
    }

    func insert(_ entry: CacheEntry<[FeedItem]>, for key: String) async throws {
        try record(.save(entry.value), then: entry)
    }

    func delete(_ key: String) async throws {
        state.withLock {
            $0.messages.append(.delete)
            $0.stored = nil
        }
    }

    private func retrieve() throws -> CacheEntry<[FeedItem]>? {
        let (stored, error) = state.withLock { state in
            state.messages.append(.load)
            return (state.stored, state.loadError)
        }
        if let error { throw error }
        return stored
    }

    private func record(_ message: Message, then entry: CacheEntry<[FeedItem]>) throws {
        let error = state.withLock { state -> (any Error)? in
            state.messages.append(message)
            if state.saveError == nil { state.stored = entry }
            return state.saveError
        }
        if let error { throw error }
    }
}

extension FeedCacheSpy: CustomStringConvertible {
    var description: String { "cache spy" }
}

/// Runs `body` with a `UserDefaults` suite name of its own. The suite is cleared before and removed
/// after, also when `body` throws.
func withScopedDefaultsSuite<Result>(
    isolation: isolated (any Actor)? = #isolation, _ body: (String) async throws -> Result
) async throws -> Result {
    let name = "strata.examples.feed.\(UUID().uuidString)"
    UserDefaults(suiteName: name)?.removePersistentDomain(forName: name)
    defer { UserDefaults(suiteName: name)?.removePersistentDomain(forName: name) }
    return try await body(name)
}

extension FeedCacheSpy {
    /// The cache holds one feed: removing everything deletes it (recorded as a delete).
    func removeAll() async throws { try await delete("") }
}
