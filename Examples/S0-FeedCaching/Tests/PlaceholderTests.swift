import Testing
@testable import FeedCachingExample

@Test func placeholderBuilds() { _ = FeedCachingExamplePlaceholder.self }
