// The relaunch scenario's Strata side: a fresh process that serves the cached 1,000-item feed through
// the chain an app builds at launch (fresh disk copy, else remote written through to the cache, else
// stale disk copy; coalesced, logged). The remote is never reached: the cache is fresh.
//
// Usage: RelaunchStrata <cache directory>
// Exits 0 when it served 1,000 articles, 1 otherwise (the benchmark checks it on every run).
import Foundation
import Logging
import Strata

/// The feed's shape as the app declares it (the same fields as BenchmarkFixtures' `Article`, kept
/// local so this program links only what an app would).
struct Article: Codable, Sendable {
    struct Author: Codable, Sendable {
        var name: String
        var profileURL: URL
        var isVerified: Bool
    }

    var id: UUID
    var title: String
    var summary: String
    var author: Author
    var imageURL: URL
    var publishedAt: Date
    var tags: [String]
    var commentCount: Int
    var rating: Double?
    var isFeatured: Bool
}

struct Unreachable: Error {}

let arguments = CommandLine.arguments
guard arguments.count == 2 else {
    FileHandle.standardError.write(Data("usage: RelaunchStrata <cache directory>\n".utf8))
    exit(2)
}
let store = FileStore<[Article]>(directory: URL(fileURLWithPath: arguments[1], isDirectory: true))
let remote = ClosureLoader<Void, [Article]>("remote") { throw Unreachable() }
let feed = store.loader(key: "feed", freshness: .maxAge(.seconds(24 * 365 * 100 * 3600)))
    .fallingBack(to: remote.writingThrough(in: store, key: "feed"))
    .fallingBack(to: store.loader(key: "feed", freshness: .any))
    .coalesced()
    .logged(to: Logger(label: "relaunch"), level: .debug)
// The load runs in a detached task while the main thread waits: with `async` top-level code the main
// thread parks in libdispatch's `sigsuspend`, where valgrind 3.19 crashes (docs/BENCHMARKS.md profiles
// this program). The process exits from the task.
Task.detached {
    do {
        let articles = try await feed.load()
        exit(articles.count == 1_000 ? 0 : 1)
    } catch {
        FileHandle.standardError.write(Data("RelaunchStrata: \(error)\n".utf8))
        exit(1)
    }
}
DispatchSemaphore(value: 0).wait()  // never signalled: the task ends the process
