import Testing
@testable import DataLoaderChainExample

@Test func placeholderBuilds() { _ = DataLoaderChainExamplePlaceholder.self }
