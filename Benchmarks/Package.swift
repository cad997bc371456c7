// swift-tools-version: 6.2
// Strata's benchmarks: a separate package, so `swift test` at the root never builds them.
// Run every scenario and print the ratios against their baselines: `Benchmarks/compare` (docs/BENCHMARKS.md).
import PackageDescription

let package = Package(
    name: "StrataBenchmarks",
    platforms: [.macOS(.v13)],
    // On by default, as for an app (the outbox benchmarks send with URLSessionHTTPClient);
    // `Benchmarks/compare` builds the relaunch programs with `--disable-default-traits` unless given
    // `--url-session`, so the relaunch row measures Strata as a Linux server on AsyncHTTPClient gets it.
    traits: [
        .trait(name: "StrataURLSession", description: "Builds Strata with its URLSession trait (FoundationNetworking, libcurl)."),
        .default(enabledTraits: ["StrataURLSession"]),
    ],
    dependencies: [
        .package(
            name: "Strata", path: "..",
            traits: ["SQLite", "Postgres", .trait(name: "URLSession", condition: .when(traits: ["StrataURLSession"]))]),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
        // The raw GRDB baseline of the SQLiteStore scenario (the same GRDB StrataSQLite resolves).
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.0.0"),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
        // The raw select baseline of FleetProbe's L2 hit (the same PostgresNIO StrataPostgres resolves).
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.21.0"),
    ],
    targets: [
        // The data every scenario shares: the 1,000-item feed and its baselines' helpers.
        .target(
            name: "BenchmarkFixtures",
            dependencies: [
                .product(name: "Strata", package: "Strata"), .product(name: "StrataOutbox", package: "Strata"),
                .product(name: "StrataQueries", package: "Strata"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        // The two programs the relaunch scenario spawns: a new process serving the cached feed through a
        // FileStore chain, and its baseline, a program that only reads and decodes the JSON file.
        .executableTarget(
            name: "RelaunchStrata",
            dependencies: [
                .product(name: "Strata", package: "Strata"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(name: "RelaunchBaseline"),
        // One scenario in a loop, for `valgrind --tool=callgrind` (docs/BENCHMARKS.md, "How to profile").
        .executableTarget(
            name: "BenchProbe",
            dependencies: [
                "BenchmarkFixtures",
                .product(name: "Strata", package: "Strata"), .product(name: "StrataOutbox", package: "Strata"), .product(name: "StrataQueries", package: "Strata"), .product(name: "StrataTesting", package: "Strata"),
                .product(name: "StrataSQLite", package: "Strata"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        // The query half of Benchmarks/soak/soak.sh: a QueryClient through a million loads, printing
        // its resident memory as it goes.
        .executableTarget(
            name: "SoakQueries",
            dependencies: [.product(name: "Strata", package: "Strata"), .product(name: "StrataQueries", package: "Strata")]
        ),
        // The fleet tier against a real PostgreSQL (STRATA_POSTGRES_URL): L1 and L2 hits, notification
        // latency, the stampede. Not part of `compare`, which needs no database.
        .executableTarget(
            name: "FleetProbe",
            dependencies: [
                .product(name: "Strata", package: "Strata"),
                .product(name: "StrataPostgres", package: "Strata"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "StrataBenchmarks",
            dependencies: [
                "BenchmarkFixtures",
                .product(name: "Strata", package: "Strata"), .product(name: "StrataOutbox", package: "Strata"), .product(name: "StrataQueries", package: "Strata"),
                .product(name: "StrataSQLite", package: "Strata"),
                .product(name: "StrataTesting", package: "Strata"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/StrataBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ],
    swiftLanguageModes: [.v6]
)

// SE-0461, as in the library's own targets: a nonisolated `async` function runs on its caller's executor.
for target in package.targets {
    target.swiftSettings = (target.swiftSettings ?? []) + [.enableUpcomingFeature("NonisolatedNonsendingByDefault")]
}
