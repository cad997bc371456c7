import Testing
@testable import PostsRepositoryExample

@Test func placeholderBuilds() { _ = PostsRepositoryExamplePlaceholder.self }
