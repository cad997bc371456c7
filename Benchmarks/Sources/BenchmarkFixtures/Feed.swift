import Foundation

/// A feed article shaped like a real API's: nested, optional, arrays, dates, URLs, UUIDs.
/// 1,000 of them encode to about 325 KB of JSON, the size the benchmarks' targets are stated for.
public struct Article: Codable, Equatable, Hashable, Sendable {
    /// The article's author.
    public struct Author: Codable, Equatable, Hashable, Sendable {
        public var name: String
        public var profileURL: URL
        public var isVerified: Bool
    }

    public var id: UUID
    public var title: String
    public var summary: String
    public var author: Author
    public var imageURL: URL
    public var publishedAt: Date
    public var tags: [String]
    public var commentCount: Int
    public var rating: Double?
    public var isFeatured: Bool
}

/// Deterministic benchmark data.
public enum BenchmarkFeed {
    /// `count` articles; the same every run.
    public static func make(count: Int = 1_000) -> [Article] {
        let topics = ["swift", "concurrency", "caching", "offline", "linux", "sqlite", "http", "testing"]
        return (0..<count).map { index in
            let hex = String(format: "%012X", index)
            return Article(
                id: UUID(uuidString: "5E7A0B1C-0000-4000-8000-\(hex)")!,
                title: "Article \(index)",
                summary: "Summary \(index).",
                author: Article.Author(
                    name: "Author \(index % 37)",
                    profileURL: URL(string: "https://example.com/a/\(index % 37)")!,
                    isVerified: index % 3 == 0
                ),
                imageURL: URL(string: "https://example.com/i/\(index).jpg")!,
                publishedAt: Date(timeIntervalSince1970: 1_750_000_000 + Double(index) * 3_600),
                tags: [topics[index % topics.count], topics[(index / 3) % topics.count]],
                commentCount: (index * 7) % 250,
                rating: index % 4 == 0 ? nil : Double(index % 50) / 10,
                isFeatured: index % 10 == 0
            )
        }
    }
}
