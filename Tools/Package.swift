// swift-tools-version: 6.2
// Strata's tools: the `strata` command, the demo server, the five example systems and the integration
// tests (real server, real processes). A sibling package of the library, so none of this (nor
// Hummingbird or ArgumentParser) reaches the graph of an app that depends on Strata.
//
//     swift run --package-path Tools strata demo
//     swift test --package-path Tools
import PackageDescription

// libFuzzer's driver without its `main` (the toolchain's libclang_rt.fuzzer_no_main), linked into
// `strata-fuzz` when scripts/fuzz.sh names it; without it `strata-fuzz` only replays inputs. Linked
// whole: the shim refers to the driver weakly, which alone would not pull it from the archive.
let fuzzerLinkerSettings: [LinkerSetting] = Context.environment["STRATA_FUZZER_NO_MAIN"].map { archive in
    [.unsafeFlags(["-Xlinker", "--whole-archive", "-Xlinker", archive, "-Xlinker", "--no-whole-archive", "-lstdc++"])]
} ?? []

let package = Package(
    name: "StrataTools",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "strata", targets: ["strata"]),
    ],
    dependencies: [
        .package(name: "Strata", path: "..", traits: ["URLSession", "SQLite", "Postgres", "AsyncHTTPClient", "Inspector"]),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.0.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.65.0"),
        // Already in the graph (SwiftNIO's); the proxy's hit counter (macOS 13: no `Synchronization.Atomic`).
        .package(url: "https://github.com/apple/swift-atomics.git", from: "1.2.0"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.24.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.5.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
    ],
    targets: [
        // The demo server: a real Hummingbird server on loopback with fault injection. A target of its
        // own, so the tests that need only a server (the examples' among them) build no scenario.
        .target(
            name: "DemoServer",
            dependencies: [
                .product(name: "Strata", package: "Strata"),
                // What it serves: S0's feed item and S2's post.
                "FeedCachingExample",
                "PostsRepositoryExample",
                .product(name: "Hummingbird", package: "hummingbird"),
                // Its stop is the service group's graceful shutdown.
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                // The demo server drops a connection without answering (a lost acknowledgement).
                .product(name: "NIOCore", package: "swift-nio"),
                // Its stop turns every event loop of the group it runs on.
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The narrated scenarios of `strata demo`, one per source system (and two more).
        .target(
            name: "StrataDemo",
            dependencies: [
                .product(name: "Strata", package: "Strata"), .product(name: "StrataOutbox", package: "Strata"), .product(name: "StrataQueries", package: "Strata"),
                "DemoServer",
                "FeedCachingExample",
                "FileFeedStoreExample",
                "PostsRepositoryExample",
                "CrossCuttingExample",
                "OfflineFirstExample",
                .product(name: "Logging", package: "swift-log"),
                // `strata demo --web`: the feed as a page, with the inspector mounted beside it.
                .product(name: "StrataInspector", package: "Strata"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            resources: [
                .copy("Resources/default_feed.json"), .copy("Resources/default_posts.json"),
                .copy("Resources/default_posts_end.json"),
            ]
        ),
        // `strata proxy`: one node of a caching HTTP reverse proxy (RFC 9111 shared cache) whose nodes
        // share one PostgreSQL: memory tier, shared tier, backplane, fleet lock.
        .target(
            name: "StrataProxy",
            dependencies: [
                .product(name: "Strata", package: "Strata"),
                .product(name: "StrataPostgres", package: "Strata"),
                .product(name: "StrataAsyncHTTPClient", package: "Strata"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Atomics", package: "swift-atomics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "StrataProxyTests",
            dependencies: [
                "StrataProxy", .product(name: "Strata", package: "Strata"), .product(name: "StrataTesting", package: "Strata"),
            ]
        ),
        .target(
            name: "StrataCLI",
            dependencies: [
                "StrataProxy",
                // `strata demo --scenario fleet` relays the nodes' PostgreSQL connections, to take the database away.
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                // The fleet demo's clients.
                .product(name: "StrataAsyncHTTPClient", package: "Strata"),
                .product(name: "Strata", package: "Strata"), .product(name: "StrataOutbox", package: "Strata"), .product(name: "StrataQueries", package: "Strata"),
                .product(name: "StrataSQLite", package: "Strata"),
                .product(name: "StrataPostgres", package: "Strata"),
                "StrataDemo",
                "DemoServer",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "strata",
            dependencies: ["StrataCLI", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),

        // The five source systems (the articles Strata grew from), each in its own article's vocabulary.
        .target(
            name: "FeedCachingExample",
            dependencies: [.product(name: "Strata", package: "Strata"), .product(name: "StrataQueries", package: "Strata"), .product(name: "Logging", package: "swift-log")],
            path: "Examples/S0-FeedCaching/Sources"
        ),
        .testTarget(
            name: "FeedCachingExampleTests",
            dependencies: [
                "FeedCachingExample", "DemoServer",
                .product(name: "Strata", package: "Strata"), .product(name: "StrataQueries", package: "Strata"), .product(name: "StrataTesting", package: "Strata"),
            ],
            path: "Examples/S0-FeedCaching/Tests"
        ),
        .target(
            name: "FileFeedStoreExample",
            dependencies: [.product(name: "Strata", package: "Strata"), "FeedCachingExample"],
            path: "Examples/S1-FileFeedStore/Sources"
        ),
        .testTarget(
            name: "FileFeedStoreExampleTests",
            dependencies: [
                "FileFeedStoreExample", "FeedCachingExample",
                .product(name: "Strata", package: "Strata"), .product(name: "StrataTesting", package: "Strata"),
            ],
            path: "Examples/S1-FileFeedStore/Tests",
            // As in the library's targets (StrataTesting among them): the specs, which are not
            // Sendable, run on the executor of the `withLeakTracking` body that made them. Not on
            // every Tools target yet: with it on FeedCachingExample too, Swift 6.3.1 crashes in
            // `_swift_implicitisolationactor_to_executor_cast` (FeedStoreCacheAdapterTests, a
            // `#expect(throws:)` closure calling a protocol witness across the two modules).
            swiftSettings: [.enableUpcomingFeature("NonisolatedNonsendingByDefault")]
        ),
        .target(
            name: "PostsRepositoryExample",
            dependencies: [.product(name: "Strata", package: "Strata"), .product(name: "StrataOutbox", package: "Strata")],
            path: "Examples/S2-PostsRepository/Sources"
        ),
        .testTarget(
            name: "PostsRepositoryExampleTests",
            dependencies: [
                "PostsRepositoryExample", "DemoServer",
                .product(name: "Strata", package: "Strata"), .product(name: "StrataOutbox", package: "Strata"), .product(name: "StrataTesting", package: "Strata"),
            ],
            path: "Examples/S2-PostsRepository/Tests"
        ),
        .target(
            name: "CrossCuttingExample",
            dependencies: [.product(name: "Strata", package: "Strata"), .product(name: "StrataQueries", package: "Strata"), .product(name: "Logging", package: "swift-log")],
            path: "Examples/S3-CrossCutting/Sources"
        ),
        .testTarget(
            name: "CrossCuttingExampleTests",
            dependencies: [
                "CrossCuttingExample",
                .product(name: "Strata", package: "Strata"), .product(name: "StrataQueries", package: "Strata"), .product(name: "StrataTesting", package: "Strata"),
            ],
            path: "Examples/S3-CrossCutting/Tests"
        ),
        .target(
            name: "OfflineFirstExample",
            dependencies: [.product(name: "Strata", package: "Strata")],
            path: "Examples/S4-OfflineFirst/Sources",
            resources: [.copy("Resources/default_data.json")]
        ),
        .testTarget(
            name: "OfflineFirstExampleTests",
            dependencies: [
                "OfflineFirstExample", "DemoServer",
                .product(name: "Strata", package: "Strata"), .product(name: "StrataTesting", package: "Strata"),
            ],
            path: "Examples/S4-OfflineFirst/Tests"
        ),

        // A helper process the crash-safety tests start and kill with SIGKILL while it writes.
        .executableTarget(
            name: "strata-crash-writer",
            dependencies: [
                .product(name: "Strata", package: "Strata"), .product(name: "StrataOutbox", package: "Strata"),
                .product(name: "StrataSQLite", package: "Strata"),
            ],
            path: "Tests/CrashWriter"
        ),
        // Coverage-guided fuzzing (scripts/fuzz.sh): the targets, the `strata-fuzz` executable that
        // runs one under libFuzzer or replays inputs, and the test that replays every committed corpus.
        .target(name: "StrataFuzzShim", path: "Fuzz/Shim"),
        .target(
            name: "StrataFuzzTargets",
            dependencies: [
                "StrataProxy", "StrataCLI", "StrataDemo", "DemoServer",
                .product(name: "Strata", package: "Strata"), .product(name: "StrataOutbox", package: "Strata"),
                .product(name: "StrataPostgres", package: "Strata"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "Fuzz/Targets"
        ),
        .executableTarget(
            name: "strata-fuzz",
            dependencies: ["StrataFuzzShim", "StrataFuzzTargets"],
            path: "Fuzz/Main",
            linkerSettings: fuzzerLinkerSettings
        ),
        .testTarget(
            name: "StrataFuzzTargetsTests",
            dependencies: ["StrataFuzzTargets", "strata-fuzz"]
        ),
        .testTarget(
            name: "StrataIntegrationTests",
            dependencies: [
                "DemoServer", "StrataDemo", "OfflineFirstExample", "StrataCLI", "strata", "strata-crash-writer",
                .product(name: "Strata", package: "Strata"), .product(name: "StrataOutbox", package: "Strata"), .product(name: "StrataQueries", package: "Strata"),
                .product(name: "StrataSQLite", package: "Strata"),
                .product(name: "StrataTesting", package: "Strata"),
                .product(name: "StrataAsyncHTTPClient", package: "Strata"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "StrataInspector", package: "Strata"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ],
            resources: [.copy("Resources/default_feed.json")]
        ),
    ],
    swiftLanguageModes: [.v6]
)

// The sanitizer runs instrument Tools' own modules as Package.swift at the root does Strata's (see
// there): `STRATA_SANITIZER=thread` or `=address`, dependencies left as the plain build made them.
if let sanitizer = Context.environment["STRATA_SANITIZER"], ["thread", "address"].contains(sanitizer) {
    let coverage = sanitizer == "address" ? ["-sanitize-coverage=edge,indirect-calls,trace-cmp,inline-8bit-counters,pc-table"] : []
    for target in package.targets where target.type != .system {
        // Coverage guides the fuzzers through the code under test, never through the tests.
        let guided = target.type == .test ? [] : coverage
        target.swiftSettings = (target.swiftSettings ?? []) + [.unsafeFlags(["-sanitize=\(sanitizer)"] + guided)]
        target.linkerSettings = (target.linkerSettings ?? []) + [.unsafeFlags(["-sanitize=\(sanitizer)"])]
    }
}
