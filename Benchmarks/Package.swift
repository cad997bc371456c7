// swift-tools-version: 6.1
// Strata's benchmarks: a separate package, so `swift test` at the root never builds them.
// Run every scenario and print the ratios against their baselines: `Benchmarks/compare` (docs/BENCHMARKS.md).
import PackageDescription

let package = Package(
    name: "StrataBenchmarks",
    platforms: [.macOS(.v13)],
    dependencies: [
        .package(name: "Strata", path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        // The data every scenario shares: the 1,000-item feed and its baselines' helpers.
        .target(
            name: "BenchmarkFixtures",
            dependencies: [.product(name: "Strata", package: "Strata")]
        ),
        .executableTarget(
            name: "StrataBenchmarks",
            dependencies: [
                "BenchmarkFixtures",
                .product(name: "Strata", package: "Strata"),
                .product(name: "StrataSQLite", package: "Strata"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/StrataBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
