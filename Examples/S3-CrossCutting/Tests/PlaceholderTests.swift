import Testing
@testable import CrossCuttingExample

@Test func placeholderBuilds() { _ = CrossCuttingExamplePlaceholder.self }
