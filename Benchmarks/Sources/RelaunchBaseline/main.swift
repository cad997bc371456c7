// The relaunch scenario's baseline: a fresh process that reads the feed's JSON file and decodes it,
// nothing else — the least any app serving a cached feed at launch must do.
//
// Usage: RelaunchBaseline <feed.json>
// Exits 0 when it decoded 1,000 articles, 1 otherwise.
import Foundation

/// The feed's shape (the same fields as BenchmarkFixtures' `Article`).
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

let arguments = CommandLine.arguments
guard arguments.count == 2 else {
    FileHandle.standardError.write(Data("usage: RelaunchBaseline <feed.json>\n".utf8))
    exit(2)
}
do {
    let articles = try JSONDecoder().decode([Article].self, from: Data(contentsOf: URL(fileURLWithPath: arguments[1])))
    exit(articles.count == 1_000 ? 0 : 1)
} catch {
    FileHandle.standardError.write(Data("RelaunchBaseline: \(error)\n".utf8))
    exit(1)
}
