import Testing
@testable import FileFeedStoreExample

@Test func placeholderBuilds() { _ = FileFeedStoreExamplePlaceholder.self }
